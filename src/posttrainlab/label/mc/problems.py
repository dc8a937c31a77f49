"""The problems to label and their base traces, read from ``--data``.

``--data`` holds problems (a question, ``answer``, ``id``: arith-v1 splits, any JSON Lines/Parquet file; the
question is ``data.problems.row_question``'s: the first of ``question``, ``problem``, ``prompt`` holding text, a chat
giving its last user message) or step-level traces (rows with ``steps``: each row one base trace; rows with the
same ``id``, or the same question when there is no ``id``, are one problem; an arith-v1 question needs
no ``answer``, it is read from the question). For problems, the base traces are the policy's own
samples (``rollouts``). Where the rows are is ``data.loading.row_source``'s answer (the one data-path
resolver: dataset folders and their splits, checksums, the Hub); ``data.formats.readers`` reads them.
Written by hand: which fields make a problem and how trace rows group into problems are ours.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.data.problems import QUESTION_FIELDS, row_question
from posttrainlab.errors import BadInput

#: The split of a dataset folder labelled when none is named (arith-v1's RL prompts).
DEFAULT_SPLIT = "rl_train"


@dataclass
class MCProblem:
    """One problem to label: its prompt (a chat), the question shown in rows, the answer, optional traces."""

    id: str
    prompt: list[dict[str, str]]
    question: str
    answer: Any
    index: int
    traces: list[list[str]] | None = None  # base traces read from a step-level file, else sampled

    def fingerprint(self) -> str:
        """A hash of what labelling reads, so a resumed run notices a changed data file."""
        blob = json.dumps([self.prompt, str(self.answer), self.traces], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _prompt_of(row: dict[str, Any], question: str) -> list[dict[str, str]]:
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return prompt
    return [{"role": "user", "content": question}]


def _answer_of(row: dict[str, Any], question: str, where: str, grader: str) -> Any:
    if row.get("answer") is not None and str(row["answer"]).strip():
        return row["answer"]
    if grader == "arith":
        from posttrainlab.data.arith.steps import parse_question

        problem = parse_question(question)
        if problem is not None:
            return problem.answer
    raise BadInput(f"{where}: row has no answer (and its question is not an arith-v1 question)")


def _rows_of(data: str, split: str | None) -> tuple[Iterable[dict[str, Any]], str]:
    """The rows of ``data`` and a name for messages: an ``hf://`` path, a dataset folder's split, or a file."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.loading import row_source

    if split is not None and data.startswith("hf://"):
        raise BadInput(f"--split {split}: name the split in the hf:// path (hf://owner/name[/CONFIG]:SPLIT)")
    if split is not None and Path(data).is_file():
        raise BadInput(f"--split {split}: {data} is a file, not a dataset folder")
    source = row_source(data, split, default_split=DEFAULT_SPLIT)
    return iter_rows(source.path), source.path


def _trace_problem_id(row: dict[str, Any], question: str) -> str:
    if row.get("id") is not None:
        return str(row["id"])
    return "q-" + hashlib.sha256(question.encode()).hexdigest()[:12]


def load_problems(
    data: str, *, split: str | None = None, limit: int | None = None, grader: str = "arith", step_split: str = "lines"
) -> list[MCProblem]:
    """The problems of ``data`` in file order (module docstring for the two kinds of rows)."""
    rows, where = _rows_of(data, split)
    problems: dict[str, MCProblem] = {}
    kind = None
    for index, row in enumerate(rows):
        line = f"{where}: row {index}"
        question = row_question(row)
        if question is None:
            raise BadInput(f"{line}: no question text in any of the fields {', '.join(QUESTION_FIELDS)}")
        has_steps = "steps" in row
        if kind is None:
            kind = "traces" if has_steps else "problems"
        elif kind != ("traces" if has_steps else "problems"):
            raise BadInput(f"{line}: mixes problem rows and step-level trace rows")
        if has_steps:
            steps = row["steps"]
            if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
                raise BadInput(f"{line}: steps is not a list of strings")
            pid = _trace_problem_id(row, question)
            if pid not in problems:
                if limit is not None and len(problems) >= limit:
                    continue
                answer = _answer_of(row, question, line, grader)
                problems[pid] = MCProblem(pid, _prompt_of(row, question), question, answer, len(problems), [])
            clean = (
                [s.strip() for s in steps if s.strip()] if step_split == "lines" else [s for s in steps if s.strip()]
            )
            problems[pid].traces.append(clean)
            continue
        if limit is not None and len(problems) >= limit:
            break
        pid = str(row.get("id", f"row-{index}"))
        if pid in problems:
            raise BadInput(f"{line}: id {pid!r} repeats (problem rows need unique ids)")
        answer = _answer_of(row, question, line, grader)
        problems[pid] = MCProblem(pid, _prompt_of(row, question), question, answer, len(problems))
    if not problems:
        raise BadInput(f"{where}: no problems to label")
    return list(problems.values())


__all__ = ["DEFAULT_SPLIT", "MCProblem", "load_problems"]
