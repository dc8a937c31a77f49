"""Column types read from rows, in ``datasets``' own YAML form (``Features._to_yaml_list``)."""

from __future__ import annotations

import json

import pytest

from posttrainlab.data.cards.features import features_yaml, scan_file
from posttrainlab.errors import BadInput

ROWS = [
    {"q": "a", "steps": ["x"], "labels": [1, 0], "v": 1, "ok": True, "spans": [[0, 2]], "none": None,
     "messages": [{"role": "user", "content": "c"}], "repair": None, "rejected": []},
    {"q": "b", "steps": [], "labels": [1], "v": 0.5, "ok": False, "spans": None, "none": None,
     "messages": [], "repair": {"reason": "drift", "ratio": 0.97}, "rejected": [{"reason": "r", "text": None}]},
]  # fmt: skip


def test_types_read_from_rows_are_what_datasets_reads_them_to_be(tmp_path):
    from datasets import Features, List, Value

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    scan = scan_file(path)
    assert scan.rows == 2 and scan.num_bytes == path.stat().st_size
    expected = Features(
        {
            "q": Value("string"),
            "steps": List(Value("string")),
            "labels": List(Value("int64")),
            "v": Value("float64"),  # an int in one row, a float in the other
            "ok": Value("bool"),
            "spans": List(List(Value("int64"))),
            "none": Value("null"),
            "messages": List({"role": Value("string"), "content": Value("string")}),
            "repair": {"reason": Value("string"), "ratio": Value("float64")},
            "rejected": List({"reason": Value("string"), "text": Value("null")}),
        }
    )
    assert features_yaml(scan.columns) == expected._to_yaml_list()
    assert Features._from_yaml_list(features_yaml(scan.columns)) == expected


def test_a_column_of_two_types_is_refused_with_its_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"answer": 3}\n{"answer": "three"}\n')
    with pytest.raises(BadInput, match=r"bad.jsonl: row 1: column 'answer': int64 and string in one column"):
        scan_file(path)
