"""From annotation records to the SHARP views: span view, step view, train/test split by problem, summary.

``build_sharp(records, out_dir)`` writes, atomically (a staging folder renamed into place)::

    OUT/all/{span,step,meta}.jsonl     every kept row
    OUT/train/{span,step,meta}.jsonl   the problems of the training split
    OUT/test/{span,step,meta}.jsonl    the problems of the test split
    OUT/summary.json                   counts, clean share, first-error histogram, warnings
    OUT/README.md                      the dataset card (data.cards: configs step, span, meta)

An earlier build in ``OUT`` is replaced; a folder holding any other file is refused (exit 2) and left as it is.

Row i of ``span.jsonl``, ``step.jsonl`` and ``meta.jsonl`` in a folder is the same solution (the SHARP
join by position). The span view is ``question, model_answer, hallucination_annotation`` with the
judge's tags (a clean solution carries no tag); the step view comes from it through the existing
converter (``data.formats.sharp.span_to_step``: 0 where a span touches a step, cut after the first 0);
``meta`` holds ``id, source, source_split, sample_index, status, n_spans, first_error`` for each row.

Rules, and why:

- **Failed rows are never written** (no acceptable annotation: writing them would make them look
  clean). They are counted in the summary.
- **Selection**: ``all`` (default) keeps every sample, as SHARP does. ``one-per-problem`` keeps, for
  each problem, the sample with the lowest ``sample_index`` among its annotated ones. The rule reads no
  label, and the samples of a problem are independent draws, so the kept set is a random sample of
  the policy's solutions: its clean share is the policy's, not one the selection made up.
- **Split by problem**: a problem is ``(source, id)``; all of its samples go to the same side, so no
  problem is in both. Problems are ranked by ``sha256(seed, source, id)`` and the first
  ``round(test_share * problems)`` (at least one when there are two or more problems and the share is
  positive) form the test split: deterministic for a seed, and independent of row order.
- **Contamination**: every row records its ``source_split``. When any row comes from a ``test`` split,
  the summary carries a warning: a corpus (and a PRM trained on it) built from a benchmark's test
  problems must not be used to evaluate a solver on that benchmark's test split (the SHARP card says
  the same of its GSM8K part).

Written by hand: the rules are SHARP's and this project's; the views are the existing formats.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from posttrainlab.data.atomic import check_output_folder, staging_dir
from posttrainlab.data.formats.sharp import check_span_row, span_to_step
from posttrainlab.data.jsonl import write_json, write_jsonl
from posttrainlab.errors import BadInput

SELECTIONS = ("all", "one-per-problem")
SPLITS = ("all", "train", "test")
VIEWS = ("span", "step", "meta")
SUMMARY = "summary.json"
#: every file a build writes (an earlier build is recognised by them)
OWN_FILES = frozenset({SUMMARY, "README.md"} | {f"{split}/{view}.jsonl" for split in SPLITS for view in VIEWS})
TEST_SPLIT_NAMES = ("test",)


def span_row(record: dict[str, Any]) -> dict[str, Any]:
    """The span-view row of an annotated record (keys in the card's order)."""
    return {
        "question": record["question"],
        "model_answer": list(record["steps"]),
        "hallucination_annotation": list(record["hallucination_annotation"]),
    }


def meta_row(record: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """Where a row came from and how it was annotated; ``first_error`` is the step view's 0 (-1: none)."""
    labels = step["step_labels"]
    return {
        "id": record["id"],
        "source": record["source"],
        "source_split": record["source_split"],
        "sample_index": record["sample_index"],
        "status": record["status"],
        "n_spans": record["n_spans"],
        "first_error": labels.index(0) if 0 in labels else -1,
    }


def problem_key(record: dict[str, Any]) -> tuple[str, str]:
    return (str(record.get("source")), str(record["id"]))


def select(records: Sequence[dict[str, Any]], rule: str = "all") -> list[dict[str, Any]]:
    """The records kept under ``rule`` (module docstring), in their input order.

    >>> rs = [{"id": "a", "sample_index": 1}, {"id": "a", "sample_index": 0}, {"id": "b", "sample_index": 2}]
    >>> [r["sample_index"] for r in select(rs, "one-per-problem")]
    [0, 2]
    """
    if rule not in SELECTIONS:
        raise BadInput(f"--select {rule!r}: choose one of {', '.join(SELECTIONS)}")
    if rule == "all":
        return list(records)
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        key = problem_key(r)
        if key not in first or r["sample_index"] < first[key]["sample_index"]:
            first[key] = r
    chosen = {id(r) for r in first.values()}
    return [r for r in records if id(r) in chosen]


def held_out_problems(keys: Iterable[tuple[str, str]], test_share: float, seed: int) -> set[tuple[str, str]]:
    """The problems of the test split (module docstring).

    >>> sorted(held_out_problems([("s", str(i)) for i in range(20)], 0.1, 0))
    [('s', '10'), ('s', '6')]
    """
    if not 0 <= test_share < 1:
        raise BadInput(f"--test-share {test_share}: must be in [0, 1)")
    unique = sorted(set(keys))
    n_test = round(test_share * len(unique))
    if test_share > 0 and len(unique) >= 2:
        n_test = min(max(n_test, 1), len(unique) - 1)

    def rank(key: tuple[str, str]) -> str:
        return hashlib.sha256(f"{seed}\x00{key[0]}\x00{key[1]}".encode()).hexdigest()

    return set(sorted(unique, key=rank)[:n_test])


def view_stats(steps: Sequence[dict[str, Any]], metas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows, problems, clean share and the first-error position histogram of one split."""
    n = len(steps)
    clean = sum(1 for s in steps if 0 not in s["step_labels"])
    hist = Counter(m["first_error"] for m in metas if m["first_error"] >= 0)
    return {
        "rows": n,
        "problems": len({(m["source"], m["id"]) for m in metas}),
        "clean": clean,
        "clean_share": clean / n if n else None,
        "first_error_histogram": {str(k): hist[k] for k in sorted(hist)},
        "steps_mean": sum(len(s["steps"]) for s in steps) / n if n else None,
    }


def contamination_warnings(records: Sequence[dict[str, Any]]) -> list[str]:
    """One warning per (source, test split) the corpus draws problems from."""
    counts = Counter(
        (str(r.get("source")), str(r.get("source_split")))
        for r in records
        if str(r.get("source_split")).lower() in TEST_SPLIT_NAMES
    )
    return [
        f"{n} rows come from the {split!r} split of {source}: do not use this corpus, or a PRM trained on it, to "
        f"evaluate a solver on {source} {split}"
        for (source, split), n in sorted(counts.items())
    ]


def build_views(
    records: Sequence[dict[str, Any]], *, selection: str = "all", test_share: float = 0.1, seed: int = 0
) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, Any]]:
    """``({split: {"span", "step", "meta": rows}}, summary)`` from annotation records (module docstring)."""
    statuses = Counter(r["status"] for r in records)
    usable = [r for r in records if r["status"] != "failed" and r.get("hallucination_annotation") is not None]
    kept = select(usable, selection)
    test = held_out_problems((problem_key(r) for r in kept), test_share, seed)
    views: dict[str, dict[str, list[dict[str, Any]]]] = {s: {v: [] for v in VIEWS} for s in SPLITS}
    for r in kept:
        span = span_row(r)
        reason = check_span_row(span)
        if reason is not None:  # the annotator module builds valid rows; a broken run file does not
            raise BadInput(f"annotation of {r['id']} (sample {r['sample_index']}): {reason}")
        step = span_to_step(span)
        meta = meta_row(r, step)
        for split in ("all", "test" if problem_key(r) in test else "train"):
            views[split]["span"].append(span)
            views[split]["step"].append(step)
            views[split]["meta"].append(meta)
    summary = {
        "annotated": len(records),
        "failed": statuses.get("failed", 0),
        "status": {s: statuses.get(s, 0) for s in ("clean", "tagged", "repaired", "regenerated", "failed")},
        "selection": selection,
        "test_share": test_share,
        "seed": seed,
        "kept": len(kept),
        "splits": {s: view_stats(views[s]["step"], views[s]["meta"]) for s in SPLITS},
        "source_splits": dict(Counter(f"{r.get('source')}:{r.get('source_split')}" for r in kept)),
        "warnings": contamination_warnings(kept),
    }
    return views, summary


def write_views(
    views: dict[str, dict[str, list[dict[str, Any]]]],
    summary: dict[str, Any],
    out: Path,
    provenance: dict[str, Any] | None = None,
) -> Path:
    """Write the views, ``summary.json`` and the card into ``out``, replacing an earlier build atomically."""
    from posttrainlab.data.cards.kinds import write_folder_card

    check_output_folder(out, OWN_FILES.__contains__, what="sharp-build output")
    with staging_dir(out) as tmp:
        for split, files in views.items():
            for name, rows in files.items():
                write_jsonl(tmp / split / f"{name}.jsonl", rows)
        write_json(tmp / SUMMARY, summary, ensure_ascii=False)
        write_folder_card(tmp, "sharp", provenance)
    return out


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Annotation records from a run file (or the folder holding ``annotations.jsonl``), in row order."""
    from posttrainlab.data.runfile import read_run_file
    from posttrainlab.label.annotate import RUN_FILE, STATUSES

    path = Path(path)
    if path.is_dir():
        path = path / RUN_FILE
    if not path.is_file():
        raise BadInput(f"{path}: no such file (write one with posttrain annotate)")
    records, _ = read_run_file(path)
    by_index: dict[int, dict[str, Any]] = {}
    for n, r in enumerate(records, start=1):
        missing = [k for k in ("index", "status", "question", "steps", "id") if k not in r]
        if missing or r["status"] not in STATUSES:
            raise BadInput(f"{path}: record {n}: not an annotation record (missing {', '.join(missing) or 'status'})")
        by_index.setdefault(r["index"], r)
    if not by_index:
        raise BadInput(f"{path}: no records")
    return [by_index[i] for i in sorted(by_index)]


def build_sharp(
    records: Sequence[dict[str, Any]],
    out: str | Path,
    *,
    selection: str = "all",
    test_share: float = 0.1,
    seed: int = 0,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build and write the views (module docstring); the summary.

    ``provenance``: what the card should say of the policy and sampling (``data.cards.kinds.upstream_provenance``
    of the annotation run); the judge is read from the records.
    """
    views, summary = build_views(records, selection=selection, test_share=test_share, seed=seed)
    judges = sorted({str(r.get("model")) for r in records})
    versions = sorted({str(r.get("prompt_version")) for r in records})
    judge = {"model": judges[0] if len(judges) == 1 else judges, "prompt_version": versions[0] if versions else None}
    upstream = dict(provenance or {})
    if isinstance(upstream.get("judge"), dict):
        judge = {**upstream["judge"], **judge}
    write_views(views, summary, Path(out), {**upstream, "judge": judge})
    return summary


__all__ = [
    "SELECTIONS",
    "build_sharp",
    "build_views",
    "contamination_warnings",
    "load_records",
    "select",
    "held_out_problems",
]
