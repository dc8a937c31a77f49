"""The SHARP annotation prompt and its input: the request sent for each solution, and the rows read to annotate.

:data:`PROMPT_TEMPLATE` is ours (the card does not publish its prompt), versioned and hashed into every record;
:func:`solution_text` joins the steps by one blank line; :func:`load_solutions` reads ``posttrain generate``'s
rows or span-view rows. The run (retries, repair, resume, threads) is ``label.annotate``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.errors import BadInput
from posttrainlab.label.repair import STEP_SEP
from posttrainlab.runners.judge_client import PROBLEM_AND_SOLUTION, judge_request

PROMPT_VERSION = "posttrainlab-sharp-annotate-v1"
#: The marker the program judge (``serve.program_judge``) looks for to recognise this prompt.
PROMPT_MARKER = "wrap each minimal wrong fragment in <HAL> and </HAL>"
PROMPT_TEMPLATE = (
    "You are checking a step-by-step solution to a math problem for errors.\n"
    "Copy the solution exactly as given, character for character, and "
    + PROMPT_MARKER
    + ": a wrong calculation result, a wrong fact, a wrong deduction or a wrong final answer. Mark as "
    "little as possible. Do not change, add, remove or explain anything else.\n"
    "If the solution has no error, answer exactly: No hallucinations\n" + PROBLEM_AND_SOLUTION
)
PROMPT_SHA256 = hashlib.sha256(PROMPT_TEMPLATE.encode()).hexdigest()


def solution_text(steps: Sequence[str]) -> str:
    """The text the judge annotates: the steps joined by one blank line (the SHARP generation format).

    >>> solution_text(["12 * 4 = 48", "Answer: 48"])
    '12 * 4 = 48\\n\\nAnswer: 48'
    """
    return STEP_SEP.join(steps)


def build_messages(problem: str, steps: Sequence[str]) -> list[dict[str, str]]:
    """The annotation request: one user message (some chat templates refuse a system role).

    >>> build_messages("What is 2 + 3?", ["2 + 3 = 6", "Answer: 6"])[0]["content"].split("Problem:\\n")[1]
    'What is 2 + 3?\\n\\nSolution:\\n2 + 3 = 6\\n\\nAnswer: 6'
    """
    return judge_request(PROMPT_TEMPLATE, problem, solution_text(steps))


def row_key(question: str, steps: Sequence[str]) -> str:
    """A short hash of a row's content, stored in its record to catch a run resumed on other data.

    >>> row_key("q", ["a"])
    'a226d02e5772ac0b'
    """
    canonical = json.dumps([question, list(steps)], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _as_steps(row: dict[str, Any], i: int, path: str) -> list[str]:
    for name in ("steps", "model_answer"):
        value = row.get(name)
        if value is not None:
            if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
                raise BadInput(f"{path}: row {i}: {name} must be a list of strings")
            return list(value)
    raise BadInput(f"{path}: row {i}: no 'steps' (posttrain generate) or 'model_answer' (span view) field")


def load_solutions(data: str | Path, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """``(rows, skipped)``: the rows to annotate and how many were skipped for having no step.

    Rows come from ``posttrain generate`` (a folder holding ``generations.jsonl``, or the file) or any
    file of span-view rows (``question, model_answer``; their annotations are ignored). Each keeps
    ``question``, ``steps`` and, when present, ``id, source, source_split, sample_index``. A solution
    with no text has nothing to annotate and no place in the span view: it is skipped and counted.
    ``limit`` keeps the first N rows of the file.
    """
    path = Path(data)
    if path.is_dir():
        path = path / "generations.jsonl"
        if not path.is_file():
            raise BadInput(f"{data}: a folder without generations.jsonl (write one with posttrain generate)")
    rows, skipped = [], 0
    for i, row in enumerate(iter_rows(str(path))):
        if limit is not None and i >= limit:
            break
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise BadInput(f"{path}: row {i}: no 'question' string")
        steps = _as_steps(row, i, str(path))
        if not steps:
            skipped += 1
            continue
        rows.append(
            {
                "id": str(row.get("id", f"row-{i}")),
                "source": row.get("source", path.stem),
                "source_split": row.get("source_split"),
                "sample_index": row.get("sample_index", 0),
                "question": question,
                "steps": steps,
            }
        )
    if not rows:
        raise BadInput(f"{path}: no rows with a solution to annotate")
    return rows, skipped


__all__ = [
    "PROMPT_MARKER",
    "PROMPT_SHA256",
    "PROMPT_TEMPLATE",
    "PROMPT_VERSION",
    "build_messages",
    "load_solutions",
    "row_key",
    "solution_text",
]
