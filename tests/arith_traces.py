"""arith-v1 responses of known trace for the trace-error tests (importable from any test folder, tests/conftest.py).

Three kinds of response to a problem, each checked by ``data.arith.steps`` as the comments say:

- ``clean``: the reference solution: right answer, every step right;
- ``wstep``: the first calculation's result off by one, the later lines and the answer line the reference's: the
  right answer reached through a wrong step (a trace error);
- ``wrong``: the reference calculations, then a wrong answer line: a wrong answer (never counted in trace error).
"""

from __future__ import annotations

from posttrainlab.data.arith.problems import Problem
from posttrainlab.data.arith.steps import parse_question

#: six arith-v1 questions, one of each shape (category in the comment)
QUESTIONS = [
    "What is 156 * 7?",  # multiplication
    "What is 11 * 10 - 6?",  # multi_step
    "What is 351 - 148 + 56?",  # multi_step
    "What is 23 + 45?",  # addition
    "What is 500 - 123?",  # subtraction
    "Ann buys 3 boxes of pens with 12 pens in each box. Ann gives away 5 pens. How many pens does Ann have now?",
]


def problem(i: int) -> Problem:
    p = parse_question(QUESTIONS[i])
    assert p is not None, QUESTIONS[i]
    return p


def clean(p: Problem) -> str:
    return p.solution


def wstep(p: Problem) -> str:
    first, *rest = p.lines()
    bad = f"{first.left} {first.op} {first.right} = {first.result + 1}"
    return "\n".join([bad, *(line.render() for line in rest), f"Answer: {p.answer}"])


def wrong(p: Problem) -> str:
    return "\n".join([*(line.render() for line in p.lines()), f"Answer: {p.answer + 1}"])


KINDS = {"clean": clean, "wstep": wstep, "wrong": wrong}

#: two evaluations of p0…p5 (tests/eval/test_trace_error.py works out their trace errors and pairing by hand)
A_GREEDY = ["wstep", "wstep", "wstep", "clean", "clean", "wrong"]
B_GREEDY = ["clean", "clean", "clean", "wstep", "clean", "clean"]
A_SAMPLES = [["clean", "wstep"], ["wrong", "wrong"], ["wstep", "wrong"], ["clean"] * 2, ["clean"] * 2, ["clean"] * 2]
B_SAMPLES = [["clean"] * 2, ["clean", "wstep"], ["clean", "wrong"], ["wstep"] * 2, ["clean"] * 2, ["clean"] * 2]


def record(i: int) -> dict:
    p = problem(i)
    return {"id": f"p{i}", "category": p.category, "prompt": p.prompt, "answer": p.answer}


def eval_rows(greedy: list[str], sampled: list[list[str]] | None = None) -> list[dict]:
    """``samples.jsonl`` rows as ``eval policy`` wrote them before trace error existed (no ``wrong_step``): problem i
    answered by ``KINDS[greedy[i]]``, its samples by ``KINDS[k]`` for each k of ``sampled[i]``."""
    from posttrainlab.eval.policy import grade_rows
    from posttrainlab.eval.sampled import add_votes
    from posttrainlab.grading import get_grader

    records = [record(i) for i in range(len(greedy))]
    responses = [KINDS[k](problem(i)) for i, k in enumerate(greedy)]
    samples = None if sampled is None else [[KINDS[k](problem(i)) for k in ks] for i, ks in enumerate(sampled)]
    rows = grade_rows(records, responses, get_grader("arith"), samples)
    return rows if samples is None else add_votes(rows)
