"""``data.problems``: the records of a split with the fields a verb needs, and the question of a row."""

from __future__ import annotations

import pytest

from posttrainlab.data.jsonl import write_jsonl
from posttrainlab.data.problems import QUESTION_FIELDS, read_records, read_split, row_question
from posttrainlab.errors import BadInput

CHAT = [{"role": "system", "content": "s"}, {"role": "user", "content": "first"}, {"role": "user", "content": "Q?"}]


@pytest.mark.parametrize(
    ("row", "question"),
    [
        ({"prompt": "Solve it.\n\nWhat is 2 + 3?"}, "Solve it.\n\nWhat is 2 + 3?"),  # arith-v1, Math-Shepherd
        ({"question": "What is 2 + 3?", "steps": ["2 + 3 = 5"]}, "What is 2 + 3?"),  # the step view
        ({"problem": "What is 2 + 3?"}, "What is 2 + 3?"),  # MATH, ProcessBench
        ({"prompt": CHAT}, "Q?"),  # a chat: its last user message
        ({"question": CHAT}, "Q?"),
        ({"question": "Q1", "problem": "Q2", "prompt": "Q3"}, "Q1"),  # the priority: question, problem, prompt
        ({"problem": "Q2", "prompt": "Q3"}, "Q2"),
        ({"question": "   ", "prompt": "Q3"}, "Q3"),  # blank text is no question
        ({"question": 7, "problem": [{"role": "system", "content": "s"}], "prompt": "Q3"}, "Q3"),
        ({"text": "x"}, None),
    ],
)
def test_row_question(row, question):
    assert QUESTION_FIELDS == ("question", "problem", "prompt")
    assert row_question(row) == question


def test_read_records_checks_fields_and_limit(tmp_path):
    path = tmp_path / "p.jsonl"
    write_jsonl(path, [{"prompt": "a", "answer": 1}, {"prompt": "b"}, {"answer": 3}])
    assert read_records(path, required=("prompt", "answer"), limit=1) == [{"prompt": "a", "answer": 1}]
    with pytest.raises(BadInput) as e:
        read_records(path, required=("prompt", "answer"))
    assert str(e.value) == f"{path}:2: record has no answer field"
    assert len(read_records(path)) == 3
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(BadInput) as e:
        read_records(empty, what="problems")
    assert str(e.value) == f"{empty}: no problems"


def test_read_split_resolves_the_split_first(arith_dir):
    path, records = read_split(arith_dir, required=("id", "prompt", "answer"), limit=2, default_split="test")
    assert path.name == "test.jsonl" and [r["id"] for r in records] == ["test-0000", "test-0001"]
    path, records = read_split(f"{arith_dir}:dev", limit=1, default_split="test")
    assert path.name == "dev.jsonl" and records[0]["id"] == "dev-0000"
