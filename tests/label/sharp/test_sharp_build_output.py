"""``posttrain data sharp-build --out`` (and annotate's ``sharp/``) never deletes a user's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.errors import BadInput
from posttrainlab.label.sharp_build import build_sharp


def records(n: int = 4) -> list[dict]:
    return [
        {"index": i, "id": str(i // 2), "source": "s", "source_split": "train", "sample_index": i % 2,
         "status": "tagged", "question": f"q{i // 2}", "steps": ["a = 1", "b = 2"],
         "hallucination_annotation": ["a = 1", "b = <HAL>2</HAL>"], "n_spans": 1}
        for i in range(n)
    ]  # fmt: skip


def annotations(folder: Path) -> Path:
    folder.mkdir()
    (folder / "annotations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    return folder


def test_cli_refuses_a_folder_with_user_files(tmp_path, capsys):
    out = tmp_path / "sharp"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    (out / "results.csv").write_text("a,b\n")
    code, _, err = cli(capsys, "data", "sharp-build", "--annotations", str(annotations(tmp_path / "ann")),
                       "--out", str(out))  # fmt: skip
    assert code == 2, err
    assert "\n" not in err.strip() and "notes.txt" in err and "results.csv" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv"]
    assert (out / "notes.txt").read_text() == "my notes"


def test_an_earlier_build_is_replaced_but_a_file_added_to_it_is_not_lost(tmp_path):
    out = tmp_path / "sharp"
    build_sharp(records(4), out, test_share=0.0)
    build_sharp(records(2), out, test_share=0.0)  # re-running over an earlier build works
    assert json.loads((out / "summary.json").read_text())["kept"] == 2
    (out / "all" / "notes.txt").write_text("my notes")
    with pytest.raises(BadInput, match=r"all/notes\.txt"):
        build_sharp(records(4), out, test_share=0.0)
    assert (out / "all" / "notes.txt").read_text() == "my notes"
    assert json.loads((out / "summary.json").read_text())["kept"] == 2
