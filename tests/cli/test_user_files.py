"""A user's file is never overwritten (issue #42): the single-file writers refuse their own input under any spelling
(``--overwrite`` or not) and an existing file without ``--overwrite``; ``report`` writes only into a run folder;
``train`` refuses ``model`` equal to ``output_dir``. Each of these exited 0 and destroyed the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cli_capture import cli

ROOT = Path(__file__).resolve().parents[2]
STEP_ROWS = [
    {"question": "1 + 1 = ?", "steps": ["1 + 1 = 2", "Answer: 2"], "step_labels": [1, 1]},
    {"question": "2 * 3 = ?", "steps": ["2 * 3 = 5"], "step_labels": [0]},
]


@pytest.fixture
def step_file(tmp_path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in STEP_ROWS), encoding="utf-8")
    return path


def _one_line_refusal(code: int, err: str) -> None:
    assert code == 2 and err.count("\n") == 1 and err.startswith("posttrain: error: "), err


@pytest.mark.parametrize("spelling", ["same", "dot", "link", "overwrite"])
def test_convert_never_writes_onto_its_own_input(capsys, step_file, tmp_path, monkeypatch, spelling):
    before = step_file.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {"same": str(step_file), "dot": "./in.jsonl", "link": "link.jsonl", "overwrite": "in.jsonl"}[spelling]
    if spelling == "link":
        os.symlink(step_file, tmp_path / "link.jsonl")
    extra = ["--overwrite"] if spelling == "overwrite" else []
    code, _, err = cli(capsys, "data", "convert", "step", str(step_file), "--to", "math-shepherd", "--out", out, *extra)
    _one_line_refusal(code, err)
    assert "the same place as FILE" in err and "never writes over what it reads" in err
    assert step_file.read_bytes() == before


def test_convert_keeps_an_existing_file_unless_overwrite(capsys, step_file, tmp_path):
    out = tmp_path / "existing.jsonl"
    out.write_text("mine\n")
    args = ["data", "convert", "step", str(step_file), "--to", "math-shepherd", "--out", str(out)]
    code, _, err = cli(capsys, *args)
    _one_line_refusal(code, err)
    assert "already holds a file (existing.jsonl from " in err and "--overwrite" in err
    assert out.read_text() == "mine\n"
    code, stdout, err = cli(capsys, *args, "--overwrite")
    assert code == 0, err
    assert [json.loads(line)["labels"] for line in out.read_text().splitlines()] == [[True, True], [False]]


def test_join_refuses_a_users_file_and_its_own_inputs(capsys, tmp_path):
    step, span = tmp_path / "step.jsonl", tmp_path / "span.jsonl"
    step.write_text(json.dumps({"question": "q", "steps": ["a = 1"], "step_labels": [1]}) + "\n")
    span.write_text(
        json.dumps({"question": "q", "model_answer": ["a = 1"], "hallucination_annotation": ["a = 1"]}) + "\n"
    )
    notes = tmp_path / "notes.jsonl"
    notes.write_text("my notes\n")
    code, _, err = cli(capsys, "data", "join", "--step", str(step), "--span", str(span), "--out", str(notes))
    _one_line_refusal(code, err)
    assert notes.read_text() == "my notes\n"
    before = span.read_bytes()
    code, _, err = cli(capsys, "data", "join", "--step", str(step), "--span", str(span), "--out",
                       f"{tmp_path}/./span.jsonl", "--overwrite")  # fmt: skip
    _one_line_refusal(code, err)
    assert "the same place as --span" in err and span.read_bytes() == before


def test_judge_summary_refuses_writing_onto_a_run_it_reads(capsys, tmp_path):
    run = tmp_path / "r1_metric.json"
    run.write_text('{"metrics": {}}')
    code, _, err = cli(capsys, "eval", "judge-summary", str(run), "--out", str(run), "--overwrite")
    _one_line_refusal(code, err)
    assert "the same place as the run" in err and run.read_text() == '{"metrics": {}}'


def test_report_writes_only_into_a_run_folder(capsys, tmp_path):
    folder = tmp_path / "mine"
    (folder / "eval" / "sft").mkdir(parents=True)
    (folder / "eval" / "sft" / "metrics.json").write_text("{}")
    (folder / "report.md").write_text("my report\n")
    code, _, err = cli(capsys, "report", str(folder))
    _one_line_refusal(code, err)
    assert "no run.json, so not a run folder" in err
    assert (folder / "report.md").read_text() == "my report\n" and not (folder / "report.html").exists()


@pytest.mark.parametrize("spelling", ["{m}", "{m}/", "./{rel}", "{link}"])
def test_train_refuses_model_equal_to_output_dir_even_with_overwrite(capsys, tiny_model, tmp_path, monkeypatch,
                                                                     spelling):  # fmt: skip
    model = tmp_path / "model"
    model.mkdir()
    for f in Path(tiny_model).iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    os.symlink(model, tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    before = {f.name: f.read_bytes() for f in model.iterdir()}
    out = spelling.format(m=model, rel="model", link=tmp_path / "link")
    code, _, err = cli(capsys, "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"), f"model={model}",
                       f"output_dir={out}", "--overwrite")  # fmt: skip
    _one_line_refusal(code, err)
    assert "output_dir" in err and "the same place as model" in err
    assert {f.name: f.read_bytes() for f in model.iterdir()} == before
