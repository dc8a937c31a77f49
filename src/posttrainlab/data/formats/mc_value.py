"""Monte-Carlo value rows (Polaris MC, seed 003): one row per prefix of a reasoning trace.

Each row carries ``reward`` = V(prefix), the share of correct continuations, and ``correct`` =
(V >= 0.5); ``step_idx`` is the prefix position within the base trace of ``num_steps`` steps, and
(``id``, ``sample_index``) names the trace. The card's checks, one row at a time: 0 <= V <= 1,
``correct == (V >= 0.5)``, 0 <= ``step_idx`` <= ``num_steps``; across rows: one ``num_steps`` and no
repeated ``step_idx`` per trace, and train/validation splits disjoint by ``id``.

One optional column, posttrainlab's own: ``value_source``, ``measured`` (V from the prefix's rollouts or
the trace's own grade) or ``inferred`` (not rolled out: a value ``posttrain label mc --search binary``
concluded, docs/mc-labelling.md). ``posttrain label mc`` always writes it; a row without it (the card's
rows, older files), or with null, does not say, and readers take it as measured.

``group_traces`` folds the prefixes of one trace into one record with a value per step and
``ungroup_trace`` writes the rows back: the round trip is exact (same rows, same order) when the rows
of a trace are contiguous, as the pipeline writes them; with ``contiguous=False`` rows are grouped in
memory and come back grouped by trace. ``correct`` is not stored in a trace: it is recomputed from V,
which validation has checked it equals.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from posttrainlab.data.formats.schema import (
    Row,
    RowError,
    check_str,
    first_reason,
    is_int,
    is_number,
    missing_keys,
)
from posttrainlab.data.formats.stats import ratio

KEYS = (
    "messages",
    "reward",
    "correct",
    "label",
    "id",
    "source",
    "sample_index",
    "step_idx",
    "num_steps",
    "loss_weight",
    "enable_thinking",
)
#: The optional column saying whether ``reward`` was measured or inferred (module docstring).
VALUE_SOURCE = "value_source"
VALUE_SOURCES = ("measured", "inferred")
#: Fields shared by every prefix of a trace (checked equal when grouping).
TRACE_KEYS = ("id", "source", "sample_index", "num_steps", "enable_thinking")
#: Fields that vary per prefix, stored as lists in a trace (``reward`` becomes ``values``).
STEP_KEYS = ("step_idx", "reward", "label", "loss_weight", "messages")
#: The card's value table, one bucket a row: the key ``mc_stats`` returns (and ``posttrain data stats --format
#: mc-value --json`` prints, in this order) and the label ``posttrain label mc`` prints and writes beside it.
STATS_BUCKETS = (
    ("rows", "rows"),
    ("v_eq_0", "V == 0"),
    ("v_eq_1", "V == 1"),
    ("v_mid", "0 < V < 1"),
    ("v_10_90", "V in [0.1, 0.9]"),
    ("correct", "correct (V >= 0.5)"),
    ("mean_v", "mean V"),
)
STATS_KEYS = tuple(key for key, _ in STATS_BUCKETS)


def _check_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages is not a non-empty list of chat turns"
    for i, turn in enumerate(messages):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("role"), str)
            or not isinstance(turn.get("content"), str)
        ):
            return f"messages[{i}] is not an object with string role and content"
    return None


def check_mc_row(row: Row) -> str | None:
    """The first fault of one MC-value row, or ``None``.

    >>> row = {"messages": [{"role": "user", "content": "q"}], "reward": 0.4, "correct": True,
    ...        "label": "yes", "id": "p1", "source": "polaris", "sample_index": 0, "step_idx": 1,
    ...        "num_steps": 3, "loss_weight": 1.0, "enable_thinking": False}
    >>> check_mc_row(row)
    'correct is True but reward 0.4 < 0.5'
    """
    reward = row.get("reward") if isinstance(row, dict) else None
    return first_reason(
        lambda: missing_keys(row, KEYS),
        lambda: _check_messages(row["messages"]),
        lambda: None if is_number(reward) else f"reward is {reward!r}, expected a number",
        lambda: None if 0 <= reward <= 1 else f"reward {reward} is outside [0, 1]",
        lambda: None if isinstance(row["correct"], bool) else f"correct is {row['correct']!r}, expected true or false",
        lambda: (
            None
            if row["correct"] == (reward >= 0.5)
            else f"correct is {row['correct']} but reward {reward} {'>=' if reward >= 0.5 else '<'} 0.5"
        ),
        lambda: check_str(row, "label"),
        lambda: check_str(row, "id"),
        lambda: check_str(row, "source"),
        lambda: (
            None
            if is_int(row["sample_index"]) and row["sample_index"] >= 0
            else f"sample_index is {row['sample_index']!r}, expected an integer >= 0"
        ),
        lambda: None if is_int(row["num_steps"]) else f"num_steps is {row['num_steps']!r}, expected an integer",
        lambda: None if is_int(row["step_idx"]) else f"step_idx is {row['step_idx']!r}, expected an integer",
        lambda: (
            None
            if 0 <= row["step_idx"] <= row["num_steps"]
            else f"step_idx {row['step_idx']} is outside 0..num_steps ({row['num_steps']})"
        ),
        lambda: None if is_number(row["loss_weight"]) else f"loss_weight is {row['loss_weight']!r}, expected a number",
        lambda: (
            None
            if isinstance(row["enable_thinking"], bool)
            else f"enable_thinking is {row['enable_thinking']!r}, expected true or false"
        ),
        lambda: _check_value_source(row.get(VALUE_SOURCE)),
    )


def _check_value_source(value: Any) -> str | None:
    if value is None or value in VALUE_SOURCES:
        return None
    return f"value_source is {value!r}, expected 'measured' or 'inferred'"


def is_inferred(row: Row) -> bool:
    """Whether the row says its V was inferred rather than measured (no ``value_source``: measured).

    >>> is_inferred({"value_source": "inferred"}), is_inferred({"value_source": "measured"}), is_inferred({})
    (True, False, False)
    """
    return row.get(VALUE_SOURCE) == "inferred"


def validate_mc(rows: Iterable[Row]) -> Iterator[tuple[int, str]]:
    """``(row_index, reason)`` for every bad row, including the cross-row checks of a trace.

    Memory grows with the number of rows only through a set of seen ``step_idx`` per trace, never with
    the text of the rows.
    """
    seen: dict[tuple[str, int], tuple[int, set[int], int]] = {}  # key -> (num_steps, step_idx seen, first row)
    for index, row in enumerate(rows):
        reason = check_mc_row(row)
        if reason is not None:
            yield index, reason
            continue
        key = (row["id"], row["sample_index"])
        if key not in seen:
            seen[key] = (row["num_steps"], {row["step_idx"]}, index)
            continue
        num_steps, steps, first = seen[key]
        if row["num_steps"] != num_steps:
            yield (
                index,
                f"num_steps {row['num_steps']} differs from {num_steps} (row {first}) within trace {key}",
            )
        elif row["step_idx"] in steps:
            yield index, f"step_idx {row['step_idx']} repeats within trace {key}"
        else:
            steps.add(row["step_idx"])


def _new_trace(row: Row) -> dict[str, Any]:
    trace: dict[str, Any] = {k: row[k] for k in TRACE_KEYS}
    trace |= {"step_idx": [], "values": [], "label": [], "loss_weight": [], "messages": []}
    if VALUE_SOURCE in row:  # optional: kept per prefix when the trace's rows carry it
        trace[VALUE_SOURCE] = []
    return trace


def _add_step(trace: dict[str, Any], row: Row, index: int) -> None:
    for k in TRACE_KEYS:
        if row[k] != trace[k]:
            raise RowError(index, f"{k} {row[k]!r} differs from {trace[k]!r} earlier in trace {_key(trace)}")
    if row["step_idx"] in trace["step_idx"]:
        raise RowError(index, f"step_idx {row['step_idx']} repeats within trace {_key(trace)}")
    if (VALUE_SOURCE in row) != (VALUE_SOURCE in trace):
        where = ("missing here but present", "present here but missing")[VALUE_SOURCE in row]
        raise RowError(index, f"value_source is {where} earlier in trace {_key(trace)}")
    trace["step_idx"].append(row["step_idx"])
    trace["values"].append(row["reward"])
    for k in ("label", "loss_weight", "messages", VALUE_SOURCE):
        if k in trace:
            trace[k].append(row[k])


def _key(trace: Row) -> tuple[str, int]:
    return trace["id"], trace["sample_index"]


def group_traces(rows: Iterable[Row], *, contiguous: bool = True) -> Iterator[dict[str, Any]]:
    """Fold the prefix rows of each trace (``id``, ``sample_index``) into one trace record.

    A trace holds the shared fields once and, per prefix in input order, ``step_idx``, ``values`` (V),
    ``label``, ``loss_weight``, ``messages`` (and ``value_source`` when the rows carry it: all of a
    trace's rows or none). With ``contiguous=True`` (streaming, one trace in memory) a trace whose rows
    are not contiguous raises ``RowError``; ``contiguous=False`` groups the whole file in memory
    instead. A row with a column outside the Polaris schema (and ``value_source``) raises ``RowError``
    rather than lose it.
    """
    done: set[tuple[str, int]] = set()
    current: dict[str, Any] | None = None
    groups: dict[tuple[str, int], dict[str, Any]] = {}
    for index, row in enumerate(rows):
        reason = check_mc_row(row)
        extra = [k for k in row if k not in KEYS and k != VALUE_SOURCE]
        if reason is None and extra:
            reason = f"key(s) {', '.join(extra)} are not Polaris MC columns: a trace would drop them"
        if reason is not None:
            raise RowError(index, reason)
        key = (row["id"], row["sample_index"])
        if not contiguous:
            if key not in groups:
                groups[key] = _new_trace(row)
            _add_step(groups[key], row, index)
            continue
        if current is None or _key(current) != key:
            if current is not None:
                done.add(_key(current))
                yield current
            if key in done:
                raise RowError(index, f"trace {key} continues after other traces (rows not contiguous)")
            current = _new_trace(row)
        _add_step(current, row, index)
    if current is not None:
        yield current
    yield from groups.values()


def ungroup_trace(trace: Row) -> Iterator[dict[str, Any]]:
    """The prefix rows of a trace record, in the Polaris column order (inverse of ``group_traces``)."""
    n = len(trace["step_idx"])
    for k in ("values", "label", "loss_weight", "messages", VALUE_SOURCE):
        if k in trace and len(trace[k]) != n:
            raise ValueError(f"trace {_key(trace)}: {k} has {len(trace[k])} entries for {n} step_idx")
    for i in range(n):
        v = trace["values"][i]
        yield {
            "messages": trace["messages"][i],
            "reward": v,
            "correct": is_number(v) and v >= 0.5,
            "label": trace["label"][i],
            "id": trace["id"],
            "source": trace["source"],
            "sample_index": trace["sample_index"],
            "step_idx": trace["step_idx"][i],
            "num_steps": trace["num_steps"],
            "loss_weight": trace["loss_weight"][i],
            "enable_thinking": trace["enable_thinking"],
            **({VALUE_SOURCE: trace[VALUE_SOURCE][i]} if VALUE_SOURCE in trace else {}),
        }


def ungroup_traces(traces: Iterable[Row]) -> Iterator[dict[str, Any]]:
    """Rows of many traces, each checked like an input row (``RowError`` names the output row)."""
    index = 0
    for trace in traces:
        for row in ungroup_trace(trace):
            reason = check_mc_row(row)
            if reason is not None:
                raise RowError(index, reason)
            yield row
            index += 1


def problem_ids(rows: Iterable[Row]) -> set[str]:
    """The set of ``id`` values of a split (``RowError`` for a row without a string ``id``).

    >>> sorted(problem_ids([{"id": "b"}, {"id": "a"}, {"id": "b"}]))
    ['a', 'b']
    """
    ids: set[str] = set()
    for index, row in enumerate(rows):
        pid = row.get("id") if isinstance(row, dict) else None
        if not isinstance(pid, str):
            raise RowError(index, f"id is {pid!r}, expected a string")
        ids.add(pid)
    return ids


def split_overlap(splits: dict[str, Iterable[Row]]) -> dict[str, list[str]]:
    """Problem ids found in more than one split: ``{id: [split names]}`` (empty when disjoint by ``id``).

    >>> split_overlap({"train": [{"id": "a"}, {"id": "b"}], "validation": [{"id": "b"}]})
    {'b': ['train', 'validation']}
    """
    owner: dict[str, list[str]] = {}
    for name, rows in splits.items():
        for pid in sorted(problem_ids(rows)):
            owner.setdefault(pid, []).append(name)
    return {pid: names for pid, names in sorted(owner.items()) if len(names) > 1}


def mc_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """The card's value table: shares with V = 0, V = 1, 0 < V < 1, V in [0.1, 0.9], V >= 0.5, and mean V.

    >>> mc_stats([])["rows"], mc_stats([])["mean_v"]
    (0, None)
    """
    n = eq0 = eq1 = band = correct = 0
    total = 0.0
    for index, row in enumerate(rows):
        reason = check_mc_row(row)
        if reason is not None:
            raise RowError(index, reason)
        v = row["reward"]
        n += 1
        total += v
        eq0 += v == 0
        eq1 += v == 1
        band += 0.1 <= v <= 0.9
        correct += v >= 0.5
    return dict(
        zip(
            STATS_KEYS,
            (
                n,
                ratio(eq0, n),
                ratio(eq1, n),
                ratio(n - eq0 - eq1, n),
                ratio(band, n),
                ratio(correct, n),
                ratio(total, n),
            ),
            strict=False,
        )
    )
