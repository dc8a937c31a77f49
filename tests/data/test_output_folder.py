"""The one output-folder rule (data/atomic.py): a folder holding files the command did not write is refused."""

from __future__ import annotations

import pytest

from posttrainlab.data.atomic import check_output_folder
from posttrainlab.errors import BadInput


def own_csv(rel: str) -> bool:
    return rel.endswith(".csv")


def test_absent_empty_and_own_folders_pass(tmp_path):
    assert check_output_folder(tmp_path / "new", own_csv, what="csv export") == tmp_path / "new"
    (tmp_path / "empty" / "sub").mkdir(parents=True)  # empty folders hold no file to lose
    check_output_folder(tmp_path / "empty", own_csv, what="csv export")
    (tmp_path / "own" / "a").mkdir(parents=True)
    (tmp_path / "own" / "a" / "x.csv").write_text("1")
    check_output_folder(tmp_path / "own", own_csv, what="csv export")


def test_foreign_files_are_named_and_kept(tmp_path):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    (out / "sub" / "plot.png").write_bytes(b"png")
    (out / "x.csv").write_text("1")
    with pytest.raises(BadInput) as e:
        check_output_folder(out, own_csv, what="csv export")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{out}: folder holds other files")
    assert "notes.txt" in msg and "sub/plot.png" in msg and "x.csv" not in msg
    assert "choose an empty folder or an earlier csv export" in msg
    assert (out / "notes.txt").read_text() == "mine"


def test_many_foreign_files_are_counted_not_all_listed(tmp_path):
    for i in range(10):
        (tmp_path / f"f{i}.txt").write_text("x")
    with pytest.raises(BadInput, match=r"f0\.txt, f1\.txt, f2\.txt and 7 more"):
        check_output_folder(tmp_path, own_csv, what="csv export")


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match="exists and is not a folder"):
        check_output_folder(tmp_path / "f", own_csv, what="csv export")


def test_arith_prm_build_with_a_user_file_is_refused(tmp_path):
    """An earlier arith-prm build is replaced whole: a file its manifest does not list would be lost."""
    import json

    from posttrainlab.data.arith.prm_data import DATASET, check_target

    out = tmp_path / "prm-data"
    (out / "step").mkdir(parents=True)
    (out / "step" / "train.jsonl").write_text("")
    manifest = {"dataset": DATASET, "files": {"step/train.jsonl": {"sha256": "0", "records": 0}}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert check_target(out) == out  # an earlier build: replaceable
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match=r"holds other files \(notes\.txt\).*earlier arith-prm build"):
        check_target(out)


# issue #25: the parents of an output path are checked too (data.atomic.check_writable), before any work


def test_a_file_in_the_path_or_an_unwritable_place_is_refused_and_nothing_is_created(tmp_path):
    from posttrainlab.data.atomic import check_writable

    (tmp_path / "f").write_text("x")
    with pytest.raises(BadInput, match=r"f/sub/out: .*/f is a file, not a folder$"):
        check_output_folder(tmp_path / "f" / "sub" / "out", own_csv, what="csv export")
    with pytest.raises(BadInput, match=r"^/proc/posttrain-x: cannot write in /proc \("):
        check_output_folder("/proc/posttrain-x", own_csv, what="csv export")
    with pytest.raises(BadInput, match=r"^empty path: name a folder"):
        check_writable("")  # Path("") would be the current folder
    with pytest.raises(BadInput, match=r"is a folder, not a file$"):
        check_writable(tmp_path, file=True)
    assert check_writable(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert check_writable(tmp_path / "new" / "rows.jsonl", file=True) == tmp_path / "new" / "rows.jsonl"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]  # tried, not created: no folder, no probe left behind
