"""The one reader of resumable run files (data/runfile.py): torn last lines, bad lines, finished records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.jsonl import dumps
from posttrainlab.data.runfile import finished_records, has_row_index, read_run_file
from posttrainlab.errors import BadInput

ROWS = [{"q": "a"}, {"q": "b"}, {"q": "c"}]


def key_of(row: dict) -> str:
    return "k-" + row["q"]


def record(index: int, *, model: str = "m", failed: bool = False, key: str | None = None, **extra) -> dict:
    return {"index": index, "key": key or key_of(ROWS[index]), "model": model, "failed": failed, **extra}


def write(path: Path, records: list[dict], tail: bytes = b"") -> Path:
    path.write_bytes("".join(dumps(r) + "\n" for r in records).encode() + tail)
    return path


def finished(path: Path, *, retry_failed: bool = False):
    return finished_records(
        path,
        ROWS,
        check=lambda rec: None if "failed" in rec else "no failed field",
        key_of=key_of,
        model_name="m",
        is_failed=lambda rec: rec["failed"],
        retry_failed=retry_failed,
        mismatch="the data",
        hint="use another --out",
        again="judged",
    )


def test_a_missing_file_is_an_empty_run(tmp_path):
    assert read_run_file(tmp_path / "none.jsonl") == ([], [])


def test_a_cut_last_line_is_dropped_and_repaired_only_when_told(tmp_path):
    torn = b'{"index": 2, "ke'
    path = write(tmp_path / "run.jsonl", [record(0), record(1)], tail=torn)
    before = path.read_bytes()
    records, notes = read_run_file(path, repair=False)
    assert [r["index"] for r in records] == [0, 1] and "dropped an unfinished last line (16 bytes)" in notes[0]
    assert path.read_bytes() == before  # another writer's file is read, not changed
    records, notes = read_run_file(path)
    assert [r["index"] for r in records] == [0, 1] and len(notes) == 1
    assert path.read_bytes() == before[: -len(torn)]  # the next append starts on a line of its own
    assert read_run_file(path) == (records, [])


def test_blank_lines_are_skipped_and_a_bad_line_names_file_line_and_hint(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(dumps(record(0)) + "\n\n" + dumps(record(1)) + "\n", encoding="utf-8")
    assert [r["index"] for r in read_run_file(path)[0]] == [0, 1]
    path.write_text(dumps(record(0)) + "\n{oops\n" + dumps(record(1)) + "\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"run.jsonl:2: not valid JSON .*; fix or remove the line to resume"):
        read_run_file(path)
    path.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"run.jsonl:1: expected a JSON object, got list; fix or remove"):
        read_run_file(path)


def test_row_index_must_be_a_non_negative_int():
    assert [has_row_index({"index": v}) for v in (0, 5, -1, "0", None, 1.0)] == [True, True] + [False] * 4
    assert not has_row_index({})


def test_finished_records_by_index_the_first_of_a_repeated_index_wins(tmp_path):
    path = write(tmp_path / "run.jsonl", [record(2, answer="first"), record(0), record(2, answer="second")])
    done, notes = finished(path)
    assert sorted(done) == [0, 2] and done[2]["answer"] == "first"
    assert notes == [f"{path}: 1 duplicate records ignored (the first of each index is kept)"]


@pytest.mark.parametrize(
    "bad, fault",
    [
        ({"index": 0, "key": "k-a", "model": "m"}, "record 2: no failed field; use another --out"),
        (record(0, key="k-other"), "record 2: row 0 does not match the data; use another --out"),
        (record(1, model="other"), "record 2: made by model 'other', not 'm'"),
        ({**record(0), "index": 3}, "record 2: row index 3 but the data has 3 rows"),
        ({**record(0), "index": -1}, "record 2: no row index"),
    ],
)
def test_a_record_that_does_not_belong_to_this_run_is_refused(tmp_path, bad, fault):
    path = write(tmp_path / "run.jsonl", [record(1), bad])
    with pytest.raises(BadInput, match=fault.replace("(", r"\(").replace(")", r"\)")):
        finished(path)


def test_retry_failed_removes_the_failed_records_from_result_and_file(tmp_path):
    path = write(tmp_path / "run.jsonl", [record(1, failed=True), record(0), record(2)])
    done, notes = finished(path)
    assert sorted(done) == [0, 1, 2] and notes == []  # a plain restart keeps failed rows
    done, notes = finished(path, retry_failed=True)
    assert sorted(done) == [0, 2] and notes == [f"{path}: 1 failed rows will be judged again"]
    on_disk = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["index"] for r in on_disk] == [0, 2]  # kept in row order, each once
