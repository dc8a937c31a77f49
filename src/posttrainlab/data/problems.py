"""Problems as the verbs read them: the records of one split with the fields a verb needs, and a row's question.

- **Records with required fields** (:func:`read_records`, :func:`read_split`): the records of one JSON Lines file
  (a verified split of a dataset, ``data.loading.split_file``), the first ``limit`` of them; a record without a
  field the verb needs is ``BadInput`` naming the file and the record (``FILE:N``, numbered from 1), and a file
  with no record at all is ``BadInput`` too. Read by ``eval policy``, ``eval best-of-n``, ``eval beam-search``,
  ``data arith-prm`` and the trainers.
- **The question of a row** (:func:`row_question`), for the verbs that read rows of any format (``posttrain
  generate``, ``label mc``): the first of the fields :data:`QUESTION_FIELDS` (``question``, ``problem``,
  ``prompt``) that holds text, a chat (a list of messages) giving its last user message. The named question
  fields come first because a ``prompt`` may wrap the question in instructions (arith-v1's prompts do); the rows
  the project reads carry one of the three, never two (arith-v1 and Math-Shepherd: ``prompt``; the step view,
  arith-prm, GSM8K and ``generate``'s output: ``question``; MATH and ProcessBench: ``problem``).

Written by hand: which fields make a problem are this project's conventions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput

#: The fields a row's question is read from, first match wins (module docstring).
QUESTION_FIELDS = ("question", "problem", "prompt")


def prompt_text(value: Any) -> str | None:
    """The text of a prompt: a string as it is, a chat's last user message; ``None`` for anything else.

    >>> prompt_text("What is 2 + 3?"), prompt_text([{"role": "user", "content": "Q"}]), prompt_text(7)
    ('What is 2 + 3?', 'Q', None)
    """
    if isinstance(value, list):
        users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        value = users[-1] if users else None
    return value if isinstance(value, str) else None


def row_question(row: dict[str, Any]) -> str | None:
    """The question text of a row: the first of ``QUESTION_FIELDS`` holding text; ``None`` when none does.

    >>> row_question({"prompt": "Solve it.\\n\\nWhat is 2 + 3?", "question": "What is 2 + 3?"})
    'What is 2 + 3?'
    >>> row_question({"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "Q"}]})
    'Q'
    >>> row_question({"question": "  ", "text": "x"}) is None
    True
    """
    for name in QUESTION_FIELDS:
        text = prompt_text(row.get(name))
        if text is not None and text.strip():
            return text
    return None


def read_records(
    path: str | os.PathLike, *, required: Sequence[str] = (), limit: int | None = None, what: str = "records"
) -> list[dict[str, Any]]:
    """The first ``limit`` records of the JSON Lines file ``path``, each holding every ``required`` field.

    ``BadInput`` ``PATH:N: record has no FIELD field`` for the first record that lacks one, and
    ``PATH: no WHAT`` for a file without records.
    """
    from posttrainlab.data.jsonl import iter_jsonl

    records = []
    for number, record in enumerate(iter_jsonl(path), start=1):
        if limit is not None and len(records) >= limit:
            break
        missing = [key for key in required if key not in record]
        if missing:
            raise BadInput(f"{path}:{number}: record has no {', '.join(missing)} field")
        records.append(record)
    if not records:
        raise BadInput(f"{path}: no {what}")
    return records


def read_split(
    spec: str | os.PathLike,
    split: str | None = None,
    *,
    required: Sequence[str] = (),
    limit: int | None = None,
    default_split: str | None = None,
    what: str = "records",
) -> tuple[Path, list[dict[str, Any]]]:
    """``(file, records)``: the verified file of a data path's split (``data.loading.split_file``: ``split``, else
    the one the path names, else ``default_split``) and its records (:func:`read_records`)."""
    from posttrainlab.data.loading import split_file

    path = split_file(str(spec), split, default_split=default_split)
    return path, read_records(path, required=required, limit=limit, what=what)


__all__ = ["QUESTION_FIELDS", "prompt_text", "read_records", "read_split", "row_question"]
