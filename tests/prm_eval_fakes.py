"""Fakes for the PRM-evaluation tests: scripted sampling backends and scorers (imported by the tests and conftest)."""

from __future__ import annotations

from posttrainlab.data.arith.problems import render_solution
from posttrainlab.data.arith.steps import first_error, parse_question, step_verdicts

#: What sample j of every prompt is (j % 4), with its exact step labels for a 1-step / 2-step problem.
KINDS = ("reference", "first_step_off", "missing_answer", "wrong_answer_line")


def fake_solution(prompt: str, j: int) -> str:
    """Sample ``j`` of the fake policy for ``prompt`` (``KINDS[j % 4]``)."""
    problem = parse_question(prompt)
    assert problem is not None, prompt
    lines = problem.lines()
    kind = KINDS[j % len(KINDS)]
    if kind == "reference":
        return problem.solution
    if kind == "first_step_off":
        first = lines[0]
        bad = f"{first.left} {first.op} {first.right} = {first.result + 1}"
        return "\n".join([bad, *[line.render() for line in lines[1:]], f"Answer: {problem.answer + 1}"])
    if kind == "missing_answer":
        return render_solution(lines, None)
    return render_solution(lines, problem.answer + 10)


class FakeBackend:
    """A ``SamplingBackend`` returning ``fake_solution`` for sample j; records its calls."""

    name = "fake"

    def __init__(self):
        self.calls: list[dict] = []

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        self.calls.append({"prompts": len(prompts), "n": n, "temperature": temperature, "seed": seed})
        out = []
        for p in prompts:
            text = p[-1]["content"] if isinstance(p, list) else p
            out.append([fake_solution(text, j) for j in range(n)])
        return out


class RefusingBackend:
    """A backend that must not be called (the cache should have been used)."""

    name = "fake"

    def generate(self, *args, **kwargs):
        raise AssertionError("sampled again although the cache matched")


class OracleScorer:
    """Scores 0.9 for a right step and 0.1 for a wrong one (exact arith-v1 verdicts; the last step of a
    solution whose answer line is missing is wrong, as in ``first_error``); records batch sizes."""

    def __init__(self, right: float = 0.9, wrong: float = 0.1):
        self.right, self.wrong = right, wrong
        self.batches: list[int] = []

    def score(self, question, steps):
        problem = parse_question(question)
        verdicts = step_verdicts(problem, list(steps))
        k = first_error(problem, list(steps))
        if k >= 0:
            verdicts[k] = False
        return [self.right if ok else self.wrong for ok in verdicts]

    def score_batch(self, items, batch_size=8):
        self.batches.append(len(items))
        return [self.score(q, s) for q, s in items]


class TableScorer:
    """Returns fixed scores per (question, first step), else 0.5 for every step."""

    def __init__(self, table: dict | None = None):
        self.table = table or {}

    def score(self, question, steps):
        return list(self.table.get((question, steps[0]), [0.5] * len(steps)))

    def score_batch(self, items, batch_size=8):
        return [self.score(q, s) for q, s in items]
