"""Field checks shared by every step-level format, and the error a bad row raises.

Every format module checks a row with a pure function ``check_*_row(row) -> str | None`` that returns
the *first* fault as a short English reason, or ``None`` for a good row. Validators turn those reasons
into ``(row_index, reason)`` pairs; converters raise ``RowError`` on the first bad row so a
conversion never silently drops or fixes a row. Type checks are strict: JSON ``true`` is not the
integer 1 here, because a label column that mixes the two is a sign that something upstream went
wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

Row = Mapping[str, Any]


class RowError(ValueError):
    """Row ``index`` (0-based) of an input breaks its format; ``reason`` says how."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"row {index}: {reason}")
        self.index = index
        self.reason = reason


def is_int(value: Any) -> bool:
    """True for an ``int`` that is not a ``bool``.

    >>> is_int(1), is_int(True), is_int(1.0)
    (True, False, False)
    """
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """True for a finite ``int`` or ``float`` that is not a ``bool``.

    >>> is_number(0.5), is_number(1), is_number(True), is_number(float("nan"))
    (True, True, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def missing_keys(row: Row, keys: Iterable[str]) -> str | None:
    """The reason a row lacks some required keys, or ``None``.

    >>> missing_keys({"a": 1}, ["a", "b", "c"])
    'missing key(s) b, c'
    """
    if not isinstance(row, Mapping):
        return f"expected an object, got {type(row).__name__}"
    absent = [k for k in keys if k not in row]
    return f"missing key(s) {', '.join(absent)}" if absent else None


def check_str(row: Row, key: str) -> str | None:
    """``row[key]`` must be a string."""
    value = row[key]
    return None if isinstance(value, str) else f"{key} is {type(value).__name__}, expected a string"


def check_str_list(row: Row, key: str, *, nonempty: bool = True) -> str | None:
    """``row[key]`` must be a list of strings (non-empty unless told otherwise).

    >>> check_str_list({"steps": ["a", 3]}, "steps")
    'steps[1] is int, expected a string'
    >>> check_str_list({"steps": []}, "steps")
    'steps is empty'
    """
    value = row[key]
    if not isinstance(value, list):
        return f"{key} is {type(value).__name__}, expected a list of strings"
    if nonempty and not value:
        return f"{key} is empty"
    for i, item in enumerate(value):
        if not isinstance(item, str):
            return f"{key}[{i}] is {type(item).__name__}, expected a string"
    return None


def check_list(row: Row, key: str, ok: Callable[[Any], bool], expected: str) -> str | None:
    """``row[key]`` must be a list whose items all pass ``ok``; ``expected`` names them in the reason.

    >>> check_list({"labels": [0, 2]}, "labels", lambda v: v in (0, 1) and is_int(v), "0 or 1")
    'labels[1] is 2, expected 0 or 1'
    """
    value = row[key]
    if not isinstance(value, list):
        return f"{key} is {type(value).__name__}, expected a list"
    for i, item in enumerate(value):
        if not ok(item):
            return f"{key}[{i}] is {item!r}, expected {expected}"
    return None


def first_reason(*checks: Callable[[], str | None]) -> str | None:
    """Run checks in order and return the first reason (later checks may assume earlier ones passed)."""
    for check in checks:
        reason = check()
        if reason is not None:
            return reason
    return None


def check_labelled_steps(
    row: Row, keys: Iterable[str], question: str, steps: str, labels: str, ok: Callable[[Any], bool], expected: str
) -> str | None:
    """The first fault of a row holding a question, its steps and one label per step: the ``keys``, ``question`` a
    string, ``steps`` a list of strings, ``labels`` a list whose every item ``ok`` accepts, as many labels as steps.

    >>> check_labelled_steps({"q": "x", "s": ["a", "b"], "l": [1]}, ("q", "s", "l"), "q", "s", "l", is_int, "an int")
    '2 s but 1 l'
    """
    return first_reason(
        lambda: missing_keys(row, keys),
        lambda: check_str(row, question),
        lambda: check_str_list(row, steps),
        lambda: check_list(row, labels, ok, expected),
        lambda: (
            None
            if len(row[steps]) == len(row[labels])
            else f"{len(row[steps])} {steps} but {len(row[labels])} {labels}"
        ),
    )


def validate_rows(rows: Iterable[Row], check: Callable[[Row], str | None]) -> Iterator[tuple[int, str]]:
    """Yield ``(row_index, reason)`` for every row that ``check`` rejects; good rows yield nothing.

    >>> list(validate_rows([{"x": 1}, {}], lambda r: missing_keys(r, ["x"])))
    [(1, 'missing key(s) x')]
    """
    for index, row in enumerate(rows):
        reason = check(row)
        if reason is not None:
            yield index, reason


def map_rows(rows: Iterable[Row], convert: Callable[[Row], Row]) -> Iterator[Row]:
    """Convert rows one for one, turning a ``ValueError`` at row i into ``RowError(i, ...)``.

    >>> list(map_rows([{"x": 1}], lambda r: {"y": r["x"] + 1}))
    [{'y': 2}]
    """
    for index, row in enumerate(rows):
        try:
            yield convert(row)
        except ValueError as e:
            raise RowError(index, str(e)) from None


def checked(rows: Iterable[Row], check: Callable[[Row], str | None]) -> Iterator[Row]:
    """Pass rows through, raising ``RowError`` at the first one ``check`` rejects.

    >>> list(checked([{"x": 1}], lambda r: None))
    [{'x': 1}]
    """
    for index, row in enumerate(rows):
        reason = check(row)
        if reason is not None:
            raise RowError(index, reason)
        yield row
