"""``eval prm``: every step-level format read right, a run with a fake scorer, bad input, the CLI, a real tiny PRM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.prm_metrics import prm_metrics
from posttrainlab.runners.prm_eval import detect_format, read_eval_rows, run, score_items, to_eval_row
from posttrainlab.runners.settings import PRMEvalSettings
from prm_eval_fakes import FakeBackend, OracleScorer, TableScorer

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "formats"
POSTTRAIN = [sys.executable, "-m", "posttrainlab"]


@pytest.mark.parametrize(
    "asset, fmt, first_labels",
    [
        ("span_good_step.jsonl", "step", [1, 1, 1]),
        ("ms_list.jsonl", "math-shepherd", [1, 1]),
        ("ms_ki.jsonl", "math-shepherd", [1, 1]),
        ("pb.jsonl", "processbench", [1, 0]),  # label 1: the steps after it carry no label and are cut
        ("ratings.jsonl", "processbench", [1, 1, 0, 1]),  # neutral 0 counts as correct, every step kept
        ("prm800k.jsonl", "processbench", None),
        ("span_good.jsonl", "span", [1, 1, 1]),
    ],
)
def test_every_format_is_read(asset, fmt, first_labels):
    rows, found, _ = read_eval_rows(str(ASSETS / asset))
    assert found == fmt and rows
    for r in rows:
        assert len(r.steps) == len(r.labels) > 0 and set(r.labels) <= {0, 1}
    if first_labels is not None:
        assert rows[0].labels == first_labels


def test_math_shepherd_keeps_steps_after_an_error():
    row = {"prompt": "q", "completions": ["a", "b", "c"], "labels": [True, False, True]}
    assert detect_format(row) == "math-shepherd"
    assert to_eval_row(row, "math-shepherd").labels == [1, 0, 1]


def test_span_labels_every_piece():
    """SHARP: a piece touched by a <HAL> span is wrong; the pieces after it keep their own labels."""
    row = {"question": "q", "model_answer": ["a = 1", "b = 5", "c = 2"],
           "hallucination_annotation": ["a = 1", "b = <HAL>5</HAL>", "c = 2"]}  # fmt: skip
    got = to_eval_row(row, "span")
    assert (got.steps, got.labels) == (["a = 1", "b = 5", "c = 2"], [1, 0, 1])


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


STEP_ROWS = [
    {"id": "a", "question": "q1", "steps": ["s1", "s2", "s3"], "step_labels": [1, 1, 0]},
    {"id": "b", "question": "q2", "steps": ["t1", "t2"], "step_labels": [1, 1]},
    {"id": "c", "question": "q3", "steps": ["u1", "u2"], "step_labels": [1, 0]},
]
TABLE = {("q1", "s1"): [0.95, 0.6, 0.3], ("q2", "t1"): [0.85, 0.45], ("q3", "u1"): [0.7, 0.05]}


def test_run_with_a_fake_scorer(tmp_path):
    """The scores of tests/eval/test_prm_metrics.py, through the runner: same metrics, files written."""
    data = write_rows(tmp_path / "steps.jsonl", STEP_ROWS)
    out = tmp_path / "eval"
    m = run("fake-prm", data, out, scorer=TableScorer(TABLE), progress=False)
    expected = prm_metrics([r["step_labels"] for r in STEP_ROWS], list(TABLE.values()))
    for key in ("step", "first_error", "first_error_sweep", "calibration", "per_position", "case"):
        assert m[key] == expected[key], key
    assert m["format"] == "step" and m["step"]["f1"] == pytest.approx(0.8)
    assert json.loads((out / "metrics.json").read_text()) == json.loads(json.dumps(m))
    scores = read_jsonl(out / "scores.jsonl")
    assert [s["id"] for s in scores] == ["a", "b", "c"]
    assert scores[0]["scores"] == [0.95, 0.6, 0.3] and scores[0]["labels"] == [1, 1, 0]
    assert [(s["gold_first_error"], s["predicted_first_error"]) for s in scores] == [(2, 2), (-1, 1), (1, 1)]
    assert (out / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_run_on_an_arith_prm_folder(arith_dir, tmp_path):
    """An arith-prm folder means its heldout split; DIR:SPLIT picks another. The oracle scorer is perfect."""
    from posttrainlab.label.arith_prm import ArithPRMBuild, build

    aprm = tmp_path / "aprm"
    build("fake", arith_dir, aprm, ArithPRMBuild(k=4, limit=2), backend=FakeBackend())
    m = run("fake-prm", aprm, tmp_path / "e1", scorer=OracleScorer(), progress=False)
    assert m["source"].endswith("step/heldout.jsonl") and m["solutions"] == 2 * 2 * 4 + 2 * 2 * 2
    assert m["step"]["f1"] == 1.0 and m["step"]["auroc"] == 1.0 and m["first_error"]["f1"] == 1.0
    m = run("fake-prm", f"{aprm}:preference_test", tmp_path / "e2", scorer=OracleScorer(), progress=False)
    assert m["source"].endswith("step/preference_test.jsonl") and m["solutions"] == 4


class WrongCount:
    def score_batch(self, items, batch_size=8):
        return [[0.5] for _ in items]


class OutOfRange:
    def score_batch(self, items, batch_size=8):
        return [[1.5] * len(s) for _, s in items]


def test_repeated_solutions_are_scored_once():
    class Counting:  # the score of a step is its length / 100, so repeats are recognisable
        def __init__(self):
            self.seen = []

        def score_batch(self, items, batch_size=8):
            self.seen += items
            return [[len(s) / 100 for s in steps] for _, steps in items]

    scorer = Counting()
    q = "What is 12 + 5?"
    right, wrong = ["12 + 5 = 17", "Answer: 17"], ["12 + 5 = 170", "Answer: 170"]
    items = [(q, right), (q, wrong), (q, list(right)), (q, []), ("What is 3 + 4?", right), (q, wrong)]
    scores = score_items(scorer, items, batch_size=4, progress=False)
    assert scorer.seen == [items[0], items[1], items[4]]  # the same steps under another question are new
    assert scores[0] == scores[2] == scores[4] == [0.11, 0.1] and scores[1] == scores[5] == [0.12, 0.11]
    assert scores[3] == []
    scores[0][0] = 0.0
    assert scores[2] == [0.11, 0.1]  # a repeat gets its own list


def test_bad_input(tmp_path):
    data = write_rows(tmp_path / "steps.jsonl", STEP_ROWS)
    with pytest.raises(BadInput, match="no such model folder"):
        run(tmp_path / "no-prm", data, tmp_path / "o")
    with pytest.raises(BadInput, match="returned 1 scores for 3 steps"):
        run("x", data, tmp_path / "o", scorer=WrongCount(), progress=False)
    with pytest.raises(BadInput, match="outside"):
        run("x", data, tmp_path / "o", scorer=OutOfRange(), progress=False)
    bad = write_rows(tmp_path / "bad.jsonl", [STEP_ROWS[0], {"question": "q", "steps": ["a"], "step_labels": [2]}])
    with pytest.raises(BadInput, match=r"row 1: step_labels\[0\] is 2"):
        run("x", bad, tmp_path / "o", scorer=OracleScorer(), progress=False)
    other = write_rows(tmp_path / "other.jsonl", [{"text": "hello"}])
    with pytest.raises(BadInput, match="no step-level format"):
        run("x", other, tmp_path / "o", scorer=OracleScorer(), progress=False)
    with pytest.raises(BadInput, match="mc-value holds no step labels"):
        run("x", data, tmp_path / "o", PRMEvalSettings(format="mc-value"), scorer=OracleScorer(), progress=False)
    with pytest.raises(BadInput, match="no such file"):
        run("x", tmp_path / "none.jsonl", tmp_path / "o", scorer=OracleScorer(), progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_missing_model_is_one_line_exit_2(tmp_path):
    data = write_rows(tmp_path / "steps.jsonl", STEP_ROWS)
    r = subprocess.run(
        [
            *POSTTRAIN,
            "eval",
            "prm",
            "--model",
            str(tmp_path / "nowhere"),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ") and "no such model folder" in lines[0]


def test_cli_with_a_real_tiny_prm(tiny_prm, tmp_path):
    """The verb in process with an untrained tiny PRM: scores are probabilities, one per step, files written."""
    from typer.testing import CliRunner

    from posttrainlab.cli import app

    data = write_rows(tmp_path / "steps.jsonl", STEP_ROWS)
    out = tmp_path / "eval"
    args = ["eval", "prm", "--model", str(tiny_prm), "--data", str(data), "--out", str(out), "--batch-size", "2",
            "--no-progress", "--device", "cpu"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "first-error F1" in r.output
    scores = read_jsonl(out / "scores.jsonl")
    assert [len(s["scores"]) for s in scores] == [3, 2, 2]
    from posttrainlab.prm import PRM

    prm = PRM.from_pretrained(tiny_prm)  # the scores are the PRM's own, one solution at a time
    for s in scores:
        assert s["scores"] == pytest.approx(prm.score(s["question"], s["steps"]), abs=1e-6)
    m = json.loads((out / "metrics.json").read_text())
    assert m["steps"] == 7 and m["wrong_steps"] == 2 and m["calibration"]["n_bins"] == 10


def test_run_on_a_policys_own_samples(tmp_path):
    """An ``eval policy`` folder: each problem's samples (its greedy response when unsampled), every line labelled
    exactly, "(no answer)" appended where the answer line is missing; the oracle scorer finds every error."""
    rows = [
        {"id": "t-0", "category": "multiplication", "prompt": "Solve.\n\nWhat is 156 * 7?", "answer": 1092,
         "response": "156 * 7 = 1092\nAnswer: 1092", "correct": True,
         "samples": [{"response": "156 * 7 = 1092\nAnswer: 1092"}, {"response": "156 * 8 = 1248\nAnswer: 1248"},
                     {"response": "156 * 7 = 1092"}, {"response": ""}]},
        {"id": "t-1", "category": "subtraction", "prompt": "What is 563 - 241?", "answer": 322,
         "response": "563 - 24 = 539\nAnswer: 539", "correct": False},
    ]  # fmt: skip
    folder = tmp_path / "eval-policy"
    folder.mkdir()
    write_rows(folder / "samples.jsonl", rows)
    assert detect_format(rows[0]) == "policy-samples"
    got, fmt, source = read_eval_rows(str(folder))
    assert fmt == "policy-samples" and source == str(folder / "samples.jsonl")
    assert [(r.id, r.labels) for r in got] == [("t-0", [1, 1]), ("t-0", [0, 0]), ("t-0", [1, 0]), ("t-1", [0, 0])]
    assert got[2].steps == ["156 * 7 = 1092", "(no answer)"] and got[0].question == "What is 156 * 7?"
    assert len(read_eval_rows(str(folder), limit=1)[0]) == 3  # limit counts problems
    m = run("fake-prm", folder, tmp_path / "e", scorer=OracleScorer(), progress=False)
    assert m["solutions"] == 4 and m["wrong_steps"] == 5 and m["step"]["recall"] == 1.0
    write_rows(tmp_path / "other.jsonl", [{"id": "x", "prompt": "Name a colour.", "answer": 0, "response": "red"}])
    with pytest.raises(BadInput, match="row 0: its prompt is no arith-v1 problem"):
        read_eval_rows(str(tmp_path / "other.jsonl"))
