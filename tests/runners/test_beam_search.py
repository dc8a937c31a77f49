"""``runners.beam_search.run``: outcomes, accuracy, votes and tokens on arith-v1 with a scripted policy and an
oracle PRM, best-of-N's token count, and bad input.

The scripted policy proposes, after k lines of a solution, the reference solution's line k (proposals 0
and 2) or a wrong answer line ``Answer: A+1`` (proposals 1 and 3); each step costs len(text) + 1 tokens.
The oracle PRM scores a right step 0.9 and a wrong one 0.1. With 2 beams x 2 proposals, round 0 keeps the
reference's first line (active) and the wrong answer (finished, .1: the distinct candidates are just these
two); every later round keeps the reference's next line, until its answer line finishes the second beam.
"""

from __future__ import annotations

import json

import pytest

from posttrainlab.data.arith.problems import Problem
from posttrainlab.data.arith.steps import parse_question, step_verdicts
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.intervals import wilson_interval
from posttrainlab.runners.beam_algorithm import Step
from posttrainlab.runners.beam_search import best_of_n_tokens, run
from posttrainlab.runners.settings import BeamSettings


def problem_of(prompt) -> Problem:
    problem = parse_question(prompt[-1]["content"] if isinstance(prompt, list) else prompt)
    assert problem is not None
    return problem


def wrong_line(problem: Problem) -> str:
    return f"Answer: {problem.answer + 1}"


class ScriptedPolicy:
    """Proposal j after k lines: the reference line k (j even) or ``wrong_line`` (j odd); records calls."""

    def __init__(self):
        self.calls = 0

    def propose(self, requests, n, max_new_tokens):
        self.calls += 1
        out = []
        for r in requests:
            problem = problem_of(r.prompt)
            k = len(r.prefix.splitlines())
            right = problem.solution.splitlines()[k]
            texts = [right if j % 2 == 0 else wrong_line(problem) for j in range(n)]
            out.append([Step(t, len(t) + 1) for t in texts])
        return out

    def count_tokens(self, text: str) -> int:
        return len(text)


class OraclePRM:
    def score_batch(self, items, batch_size=8):
        return [[0.9 if ok else 0.1 for ok in step_verdicts(parse_question(q), list(s))] for q, s in items]


def expected_tokens(problem: Problem) -> int:
    """Round 0: 2 reference first lines + 2 wrong lines; each later round: 1 reference line + 1 wrong line."""
    lines, bad = problem.solution.splitlines(), len(wrong_line(problem)) + 1
    return 2 * (len(lines[0]) + 1) + 2 * bad + sum(len(line) + 1 + bad for line in lines[1:])


def beam_run(arith_dir, out, best_of_n=None, **kw):
    settings = BeamSettings(**{"beams": 2, "proposals": 2, "limit": 5, **kw})
    return run(
        "policy", "prm", arith_dir, out, settings, best_of_n=best_of_n, proposer=ScriptedPolicy(), scorer=OraclePRM(),
        progress=False,
    )  # fmt: skip


def test_run_by_hand(arith_dir, tmp_path):
    out = tmp_path / "beam"
    b = beam_run(arith_dir, out)
    rows = read_jsonl(out / "outcomes.jsonl")
    assert [r["id"] for r in rows] == [f"test-{i:04d}" for i in range(5)]
    for r, prompt_row in zip(rows, read_jsonl(arith_dir / "eval" / "test.jsonl")[:5], strict=True):
        problem = problem_of(prompt_row["prompt"])
        n_lines = len(problem.solution.splitlines())
        assert r["response"] == problem.solution and r["correct"] is True and r["parsed"] == problem.answer
        assert r["score"] == 0.9 and r["tokens"] == expected_tokens(problem) and r["rounds"] == n_lines
        assert r["category"] == prompt_row["category"] and r["answer"] == prompt_row["answer"]
        # finished beams: the wrong answer (round 0), then the reference; the votes over them
        assert [(x["response"], x["finished"], x["score"]) for x in r["beams"]] == [
            (wrong_line(problem), "answer", 0.1),
            (problem.solution, "answer", 0.9),
        ]
        assert r["majority"] == {"beam": 0, "correct": False, "parsed": problem.answer + 1}  # 1-1 tie: seen first
        assert r["prm_vote"] == {"beam": 1, "correct": True, "parsed": problem.answer}  # .9 beats .1
    assert b["accuracy"] == {"value": 1.0, "ci95": list(wilson_interval(5, 5)), "correct": 5, "n": 5}
    assert b["selectors"]["majority"]["value"] == 0.0 and b["selectors"]["prm_vote"]["value"] == 1.0
    assert sum(a["n"] for a in b["per_category"].values()) == 5
    assert b["tokens_per_problem"] == sum(r["tokens"] for r in rows) / 5
    assert b["finish_reasons"] == {"answer": 10} and b["split"] == "test" and b["problems"] == 5
    assert b["settings"]["beams"] == 2 and b["settings"]["aggregation"] == "last" and b["settings"]["seed"] == 0
    assert "best_of_n_tokens_per_problem" not in b
    assert json.loads((out / "beam.json").read_text(encoding="utf-8"))["accuracy"] == b["accuracy"]

    # the same settings again, into the same folder (its own files): the same outcomes
    beam_run(arith_dir, out)
    assert read_jsonl(out / "outcomes.jsonl") == rows


def write_best_of_n(folder, ids, responses, max_new_tokens=4):
    folder.mkdir()
    rows = [{"id": i, "samples": [{"response": t} for t in responses]} for i in ids]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "sampling.json").write_text(json.dumps({"max_new_tokens": max_new_tokens}), encoding="utf-8")


def test_best_of_n_tokens_by_hand(arith_dir, tmp_path):
    """count_tokens = len; max_new_tokens 4: "ab" -> 2 + eos = 3, "abcd" ran out -> 4: 7 per problem.
    Only problems the search ran count ("other" is not one of them)."""
    bon = tmp_path / "bon"
    write_best_of_n(bon, [f"test-{i:04d}" for i in range(5)] + ["other"], ["ab", "abcd"])
    got = best_of_n_tokens(bon, len, [f"test-{i:04d}" for i in range(3)])
    assert got == {"folder": str(bon), "problems": 3, "n": 2, "max_new_tokens": 4, "mean": 7.0}
    b = beam_run(arith_dir, tmp_path / "beam", best_of_n=bon)
    assert b["best_of_n_tokens_per_problem"] == 7.0 and b["best_of_n"]["problems"] == 5
    with pytest.raises(BadInput, match="none of the 2 problems"):
        best_of_n_tokens(bon, len, ["x", "y"])


def test_bad_input(arith_dir, tmp_path):
    with pytest.raises(BadInput, match="beams=0"):
        beam_run(arith_dir, tmp_path / "o", beams=0)
    with pytest.raises(BadInput, match="aggregation 'product'"):
        beam_run(arith_dir, tmp_path / "o", aggregation="product")
    with pytest.raises(BadInput, match="temperature"):
        beam_run(arith_dir, tmp_path / "o", temperature=0)
    with pytest.raises(BadInput, match="no such model folder"):
        run(tmp_path / "nowhere", "prm", arith_dir, tmp_path / "o", scorer=OraclePRM())
    with pytest.raises(BadInput, match="no such folder"):
        beam_run(arith_dir, tmp_path / "o", best_of_n=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no best-of-n run here"):
        beam_run(arith_dir, tmp_path / "o", best_of_n=tmp_path / "empty")
    assert not (tmp_path / "o").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="notes.txt"):
        beam_run(arith_dir, foreign)


def test_a_folder_that_is_no_best_of_n_run_is_refused_before_the_search(arith_dir, tmp_path):
    """A folder with sampling.json whose rows hold no samples (an ``eval policy`` samples.jsonl, say) was counted as
    0 tokens per problem; a missing or foreign one was refused only once the models were loaded (issue #25). Now
    ``best_of_n_samples`` reads it first: the policy is never called and nothing is written."""
    bon = tmp_path / "policy-eval"
    bon.mkdir()
    rows = [{"id": f"test-{i:04d}", "response": "Answer: 1", "correct": False} for i in range(5)]
    (bon / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (bon / "sampling.json").write_text(json.dumps({"max_new_tokens": 4}), encoding="utf-8")
    policy = ScriptedPolicy()
    with pytest.raises(BadInput, match=r"samples.jsonl:1: not a best-of-n row"):
        run(
            "policy",
            "prm",
            arith_dir,
            tmp_path / "o",
            BeamSettings(limit=5),
            proposer=policy,
            scorer=OraclePRM(),
            best_of_n=bon,
        )
    assert policy.calls == 0 and not (tmp_path / "o").exists()


def test_a_policy_folder_as_the_prm_is_refused_before_the_search(arith_dir, tmp_path):
    policy_folder = tmp_path / "sft"
    policy_folder.mkdir()
    (policy_folder / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))
    policy = ScriptedPolicy()
    with pytest.raises(BadInput, match="not a PRM checkpoint"):
        run("policy", policy_folder, arith_dir, tmp_path / "o", BeamSettings(limit=5), proposer=policy)
    assert policy.calls == 0 and not (tmp_path / "o").exists()
