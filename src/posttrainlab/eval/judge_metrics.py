"""Metrics of a judge run, computed from its JSON Lines records alone, and their mean ± std over runs.

A run file holds one record per judged row with at least ``prompt, completions, labels, response,
hallucination_list, attempts`` (``hallucination_list`` is ``null`` for a row recorded as failed).
:func:`judge_metrics` needs nothing else, so a live run and ``posttrain eval judge --filepath`` compute
the same numbers by the same code: the live run writes its records, reads them back, and scores them.

Layout of ``metrics → All`` (fractions in [0, 1]; docs/design.md "Metric definitions"):

- ``span_level``: micro character precision/recall/F1 under the card's ``label-aligned`` rule, which
  **reads the gold labels** (``reads_gold_labels: true``), with the character counts;
- ``span_level_gold_independent``: the same under the ``gold-independent`` rule;
- ``case_level``: a row is flagged when its list is non-empty; precision/recall/F1/accuracy of the
  flawed class;
- ``first_error``: ProcessBench first-error F1, the predicted first wrong step being the step that holds
  the earliest located span (gold-independent);
- ``unlocated_spans`` (count, rows, every span) and ``span_locate_methods`` (exact/whitespace/fuzzy).

Failed rows are left out of every metric and counted in ``failed_rows``; ``test_data_size`` is the
number of rows scored, so a run with failures never passes for a complete one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.counts import Confusion
from posttrainlab.eval.span_metrics import (
    GOLD_INDEPENDENT,
    LABEL_ALIGNED,
    SpanLevel,
    predicted_first_wrong_step,
    span_case_confusion,
    span_level,
)
from posttrainlab.eval.step_metrics import first_error_f1

REQUIRED_FIELDS = ("prompt", "completions", "labels", "response", "hallucination_list", "attempts")
DISCLOSURE = (
    "span_level uses the card's label-aligned rule: it reads the gold labels to place the predicted span "
    "(a label-dependent scoring rule, not a reproduction of the SOPO paper's 89.02); "
    "span_level_gold_independent does not."
)
# (path inside metrics.All, short name) of the numbers judge-summary averages, in print order.
SUMMARY_KEYS: tuple[tuple[str, str], ...] = (
    ("span_level.f1", "span F1, label-aligned (reads gold labels)"),
    ("span_level.precision", "span precision, label-aligned (reads gold labels)"),
    ("span_level.recall", "span recall, label-aligned (reads gold labels)"),
    ("span_level_gold_independent.f1", "span F1, gold-independent"),
    ("span_level_gold_independent.precision", "span precision, gold-independent"),
    ("span_level_gold_independent.recall", "span recall, gold-independent"),
    ("case_level.f1", "case F1"),
    ("case_level.precision", "case precision"),
    ("case_level.recall", "case recall"),
    ("case_level.accuracy", "case accuracy"),
    ("first_error.f1", "first-error F1 (ProcessBench)"),
)


def check_record(record: Any) -> str | None:
    """The first fault of a run record, or ``None``.

    >>> check_record({"completions": ["a"], "labels": [True], "hallucination_list": ["a"]}) is None
    True
    >>> check_record({"completions": ["a"], "labels": [True]})
    'missing hallucination_list'
    """
    if not isinstance(record, dict):
        return f"expected an object, got {type(record).__name__}"
    for key in ("completions", "labels", "hallucination_list"):
        if key not in record:
            return f"missing {key}"
    steps, labels, spans = record["completions"], record["labels"], record["hallucination_list"]
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        return "completions is not a list of strings"
    if not isinstance(labels, list) or not all(isinstance(v, bool) for v in labels):
        return "labels is not a list of true/false"
    if len(steps) != len(labels):
        return f"{len(steps)} completions but {len(labels)} labels"
    if spans is not None and (not isinstance(spans, list) or not all(isinstance(s, str) for s in spans)):
        return "hallucination_list is neither null nor a list of strings"
    return None


def _span_dict(result: SpanLevel) -> dict[str, Any]:
    c = result.chars
    return {
        "rule": result.rule,
        "reads_gold_labels": result.reads_gold_labels,
        "precision": c.precision,
        "recall": c.recall,
        "f1": c.f1,
        "tp": c.tp,
        "fp": c.fp,
        "fn": c.fn,
        "tn": c.tn,
    }


def _case_dict(c: Confusion) -> dict[str, Any]:
    return {"precision": c.precision, "recall": c.recall, "f1": c.f1, "accuracy": c.accuracy, **_counts(c)}


def _counts(c: Confusion) -> dict[str, int]:
    return {"tp": c.tp, "fp": c.fp, "fn": c.fn, "tn": c.tn}


def judge_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every metric of a run from its records (module docstring); records in data order.

    >>> m = judge_metrics([
    ...     {"index": 0, "completions": ["a=1", "b=3"], "labels": [True, False], "hallucination_list": ["b=3"]},
    ...     {"index": 1, "completions": ["c=2"], "labels": [True], "hallucination_list": []},
    ...     {"index": 2, "completions": ["d=5"], "labels": [False], "hallucination_list": None}])
    >>> m["test_data_size"], m["failed_rows"], m["metrics"]["All"]["span_level"]["f1"]
    (2, 1, 1.0)
    >>> m["metrics"]["All"]["case_level"]["accuracy"], m["metrics"]["All"]["first_error"]["f1"]
    (1.0, 1.0)
    """
    for i, record in enumerate(records):
        fault = check_record(record)
        if fault is not None:
            raise ValueError(f"record {i}: {fault}")
    scored = [r for r in records if r["hallucination_list"] is not None]
    ids = [r.get("index", i) for i, r in enumerate(scored)]
    steps = [r["completions"] for r in scored]
    labels = [r["labels"] for r in scored]
    spans = [r["hallucination_list"] for r in scored]
    aligned = span_level(steps, labels, spans, LABEL_ALIGNED)
    independent = span_level(steps, labels, spans, GOLD_INDEPENDENT)
    gold_first = [next((k for k, ok in enumerate(ls) if not ok), -1) for ls in labels]
    pred_first = [predicted_first_wrong_step(s, sp) for s, sp in zip(steps, spans, strict=True)]
    first = first_error_f1(gold_first, pred_first)
    unlocated = [{"index": ids[row], "span": span} for row, span in aligned.unlocated]
    failed = [r.get("index", i) for i, r in enumerate(records) if r["hallucination_list"] is None]
    return {
        "test_data_size": len(scored),
        "records": len(records),
        "failed_rows": len(failed),
        "failed_indices": failed,
        "disclosure": DISCLOSURE,
        "metrics": {
            "All": {
                "span_level": _span_dict(aligned),
                "span_level_gold_independent": _span_dict(independent),
                "case_level": _case_dict(span_case_confusion(labels, spans)),
                "first_error": {
                    "f1": first.f1,
                    "accuracy_erroneous": first.accuracy_erroneous,
                    "accuracy_correct": first.accuracy_correct,
                    "n_erroneous": first.n_erroneous,
                    "n_correct": first.n_correct,
                    "rule": "step holding the earliest located span (gold-independent)",
                },
                "unlocated_spans": {
                    "count": len(unlocated),
                    "rows": len({u["index"] for u in unlocated}),
                    "spans": unlocated,
                },
                "span_locate_methods": dict(sorted(aligned.methods.items())),
                "spans_listed": aligned.n_spans,
            }
        },
    }


# ---- mean ± std over runs ---------------------------------------------------------------------------


def _get(metrics: dict[str, Any], dotted: str) -> float | None:
    value: Any = metrics.get("metrics", {}).get("All", {})
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (n - 1 in the denominator; ``None`` for one value).

    >>> mean_std([0.8, 0.9, 1.0])
    (0.9, 0.1)
    """
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return round(mean, 12), None
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return round(mean, 12), round(std, 12)


def run_problems(runs: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Why a set of metric files should not be averaged: smoke runs, failed or missing rows, sizes or
    data files that differ. Empty when they agree.

    >>> run_problems([("a", {"test_data_size": 3}), ("b", {"test_data_size": 2, "smoke_run": True})])
    ['b is a smoke run (--max-samples)', 'test_data_size differs: a 3, b 2']
    """
    problems = []
    for name, m in runs:
        rows = m["data"].get("rows") if isinstance(m.get("data"), dict) else None
        size = m.get("test_data_size")
        if m.get("smoke_run"):
            problems.append(f"{name} is a smoke run (--max-samples)")
        elif isinstance(rows, int) and isinstance(size, int) and size < rows:
            problems.append(f"{name} scored {size} of the data file's {rows} rows")
        elif m.get("failed_rows"):
            problems.append(f"{name} has {m['failed_rows']} failed rows")
    sizes = [m.get("test_data_size") for _, m in runs]
    if len(set(sizes)) > 1:
        pairs = ", ".join(f"{n} {s}" for (n, _), s in zip(runs, sizes, strict=True))
        problems.append(f"test_data_size differs: {pairs}")
    shas = {m["data"].get("sha256") for _, m in runs if isinstance(m.get("data"), dict) and m["data"].get("sha256")}
    if len(shas) > 1:
        problems.append(f"the runs scored {len(shas)} different data files (sha256 differs)")
    return problems


def summarize_runs(runs: Sequence[tuple[str, dict[str, Any]]], accept_mismatch: bool = False) -> dict[str, Any]:
    """Mean ± sample std of :data:`SUMMARY_KEYS` over runs ``(name, metric JSON)``.

    Raises ``BadInput`` listing :func:`run_problems` unless ``accept_mismatch``; with it, the problems
    are kept in the result.
    """
    if not runs:
        raise BadInput("judge-summary: no metric files given")
    problems = run_problems(runs)
    if problems and not accept_mismatch:
        raise BadInput("judge-summary: " + "; ".join(problems) + " (pass --accept-mismatch to average them anyway)")
    summary: dict[str, Any] = {}
    for key, label in SUMMARY_KEYS:
        values = [_get(m, key) for _, m in runs]
        if any(v is None for v in values):
            continue
        mean, std = mean_std(values)  # type: ignore[arg-type]
        summary[key] = {"label": label, "mean": mean, "std": std, "values": values}
    return {
        "runs": len(runs),
        "files": [name for name, _ in runs],
        "test_data_size": [m.get("test_data_size") for _, m in runs],
        "problems": problems,
        "accepted_mismatch": bool(problems),
        "std": "sample standard deviation (n - 1)",
        "disclosure": DISCLOSURE,
        "metrics": summary,
    }
