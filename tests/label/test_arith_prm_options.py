"""arith-prm's options (data/arith/prm_labels.py, near_miss.py): every-step labels, the explicit missing-answer
step, near-miss hard negatives from problems outside every evaluation pool; each checked by hand.

The policy is ``FakeBackend`` (conftest): sample j of every prompt is, by ``j % 4``, the reference, a first step
off by one, no answer line, and a wrong answer line.
"""

from __future__ import annotations

import json
import random

import pytest

from posttrainlab.data.arith.near_miss import NEAR_MISSES, carry_deltas, near_miss_options, near_misses
from posttrainlab.data.arith.prm_data import SplitBuilder, label_solution, problem_keys
from posttrainlab.data.arith.prm_labels import (
    EVAL_POOLS,
    NO_ANSWER_STEP,
    ArithPRMOptions,
    every_step_labels,
    label_steps,
    with_no_answer_step,
)
from posttrainlab.data.arith.steps import parse_question, split_steps, step_labels
from posttrainlab.data.formats import FORMATS
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.label.arith_prm import ArithPRMBuild, build
from prm_eval_fakes import KINDS, FakeBackend, fake_solution

Q = "What is 351 - 148 + 56?"  # 351 - 148 = 203, 203 + 56 = 259


@pytest.mark.parametrize(
    "lines, every, explicit",
    [
        # all right
        (["351 - 148 = 203", "203 + 56 = 259", "Answer: 259"], [1, 1, 1], [1, 1, 1]),
        # a slip at line 1: 0 from it on, and the wrong answer line carries its outcome (0)
        (["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"], [1, 0, 0], [1, 0, 0]),
        # a slip at line 0 that ends at the right answer: the answer line carries the outcome, 1
        (["351 - 148 = 204", "204 + 56 = 259", "Answer: 259"], [0, 0, 1], [0, 0, 1]),
        # right lines, wrong answer line: only the answer line is 0
        (["351 - 148 = 203", "203 + 56 = 259", "Answer: 258"], [1, 1, 0], [1, 1, 0]),
        # no answer line: last-step puts a 0 on the right last line; explicit adds a step and keeps the 1
        (["351 - 148 = 203", "203 + 56 = 259"], [1, 0], [1, 1, 0]),
        # a wrong answer line in the middle is an error: the lines after it are 0
        (["351 - 148 = 203", "Answer: 203", "203 + 56 = 259", "Answer: 259"], [1, 0, 0, 1], [1, 0, 0, 1]),
        # prose, then no answer
        (["351 - 148 = 203", "so it is 259"], [1, 0], [1, 0, 0]),
    ],
)
def test_every_step_labels_by_hand(lines, every, explicit):
    problem = parse_question(Q)
    assert every_step_labels(problem, lines) == (lines, every)
    steps, labels = every_step_labels(problem, lines, "explicit")
    assert labels == explicit
    assert steps == (lines if lines[-1].startswith("Answer:") else [*lines, NO_ANSWER_STEP])


def _solutions(question: str) -> list[str]:
    problem = parse_question(question)
    out = [fake_solution(question, j) for j in range(len(KINDS))]
    out += [text for _kind, text in near_misses(problem, 6, random.Random(0))]
    out += ["Answer: 5", "hello", problem.solution + "\nextra line", "Answer: " + str(problem.answer)]
    return out


@pytest.mark.parametrize("question", [Q, "What is 94 * 3?", "What is 12 * 11 - 7?"])
def test_first_error_last_step_is_the_original_step_view(question):
    """first-error + last-step = steps.step_labels on every solution shape (the original build's labels)."""
    problem = parse_question(question)
    for text in _solutions(question):
        steps = split_steps(text)
        assert label_steps(problem, steps) == step_labels(problem, steps), text
        # first-error is every-step cut after its first 0, whatever missing_answer says
        every = label_steps(problem, steps, "every-step", "explicit")
        cut = label_steps(problem, steps, "first-error", "explicit")
        k = every[1].index(0) + 1 if 0 in every[1] else len(every[1])
        assert cut == (every[0][:k], every[1][:k]), text


def test_with_no_answer_step():
    assert with_no_answer_step(["1 + 1 = 2"]) == ["1 + 1 = 2", NO_ANSWER_STEP]
    assert with_no_answer_step(["1 + 1 = 2", "Answer: 2"]) == ["1 + 1 = 2", "Answer: 2"]
    assert with_no_answer_step(["answer: 2"]) == ["answer: 2", NO_ANSWER_STEP]  # not in the required form
    assert with_no_answer_step([]) == [] and with_no_answer_step(["x"], "") == ["x"]


def test_label_solution_keeps_the_step_view_and_adds_every_line():
    text = "351 - 148 = 203\n203 + 56 = 260\nAnswer: 260"
    plain = label_solution(Q, text)
    every = label_solution(Q, text, labels="every-step")
    assert plain == every and every.steps == ["351 - 148 = 203", "203 + 56 = 260"] and every.labels == [1, 0]
    assert plain.every is None and every.every == (split_steps(text), [1, 0, 0])
    missing = label_solution(Q, "351 - 148 = 203\n203 + 56 = 259", missing_answer="explicit")
    assert missing.steps[-1] == NO_ANSWER_STEP and missing.labels == [1, 1, 0] and missing.first_error == 2


# ---- near misses -----------------------------------------------------------------------------------


def test_carry_deltas_by_hand():
    assert carry_deltas("+", 47, 38) == [-10]  # 7 + 8 = 15: the 1 carried to the tens is dropped -> 75
    assert carry_deltas("+", 999, 1) == [-10, -100]  # the carry out of the top digit is written, not carried
    assert carry_deltas("-", 503, 78) == [10, 100]  # two borrows forgotten -> 435, 525
    assert carry_deltas("-", 78, 503) == [] and carry_deltas("+", 12, 34) == []
    assert carry_deltas("*", 94, 3) == [-10] and carry_deltas("*", 156, 7) == [-40, -300]  # 6*7=42, 5*7+4=39
    assert carry_deltas("*", 12, 11) == []  # two-digit by two-digit: no schoolbook single row


def test_near_misses_are_wrong_by_one_line_and_labelled_exactly():
    grader = ArithGrader()
    for question in (Q, "What is 94 * 3?", "What is 503 - 78?", "What is 12 * 11 - 7?"):
        problem = parse_question(question)
        for kind in NEAR_MISSES:
            for lines in near_miss_options(problem, kind):
                text = "\n".join(line.render() for line in lines) + f"\nAnswer: {lines[-1].result}"
                labelled = label_solution(question, text, labels="every-step")
                assert labelled.first_error >= 0 and grader.grade(text, problem.answer).outcome == "wrong_answer"
                assert labelled.every[1][-1] == 0  # the answer line carries the (wrong) outcome
        got = near_misses(problem, 3, random.Random(1))
        assert len({t for _k, t in got}) == len(got) and all(k in NEAR_MISSES for k, _t in got)
    assert near_misses(parse_question("What is 94 * 3?"), 2, random.Random(0)) == near_misses(
        parse_question("What is 94 * 3?"), 2, random.Random(0)
    )


# ---- builds ----------------------------------------------------------------------------------------


def test_options_refuse_evaluation_pools():
    assert set(EVAL_POOLS) == {"test", "dev", "validation", "preference_test"}
    for pool in EVAL_POOLS:
        with pytest.raises(BadInput, match="evaluation pool"):
            ArithPRMOptions(hard_negatives=[pool]).check()
    with pytest.raises(BadInput, match="evaluation pool"):
        ArithPRMOptions(hard_negatives=["rl_extra"]).check(heldout_prompts=("rl_extra",))
    for bad in (ArithPRMOptions(labels="all"), ArithPRMOptions(missing_answer="no"),
                ArithPRMOptions(hard_negatives_per_problem=0)):  # fmt: skip
        with pytest.raises(BadInput):
            bad.check()


def test_every_step_build(arith_dir, tmp_path):
    """every-step: the Math-Shepherd view holds every line with provenance, the step view its cut."""
    options = ArithPRMOptions(labels="every-step", missing_answer="explicit", hard_negatives=["sft_extra"],
                              hard_negative_limit=3, hard_negatives_per_problem=2)  # fmt: skip
    out = tmp_path / "aprm"
    manifest = build("fake", arith_dir, out, ArithPRMBuild(k=4, limit=2), backend=FakeBackend(), options=options)
    assert manifest["labelling"] == {"labels": "every-step", "missing_answer": "explicit"}
    assert manifest["splits"]["train"]["hard_negatives"] == {"sft_extra": 3}
    for split in ("train", "heldout", "preference_test"):
        step = read_jsonl(out / "step" / f"{split}.jsonl")
        ms = read_jsonl(out / "math_shepherd" / f"{split}.jsonl")
        assert len(step) == len(ms) and not list(FORMATS["math-shepherd"].validate(ms))
        assert not list(FORMATS["step"].validate(step))
        for s, m in zip(step, ms, strict=True):
            assert (m["id"], m["source"], m["sample_index"]) == (s["id"], s["source"], s["sample_index"])
            k = len(s["steps"])  # the step view is the Math-Shepherd row cut after its first 0
            assert m["completions"][:k] == s["steps"] and [int(x) for x in m["labels"][:k]] == s["step_labels"]
    heldout = read_jsonl(out / "math_shepherd" / "heldout.jsonl")
    by_kind = {KINDS[r["sample_index"] % 4]: r for r in heldout if r["source"] == "policy"}
    assert by_kind["missing_answer"]["completions"][-1] == NO_ANSWER_STEP
    assert by_kind["missing_answer"]["labels"][-2:] == [True, False]  # the right last line keeps its 1
    assert by_kind["first_step_off"]["labels"][0] is False and by_kind["first_step_off"]["labels"][-1] is False
    train = read_jsonl(out / "step" / "train.jsonl")
    near = [r for r in train if (r["corruption"] or "").startswith("near_miss:")]
    assert len(near) == 3 * 2 and all(r["outcome"] == "wrong_answer" and 0 in r["step_labels"] for r in near)
    assert not problem_keys(train) & problem_keys(read_jsonl(out / "step" / "heldout.jsonl"))
    assert manifest["stats"]["train"]["every_step"]["steps"] == sum(len(r["labels"]) for r in read_jsonl(
        out / "math_shepherd" / "train.jsonl"))  # fmt: skip


def test_default_build_is_unchanged(arith_dir, tmp_path):
    """No options: the Math-Shepherd view is the step view converted, and the rows are the original ones."""
    out = tmp_path / "aprm"
    build("fake", arith_dir, out, ArithPRMBuild(k=4, limit=1), backend=FakeBackend())
    step = read_jsonl(out / "step" / "heldout.jsonl")
    ms = read_jsonl(out / "math_shepherd" / "heldout.jsonl")
    assert all(set(m) == {"prompt", "completions", "labels"} for m in ms)
    assert all(NO_ANSWER_STEP not in r["steps"] for r in step)
    builder = SplitBuilder("x")
    builder.add({"id": "a", "category": "multi_step", "prompt": Q, "answer": 259}, "351 - 148 = 203\n203 + 56 = 259",
                source="policy")  # fmt: skip
    assert builder.rows[0]["step_labels"] == [1, 0] and not builder.every_rows


def test_quickstart_keys(tmp_path):
    """process.labelling.* and process.prm.{input_format, head_learning_rate, freeze_backbone_steps} are quickstart
    keys; every-step labels train on the Math-Shepherd view."""
    from posttrainlab.config import load_config
    from posttrainlab.quickstart.config import QuickstartConfig, resolved

    cfg = load_config(QuickstartConfig, None, [
        "process.labelling.labels=every-step", "process.labelling.missing_answer=explicit",
        "process.labelling.hard_negatives=[sft_extra]", "process.prm.input_format=policy", "process.prm.head=token-cls",
        "process.prm.head_learning_rate=0.001", "process.prm.freeze_backbone_steps=50"])  # fmt: skip
    assert cfg.process.labelling == ArithPRMOptions("every-step", "explicit", ["sft_extra"])
    prm = resolved(cfg, tmp_path / "run").process.prm
    assert prm.dataset.format == "math-shepherd" and prm.input_format == "policy"
    assert prm.dataset.path == str(tmp_path / "run" / "arith-prm" / "math_shepherd" / "train.jsonl")
    assert prm.dataset.eval_path.endswith("math_shepherd/heldout.jsonl")
    first_error = load_config(QuickstartConfig, None, ["process.labelling.labels=first-error"])
    assert resolved(first_error, tmp_path / "run").process.prm.dataset.path.endswith("step/train.jsonl")


def test_cli_options(arith_dir, tiny_policy, tmp_path, capsys):
    """The flags reach the build; an evaluation pool as hard negatives is one line, exit 2, before any sampling."""
    from posttrainlab.cli import main

    def cli(*args: str) -> int:
        try:
            main(list(args))
        except SystemExit as e:
            return e.code
        return 0

    base = ["data", "arith-prm", "--policy", str(tiny_policy), "--data", str(arith_dir), "--k", "1", "--limit", "1",
            "--max-new-tokens", "4", "--no-progress"]  # fmt: skip
    assert cli(*base, "--out", str(tmp_path / "bad"), "--hard-negatives", "dev") == 2
    err = capsys.readouterr().err
    assert "evaluation pool" in err and err.count("\n") == 1 and not (tmp_path / "bad").exists()
    out = tmp_path / "ok"
    assert cli(*base, "--out", str(out), "--labels", "every-step", "--missing-answer", "explicit",
               "--hard-negatives", "rl_extra", "--hard-negative-limit", "2") == 0  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["labelling"] == {"labels": "every-step", "missing_answer": "explicit"}
    assert manifest["splits"]["train"]["hard_negatives"] == {"rl_extra": 2}
    assert all("id" in row for row in read_jsonl(out / "math_shepherd" / "train.jsonl"))
