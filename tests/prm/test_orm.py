"""An outcome reward model on the PRM machinery (issue #39): outcome labels on hand-made rows, the recipe's refusals,
``posttrain train orm`` end to end on a few arith-prm rows, and the best-of-N scorer reading it by its last step.

The rows are arith-prm's Math-Shepherd view under ``--labels every-step --missing-answer explicit``
(``SplitBuilder``), built from hand-written solutions to "What is 351 - 148 + 56?" (answer 259):

    solution                                             step labels   outcome          ORM targets (outcome-last)
    351 - 148 = 203 / 203 + 56 = 259 / Answer: 259       1, 1, 1       correct          1, 1, 1    (-, -, 1)
    351 - 148 = 204 / 204 + 56 = 260 / Answer: 259       0, 0, 1       correct          1, 1, 1    (-, -, 1)
    351 - 148 = 203 / 203 + 56 = 260 / Answer: 260       1, 0, 0       wrong_answer     0, 0, 0    (-, -, 0)
    351 - 148 = 203 / 203 + 56 = 259 / (no answer)       1, 1, 0       missing_answer   0, 0, 0    (-, -, 0)

The second is a right answer reached through wrong steps: the PRM is told its steps are wrong, the ORM that the
solution is right.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.data.arith.prm_data import SplitBuilder
from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP
from posttrainlab.errors import BadInput
from posttrainlab.prm.examples import outcome_labels, read_items, solution_outcome
from posttrainlab.prm.losses import IGNORE
from posttrainlab.train.prm_recipe import PRMDataConfig, PRMRecipe

ROOT = Path(__file__).resolve().parents[2]
ORM_YAML = ROOT / "configs/prm/orm.yaml"
Q = "What is 351 - 148 + 56?"
SOLUTIONS = (
    "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259",
    "351 - 148 = 204\n204 + 56 = 260\nAnswer: 259",
    "351 - 148 = 203\n203 + 56 = 260\nAnswer: 260",
    "351 - 148 = 203\n203 + 56 = 259",
)
FAST = ["optim.max_steps=2", "optim.batch_size=4", "optim.learning_rate=0.01", "optim.logging_steps=1"]


def arith_prm_rows(tmp_path: Path) -> tuple[Path, Path]:
    """``(math_shepherd file, step file)`` of ``SOLUTIONS``, as arith-prm writes them (module docstring)."""
    builder = SplitBuilder("train", "every-step", "explicit")
    for i, text in enumerate(SOLUTIONS):
        builder.add({"id": "p0", "category": "mixed", "prompt": Q, "answer": 259}, text, source="policy",
                    sample_index=i)  # fmt: skip
    files = tmp_path / "ms.jsonl", tmp_path / "step.jsonl"
    for file, rows in zip(files, (builder.every_rows, builder.rows), strict=True):
        file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return files


def targets(path: Path, fmt: str, outcome: str | None) -> list[list[float]]:
    return [item.labels for item in read_items(PRMDataConfig(path=str(path), format=fmt), soft=False, outcome=outcome)]


def test_outcome_labels_by_hand():
    assert outcome_labels(3, True, "outcome") == [1.0, 1.0, 1.0]
    assert outcome_labels(3, True, "outcome-last") == [IGNORE, IGNORE, 1.0]
    assert outcome_labels(1, False, "outcome-last") == [0.0] and outcome_labels(0, True, "outcome") == []
    with pytest.raises(ValueError, match="choose outcome or outcome-last"):
        outcome_labels(2, True, "step")


def test_arith_prm_rows_get_their_outcome(tmp_path):
    ms, _ = arith_prm_rows(tmp_path)
    rows = [json.loads(line) for line in ms.read_text().splitlines()]
    assert [r["labels"] for r in rows[:2]] == [[True, True, True], [False, False, True]]  # the premise
    assert [r["outcome"] for r in rows] == ["correct", "correct", "wrong_answer", "missing_answer"]
    assert rows[3]["completions"][-1] == NO_ANSWER_STEP
    assert targets(ms, "math-shepherd", None)[1] == [0.0, 0.0, 1.0]  # the PRM's: process labels
    assert targets(ms, "math-shepherd", "outcome") == [[1.0] * 3, [1.0] * 3, [0.0] * 3, [0.0] * 3]
    last = targets(ms, "math-shepherd", "outcome-last")
    assert last == [[IGNORE, IGNORE, 1.0], [IGNORE, IGNORE, 1.0], [IGNORE, IGNORE, 0.0], [IGNORE, IGNORE, 0.0]]


def test_the_outcome_field_decides_and_the_last_label_stands_in_without_it():
    from posttrainlab.data.formats.step import StepRow

    item = StepRow("q", ["a", "b", "c"], [0, 0, 1])
    assert solution_outcome({"outcome": "correct"}, item) is True
    assert solution_outcome({"outcome": "wrong_answer"}, item) is False  # the grader, not the last label
    assert solution_outcome({}, item) is True  # no outcome field (Math-Shepherd): the last step's label
    with pytest.raises(ValueError, match="expected a grader outcome string"):
        solution_outcome({"outcome": 1}, item)


def test_rows_cut_at_their_first_error_are_refused(tmp_path):
    _, step = arith_prm_rows(tmp_path)  # the step view: rows 1 and 2 cut after their first wrong line
    with pytest.raises(BadInput, match=r"step.jsonl: row 1: 1 of the solution's 3 lines \(cut at its first error\)"):
        targets(step, "step", "outcome")
    whole = tmp_path / "whole.jsonl"  # step-view rows that are whole (no error, or the explicit no-answer step)
    lines = step.read_text().splitlines()
    whole.write_text(lines[0] + "\n" + lines[3] + "\n")
    assert targets(whole, "step", "outcome-last") == [[IGNORE, IGNORE, 1.0], [IGNORE, IGNORE, 0.0]]


@pytest.mark.parametrize("fmt", ["span", "processbench", "mc-value"])
def test_the_recipe_refuses_formats_without_whole_solutions(fmt):
    with pytest.raises(BadInput, match=f"needs whole solutions: dataset.format step or math-shepherd, not {fmt}"):
        load_config(PRMRecipe, ORM_YAML, [f"dataset.format={fmt}"]).check()  # load_config checks it already


def test_train_orm_is_train_prm_for_orm_recipes_only(capsys):
    code, out, err = cli(capsys, "train", "orm", "--config", str(ROOT / "configs/prm/step.yaml"), "--print-config")
    assert code == 2 and out == ""
    assert "train orm: supervision step trains a PRM; an ORM needs supervision outcome or outcome-last" in err
    code, out, _ = cli(capsys, "train", "orm", "--config", str(ORM_YAML), "--print-config", "supervision=outcome-last")
    assert code == 0 and out.startswith("kind: prm\n") and "supervision: outcome-last\n" in out
    assert cli(capsys, "train", "prm", "--config", str(ORM_YAML), "--print-config")[0] == 0  # the same recipe kind


def test_a_tiny_orm_trains_and_best_of_n_scores_it_by_its_last_step(tiny_model, tiny_policy, tiny_prm, arith_dir,
                                                                     tmp_path, capsys):  # fmt: skip
    """``train orm`` on the four rows (2 steps), loaded by ``PRM.from_pretrained`` and by best-of-N's ``--orm``: each
    sample's ``orm`` is the ORM's score of its last step (the no-answer step appended, as it was trained). Then the
    CLI: ``--orm`` beside a real tiny PRM, and a PRM given as ``--orm`` refused in one line."""
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.data.jsonl import read_jsonl
    from posttrainlab.eval.best_of_n import argmax_first
    from posttrainlab.prm import PRM
    from posttrainlab.runners.best_of_n import run
    from posttrainlab.runners.settings import BestOfNSettings
    from prm_eval_fakes import FakeBackend, OracleScorer

    ms, _ = arith_prm_rows(tmp_path)
    out = tmp_path / "orm"
    code, printed, err = cli(capsys, "train", "orm", "--config", str(ORM_YAML), f"model={tiny_model}",
                             f"output_dir={out}", f"dataset.path={ms}", *FAST)  # fmt: skip
    assert code == 0, err
    assert f"orm: model saved to {out}" in printed
    # its summary and training lines say orm, not prm (the quickstart's orm stage printed "prm  step …")
    assert json.loads((out / "train_summary.json").read_text())["method"] == "orm"
    assert "prm  step" not in printed
    saved = json.loads((out / "prm_config.json").read_text())
    assert saved["orm"] is True and saved["no_answer_step"] == NO_ANSWER_STEP and saved["head"] == "token-cls"
    assert json.loads((out / "checkpoint-2" / "prm_config.json").read_text())["orm"] is True
    orm = PRM.from_pretrained(out, device="cpu")
    assert orm.spec.orm is True

    bon_dir = tmp_path / "bon"
    b = run("fake-policy", "fake-prm", arith_dir, bon_dir, BestOfNSettings(n=4, ns=[1, 2, 4], limit=2),
            backend=FakeBackend(), scorer=OracleScorer(), orm=out, progress=False)  # fmt: skip
    assert b["orm"] == str(out) and {"orm", "orm_vote"} <= set(b["selectors"])
    prompts = {r["id"]: r["prompt"] for r in read_jsonl(bon_dir / "samples.jsonl")}
    for row in read_jsonl(bon_dir / "scores.jsonl"):
        finals = []
        for s in row["samples"]:
            steps = s["steps"] + ([NO_ANSWER_STEP] if not s["steps"][-1].startswith("Answer:") else [])
            expected = orm.score(question_of(prompts[row["id"]]), steps)
            assert s["orm_scores"] == pytest.approx(expected, abs=1e-6) and s["orm"] == s["orm_scores"][-1]
            finals.append(s["orm"])
        assert row["selected"]["orm"]["4"] == argmax_first(finals)

    args = [
        "eval",
        "best-of-n",
        "--policy",
        str(tiny_policy),
        "--prm",
        str(tiny_prm),
        "--data",
        str(arith_dir),
        "--n",
        "2",
        "--ns",
        "1,2",
        "--limit",
        "2",
        "--max-new-tokens",
        "8",
        "--no-progress",
        "--device",
        "cpu",
    ]
    code, printed, err = cli(capsys, *args, "--orm", str(out), "--out", str(tmp_path / "cli"))  # fmt: skip
    assert code == 0, err
    flat = "".join(printed.split())  # rich wraps the lines at the terminal's width
    assert "prm_min−orm:n=1+0.0(p1.000),n=2" in flat and "cli/process_vs_outcome.png" in flat
    b = json.loads((tmp_path / "cli" / "bon.json").read_text())
    assert b["orm"] == str(out) and (tmp_path / "cli" / "process_vs_outcome.png").is_file()
    code, _, err = cli(capsys, *args, "--orm", str(tiny_prm), "--out", str(tmp_path / "refused"))
    assert code == 2 and err.count("\n") == 1 and "not an outcome reward model" in err
    assert not (tmp_path / "refused" / "samples.jsonl").exists()
