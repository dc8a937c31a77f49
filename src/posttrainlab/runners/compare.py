"""``posttrain eval compare``'s inputs: per-problem outcomes read back from evaluation outputs.

- ``read_outcomes``: an ``eval policy`` folder (its ``samples.jsonl``), any JSON Lines file of rows with ``id``,
  ``category`` and ``correct`` (true/false), or a folder holding such an ``outcomes.jsonl`` (beam search writes
  ``OUT/beam-search/outcomes.jsonl``); ``best_of_n_outcomes``: per selector, from a best-of-N folder;
- ``read_sampled``: the sampled outcomes (``samples``, ``n_correct``, ``maj_correct``) of an ``eval policy`` folder
  run with ``--samples K``;
- ``read_trace``: whether each right answer (greedy, and sampled when there are samples) came with a wrong step, from
  an ``eval policy`` folder of arith-v1 problems: its rows' ``wrong_step``, worked out from the prompt and response
  (``eval.trace_error.mark_rows``) for folders written before the field existed.

``comparison``, ``sampled_comparison`` and ``trace_comparison`` pair two of them with ``eval.compare.paired``,
``eval.sampled_compare.paired_sampled`` and ``eval.trace_error`` (the statistics, pure functions; docs/metrics.md
"Paired comparison", "Trace error").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from posttrainlab.data.arith.steps import problem_of
from posttrainlab.errors import BadInput
from posttrainlab.eval.compare import FIELDS, Outcomes, paired
from posttrainlab.eval.policy import UNCATEGORISED
from posttrainlab.eval.sampled import add_votes
from posttrainlab.eval.sampled_compare import Sampled, paired_sampled
from posttrainlab.eval.trace_error import (
    SampledTrace,
    Trace,
    mark_rows,
    paired_sampled_trace,
    paired_trace,
)
from posttrainlab.run_layout import METRICS, OUTCOMES, SAMPLES, SCORES


def outcomes_file(path: str | os.PathLike) -> Path:
    """The outcomes file ``path`` names: a file, or a folder's ``outcomes.jsonl`` or else ``samples.jsonl``."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.exists():
        raise BadInput(f"{path}: no such file or folder")
    for name in (OUTCOMES, SAMPLES):
        if (path / name).is_file():
            return path / name
    raise BadInput(f"{path}: holds no outcomes.jsonl or samples.jsonl (expected an eval policy folder)")


def read_outcomes(path: str | os.PathLike) -> Outcomes:
    """Per-problem outcomes from an eval folder or a JSON Lines file of ``id, category, correct`` rows.

    A missing file, a row without one of the three fields, a ``correct`` that is not true/false, a
    repeated id or a file without rows is ``BadInput`` naming the file (and line). A ``category`` of
    ``null`` reads as ``uncategorised``.
    """
    from posttrainlab.data.jsonl import iter_jsonl

    file = outcomes_file(path)
    out: Outcomes = {}
    for lineno, row in enumerate(iter_jsonl(file), start=1):
        missing = [k for k in FIELDS if k not in row]
        if missing:
            hint = " (a best-of-N samples.jsonl: compare its selectors in the report)" if "samples" in row else ""
            raise BadInput(f"{file}:{lineno}: row has no {', '.join(missing)} field{hint}")
        if not isinstance(row["correct"], bool):
            raise BadInput(f"{file}:{lineno}: correct is {row['correct']!r}, not true or false")
        key = str(row["id"])
        if key in out:
            raise BadInput(f"{file}:{lineno}: id {key!r} appears twice")
        out[key] = (UNCATEGORISED if row["category"] is None else str(row["category"]), row["correct"])
    if not out:
        raise BadInput(f"{file}: no rows to compare")
    return out


def best_of_n_outcomes(folder: str | os.PathLike, n: int | None = None) -> tuple[int, dict[str, Outcomes]]:
    """``(n', {selector: outcomes})`` of a best-of-N output folder at ``n'`` (default: the largest).

    A problem's outcome under a selector is whether the sample that selector chose among the first
    ``n'`` (``scores.jsonl`` ``selected[selector][str(n')]``) is graded correct (``samples.jsonl``),
    so each selector can be compared with ``majority`` by ``paired``. Selectors keep
    ``scores.jsonl``'s order (``eval.best_of_n.SELECTORS``).
    """
    from posttrainlab.data.jsonl import iter_jsonl

    folder = Path(folder)
    files = [folder / SAMPLES, folder / SCORES]
    for file in files:
        if not file.is_file():
            raise BadInput(f"{folder}: no {file.name} (expected a best-of-N output folder)")
    samples: dict[str, dict] = {}
    for lineno, row in enumerate(iter_jsonl(files[0]), start=1):
        if "id" not in row or not isinstance(row.get("samples"), list):
            raise BadInput(f"{files[0]}:{lineno}: row has no id or samples list")
        samples[str(row["id"])] = row
    selected: dict[str, dict] = {}
    for lineno, row in enumerate(iter_jsonl(files[1]), start=1):
        if "id" not in row or not isinstance(row.get("selected"), dict) or not row["selected"]:
            raise BadInput(f"{files[1]}:{lineno}: row has no id or selected map")
        if str(row["id"]) not in samples:
            raise BadInput(f"{files[1]}:{lineno}: id {row['id']!r} is not in {files[0].name}")
        selected[str(row["id"])] = row["selected"]
    if not selected:
        raise BadInput(f"{files[1]}: no rows to compare")
    first = next(iter(selected.values()))
    ns = sorted({int(k) for per_n in first.values() for k in per_n})
    n = ns[-1] if n is None else n
    if n not in ns:
        raise BadInput(f"{folder}: n={n} is not one of this run's n' ({', '.join(map(str, ns))})")
    out: dict[str, Outcomes] = {}
    for selector in first:
        per: Outcomes = {}
        for key, chosen in selected.items():
            row = samples[key]
            try:
                sample = row["samples"][chosen[selector][str(n)]]
            except (KeyError, IndexError, TypeError):
                raise BadInput(f"{files[1]}: problem {key}: no valid {selector} choice at n={n}") from None
            category = UNCATEGORISED if row.get("category") is None else str(row["category"])
            per[key] = (category, bool(sample.get("correct")))
        out[selector] = per
    return n, out


def comparison(a: str | os.PathLike, b: str | os.PathLike) -> dict[str, Any]:
    """``{"a": path, "b": path, "overall": ..., "categories": ...}`` of the outcomes at ``b`` against ``a``."""
    return {"a": str(a), "b": str(b), **paired(read_outcomes(a), read_outcomes(b), names=(str(a), str(b)))}


def read_sampled(path: str | os.PathLike) -> Sampled:
    """Per-problem sampled outcomes from an ``eval policy`` folder's (or file's) ``samples.jsonl`` rows; ``BadInput``
    when a row has no samples (an evaluation run without ``--samples``)."""
    from posttrainlab.data.jsonl import iter_jsonl

    file = outcomes_file(path)
    out: Sampled = {}
    for lineno, row in enumerate(iter_jsonl(file), start=1):
        samples = row.get("samples")
        if not isinstance(samples, list) or not samples or "id" not in row:
            raise BadInput(f"{file}:{lineno}: no id or no samples (evaluate with --samples K to compare sampling)")
        if "maj_correct" not in row:
            add_votes([row])
        category = UNCATEGORISED if row.get("category") is None else str(row["category"])
        out[str(row["id"])] = (category, int(row["n_correct"]), len(samples), bool(row["maj_correct"]))
    if not out:
        raise BadInput(f"{file}: no rows to compare")
    return out


def has_samples(path: str | os.PathLike) -> bool:
    """Whether ``path``'s first outcome row holds samples (``read_sampled`` would read it)."""
    from posttrainlab.data.jsonl import iter_jsonl

    try:
        first = next(iter(iter_jsonl(outcomes_file(path))), None)
    except (BadInput, OSError):
        return False
    return isinstance(first, dict) and isinstance(first.get("samples"), list) and bool(first["samples"])


def sampled_comparison(a: str | os.PathLike, b: str | os.PathLike) -> dict[str, Any]:
    """``paired_sampled`` of two evaluation folders (or files), with each side's sampling temperature when its
    ``metrics.json`` is beside the samples."""
    import json

    temperatures = []
    for side in (a, b):
        try:
            m = json.loads((Path(side) / METRICS).read_text(encoding="utf-8"))
            temperatures.append(m.get("sampled", {}).get("temperature"))
        except (OSError, ValueError, AttributeError):
            temperatures.append(None)
    result = paired_sampled(read_sampled(a), read_sampled(b), names=(str(a), str(b)))
    return {"temperature_a": temperatures[0], "temperature_b": temperatures[1], **result}


def read_trace(path: str | os.PathLike) -> tuple[Trace, SampledTrace | None]:
    """``(greedy, sampled)`` trace outcomes of an ``eval policy`` folder's (or file's) rows (``eval.trace_error``);
    ``sampled`` is ``None`` unless every row holds samples. ``BadInput`` naming the file when a row has no id,
    response or ``correct``, or when its problems are not arith-v1 ones (no exact step labels)."""
    from posttrainlab.data.jsonl import iter_jsonl

    file = outcomes_file(path)
    rows = list(iter_jsonl(file))
    for lineno, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not {"id", "response", "correct"} <= set(row):
            raise BadInput(f"{file}:{lineno}: row has no id, response or correct (trace error needs eval policy rows)")
    if not mark_rows(rows):
        raise BadInput(f"{file}: not every row is an arith-v1 problem (or there are none): trace error needs the "
                       "exact step labels of arith-v1")  # fmt: skip
    greedy: Trace = {}
    for row in rows:
        category = UNCATEGORISED if row.get("category") is None else str(row["category"])
        greedy[str(row["id"])] = (category, bool(row["correct"]), bool(row["wrong_step"]))
    if not all(isinstance(r.get("samples"), list) and r["samples"] for r in rows):
        return greedy, None
    sampled: SampledTrace = {
        key: (cat, sum(bool(s.get("correct")) for s in row["samples"]), int(row["n_trace_errors"]))
        for (key, (cat, _, _)), row in zip(greedy.items(), rows, strict=True)
    }
    return greedy, sampled


def has_trace(path: str | os.PathLike) -> bool:
    """Whether ``path``'s first row is an ``eval policy`` row of an arith-v1 problem (``read_trace`` would read it)."""
    from posttrainlab.data.jsonl import iter_jsonl

    try:
        first = next(iter(iter_jsonl(outcomes_file(path))), None)
    except (BadInput, OSError):
        return False
    return isinstance(first, dict) and "response" in first and problem_of(first) is not None


def trace_comparison(a: str | os.PathLike, b: str | os.PathLike) -> dict[str, Any]:
    """Trace error of B against A: ``{"greedy": paired_trace(...), "sampled": paired_sampled_trace(...) | None}``
    (``sampled`` only when both hold samples)."""
    (ga, sa), (gb, sb) = read_trace(a), read_trace(b)
    names = (str(a), str(b))
    return {
        "greedy": paired_trace(ga, gb, names),
        "sampled": None if sa is None or sb is None else paired_sampled_trace(sa, sb, names),
    }


__all__ = [
    "best_of_n_outcomes",
    "comparison",
    "has_samples",
    "has_trace",
    "outcomes_file",
    "read_outcomes",
    "read_sampled",
    "read_trace",
    "sampled_comparison",
    "trace_comparison",
]
