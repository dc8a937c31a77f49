"""Math-Shepherd: ``prompt, completions, labels: list[bool]``, and the original ``ки``-tagged text.

Two encodings of one format:

- the list form of trl-lib/math_shepherd and Math-Shepherd-614 (seed 001): ``labels[i]`` is ``True``
  for a correct step. Labels come from Monte-Carlo completion, so a ``True`` may follow a ``False``:
  Math-Shepherd keeps every step.
- the original peiyi9979/Math-Shepherd text: ``input`` is the question, a space, then each step
  followed by `` ки`` and a newline; ``label`` is the same text with each ``ки`` replaced by ``+``
  (correct) or ``-``. ``parse_ki`` follows trl's ``examples/datasets/math_shepherd.py``: the question
  ends where ``Step 1:`` (or ``step 1:``) begins, steps and question are stripped.

Conversions: ``ki`` -> list is exact on text written in the canonical layout (``to_ki`` writes it and
refuses a row that would not read back identically); whitespace around the tags is normalised, as in
trl. list -> step view cuts at the first ``False`` (lossy: the later steps and their labels are gone);
step view -> list is lossless (and reads back to the same step row). ``math_shepherd_steps`` reads a
row without the cut, every step with its label (what PRM training and evaluation read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from posttrainlab.data.formats.schema import (
    Row,
    check_labelled_steps,
    check_str,
    first_reason,
    missing_keys,
    validate_rows,
)
from posttrainlab.data.formats.stats import SolutionStats
from posttrainlab.data.formats.step import StepRow, check_step_row, cut_at_first_error

KEYS = ("prompt", "completions", "labels")
KI_KEYS = ("input", "label")
KI = "ки"
_FIRST_STEP = ("Step 1:", "step 1:")


def is_ki_row(row: Row) -> bool:
    """True for a row in the original ``input``/``label`` encoding."""
    return "input" in row and "completions" not in row


def parse_ki(text: str, label: str) -> dict[str, Any]:
    """Read original Math-Shepherd text and its ``+``/``-`` label text into the list form.

    >>> parse_ki("1+1? Step 1: 1+1=2 ки\\nStep 2: The answer is: 3 ки",
    ...          "1+1? Step 1: 1+1=2 +\\nStep 2: The answer is: 3 -")
    {'prompt': '1+1?', 'completions': ['Step 1: 1+1=2', 'Step 2: The answer is: 3'], 'labels': [True, False]}
    """
    tags = [m.start() for m in re.finditer(KI, text)]
    if not tags:
        raise ValueError(f"input has no {KI} step tag")
    if len(label) != len(text) - len(tags) * (len(KI) - 1):
        raise ValueError(f"label is not input with each {KI} replaced by + or -: lengths differ")
    labels: list[bool] = []
    segments: list[str] = []
    pos = lpos = 0
    for i, tag in enumerate(tags):
        segment = text[pos:tag]
        if label[lpos : lpos + len(segment)] != segment:
            raise ValueError(f"label text differs from input text before {KI} tag {i}")
        lpos += len(segment)
        if label[lpos] not in "+-":
            raise ValueError(f"label has {label[lpos]!r} where input has {KI} tag {i}, expected + or -")
        labels.append(label[lpos] == "+")
        segments.append(segment)
        lpos += 1
        pos = tag + len(KI)
    if label[lpos:] != text[pos:]:
        raise ValueError(f"label text differs from input text after the last {KI} tag")
    if text[pos:].strip():
        raise ValueError(f"text after the last {KI} tag would be lost: {text[pos:].strip()[:40]!r}")
    head = segments[0]
    marker = next((m for m in _FIRST_STEP if m in head), None)
    if marker is None:
        raise ValueError(f"cannot tell the question from the first step: no 'Step 1:' before the first {KI}")
    prompt, _, first = head.partition(marker)
    completions = [(marker + first).strip()] + [s.strip() for s in segments[1:]]
    return {"prompt": prompt.strip(), "completions": completions, "labels": labels}


def to_ki(row: Row) -> dict[str, str]:
    """Write a list-form row as original ``input``/``label`` text (the exact inverse of ``parse_ki``).

    Raises ``ValueError`` for a row that would not read back identically (unstripped text, a missing
    ``Step 1:`` at the first step, a ``ки`` inside the text).

    >>> to_ki({"prompt": "Q?", "completions": ["Step 1: a", "Step 2: b"], "labels": [True, False]})
    {'input': 'Q? Step 1: a ки\\nStep 2: b ки', 'label': 'Q? Step 1: a +\\nStep 2: b -'}
    """
    reason = check_ms_list_row(row)
    if reason is not None:
        raise ValueError(reason)
    prompt, completions, labels = row["prompt"], row["completions"], row["labels"]
    if any(KI in s for s in [prompt, *completions]):
        raise ValueError(f"the text holds {KI}, the step tag itself")
    text = prompt + " " + "\n".join(f"{c} {KI}" for c in completions)
    marks = iter("+" if ok else "-" for ok in labels)
    label = re.sub(KI, lambda _: next(marks), text)
    try:
        back = parse_ki(text, label)
    except ValueError as e:
        back = str(e)
    if back != {"prompt": prompt, "completions": list(completions), "labels": list(labels)}:
        why = f": {back}" if isinstance(back, str) else ""
        raise ValueError(
            f"would not read back identically as {KI} text (text must be stripped, the first step must "
            f"start with 'Step 1:' and the question must not contain it){why}"
        )
    return {"input": text, "label": label}


def check_ms_list_row(row: Row) -> str | None:
    """The first fault of a list-form row, or ``None``.

    >>> check_ms_list_row({"prompt": "q", "completions": ["a"], "labels": [1]})
    'labels[0] is 1, expected true or false'
    """
    return check_labelled_steps(row, KEYS, *KEYS, lambda v: isinstance(v, bool), "true or false")


def check_ms_ki_row(row: Row) -> str | None:
    """The first fault of an ``input``/``label`` row, or ``None``."""

    def parses() -> str | None:
        try:
            parse_ki(row["input"], row["label"])
        except ValueError as e:
            return str(e)
        return None

    return first_reason(
        lambda: missing_keys(row, KI_KEYS),
        lambda: check_str(row, "input"),
        lambda: check_str(row, "label"),
        parses,
    )


def check_ms_row(row: Row) -> str | None:
    """The first fault of a Math-Shepherd row in either encoding, or ``None``."""
    if not isinstance(row, dict):
        return missing_keys(row, KEYS)
    return check_ms_ki_row(row) if is_ki_row(row) else check_ms_list_row(row)


def validate_math_shepherd(rows: Iterable[Row]) -> Iterator[tuple[int, str]]:
    """``(row_index, reason)`` for every bad Math-Shepherd row (either encoding, per row)."""
    return validate_rows(rows, check_ms_row)


def as_list_form(row: Row) -> dict[str, Any]:
    """A row of either encoding in the list form (``ValueError`` for a bad row)."""
    reason = check_ms_row(row)
    if reason is not None:
        raise ValueError(reason)
    if is_ki_row(row):
        return parse_ki(row["input"], row["label"])
    return {"prompt": row["prompt"], "completions": list(row["completions"]), "labels": list(row["labels"])}


def ms_to_step(row: Row) -> dict[str, Any]:
    """Math-Shepherd -> step view, cut after the first incorrect step (lossy: later steps are dropped).

    >>> ms_to_step({"prompt": "q", "completions": ["a", "b", "c"], "labels": [True, False, True]})
    {'question': 'q', 'steps': ['a', 'b'], 'step_labels': [1, 0]}
    """
    ms = as_list_form(row)
    steps, labels = cut_at_first_error(ms["completions"], ms["labels"])
    return {"question": ms["prompt"], "steps": steps, "step_labels": labels}


def math_shepherd_steps(row: Row) -> StepRow:
    """A row of either encoding as a ``StepRow``: every step (none cut), ``True`` -> 1, ``False`` -> 0.

    >>> math_shepherd_steps({"prompt": "q", "completions": ["a", "b", "c"], "labels": [True, False, True]}).labels
    [1, 0, 1]
    """
    ms = as_list_form(row)
    return StepRow(ms["prompt"], ms["completions"], [1 if x else 0 for x in ms["labels"]])


def step_to_ms(row: Row) -> dict[str, Any]:
    """Step view -> Math-Shepherd list form (lossless).

    >>> step_to_ms({"question": "q", "steps": ["a", "b"], "step_labels": [1, 0]})
    {'prompt': 'q', 'completions': ['a', 'b'], 'labels': [True, False]}
    """
    reason = check_step_row(row)
    if reason is not None:
        raise ValueError(reason)
    return {
        "prompt": row["question"],
        "completions": list(row["steps"]),
        "labels": [x == 1 for x in row["step_labels"]],
    }


def math_shepherd_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """Rows, correct/incorrect steps over all steps, solutions with an error, first-error position."""
    acc = SolutionStats(labelled=True)
    for index, row in enumerate(rows):
        acc.check(index, check_ms_row(row))
        labels = parse_ki(row["input"], row["label"])["labels"] if is_ki_row(row) else row["labels"]
        acc.add_labels(labels)
    return acc.as_dict()
