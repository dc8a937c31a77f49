"""The cards of the step-labelled datasets: arith-prm (step and Math-Shepherd views) and the SHARP views.

Each kind has ``derive(folder, known)`` (the provenance its own files record) and ``spec(folder,
provenance)`` (a ``card.CardSpec``: configs, the seed card's sections recounted from the rows).

- **arith-prm** (``posttrain data arith-prm``): ``step/<split>.jsonl`` and ``math_shepherd/<split>.jsonl``
  for ``train``, ``heldout``, ``preference_test``; ``manifest.json`` (its policy and sampling settings)
  and ``stats.json``. Sections: the step labels per split, the first-error histogram, the Math-Shepherd
  view's label counts (the Math-Shepherd-614 card's figures), the columns.
- **sharp** (``posttrain data sharp-build``, ``posttrain annotate``): ``{train,test}/{step,span,meta}.jsonl``
  as the configs ``step``, ``span`` and ``meta``; ``all/`` (their union, in annotation order) and
  ``summary.json`` are hashed beside them (a split may not be named ``all`` in ``datasets``). Sections:
  the SHARP card's subsets table, per-view rows, steps and first-error histogram, spans, statuses.

Written by hand: the sections are the seeds'.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from posttrainlab.data.cards import sections as sec
from posttrainlab.data.cards.about import card_spec, columns_section
from posttrainlab.data.cards.card import CardSpec
from posttrainlab.data.cards.render import fmt_int, table
from posttrainlab.errors import BadInput
from posttrainlab.run_layout import MANIFEST

ARITH_PRM_SPLITS = ("train", "heldout", "preference_test")
SHARP_SPLITS = ("train", "test")
SHARP_VIEWS = ("step", "span", "meta")

# --------------------------------------------------------------------------------------------------
# arith-prm


def is_arith_prm(folder: Path) -> bool:
    return sec.json_object(folder / MANIFEST).get("dataset") == "arith-prm"


def arith_prm_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    manifest = sec.json_object(folder / MANIFEST)
    sampling = {k: v for k, v in manifest.get("sampling", {}).items() if k not in ("seconds", "samples_per_s")}
    seed = sampling.get("seed")
    return {
        "policy": manifest.get("policy"),
        "sampling": sampling,
        "grader": "exact step labels (posttrainlab.data.arith.steps); outcome by the arith grader",
        "judge": None,
        "seeds": {"sampling": seed, "held-out corruptions": seed},
        "data": manifest.get("data"),
        **known,
    }


def arith_prm_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    splits = list(sec.json_object(folder / MANIFEST).get("stats") or ARITH_PRM_SPLITS)
    for s in splits:
        for view in ("step", "math_shepherd"):
            if not (folder / view / f"{s}.jsonl").is_file():
                raise BadInput(f"{folder / view / s}.jsonl: missing (listed in {folder / MANIFEST})")
    steps = {s: sec.step_counts(sec.rows_of(folder / "step" / f"{s}.jsonl")) for s in splits}
    ms = {
        s: sec.step_counts(sec.rows_of(folder / "math_shepherd" / f"{s}.jsonl"), "labels", "completions")
        for s in splits
    }
    sources = {s: Counter(r["source"] for r in sec.rows_of(folder / "step" / f"{s}.jsonl")) for s in splits}
    ms_lines = [
        f"- `{s}`: {fmt_int(c['steps_correct'])} correctly and {fmt_int(c['steps_wrong'])} incorrectly labelled steps; "
        f"{fmt_int(c['with_error'])} examples with at least one incorrect step and {fmt_int(c['without_error'])} "
        "with none."
        for s, c in ms.items()
    ]
    source_rows = [[s, *(fmt_int(sources[s].get(k, 0)) for k in ("policy", "reference", "corruption"))] for s in splits]
    first_row = next(iter(sec.rows_of(folder / "step" / f"{splits[0]}.jsonl")), {})
    sections = [
        "## Step labels\n\n"
        "Every step is a claim a program checks, so the labels are exact: 1 up to the first wrong claim, 0 on it "
        "(or on the last step when the `Answer:` line is wrong or missing), and the steps after it dropped.\n\n"
        + sec.step_table(steps),
        "## First error\n\nRows by the position of their first wrong step (the step view's 0).\n\n"
        + sec.first_error_table(steps),
        "## Math-Shepherd view\n\n`math_shepherd` holds the same solutions as `prompt, completions, labels` "
        "(trl-lib/math_shepherd's form; row i is the solution of row i of `step`, every line of it when the build "
        "labelled every step).\n\n" + "\n".join(ms_lines),
        "## Sources\n\n"
        + table(["split", "policy", "reference", "corruption"], source_rows, right=[1, 2, 3])
        + "\n\n`preference_test` holds arith-v1 **test** problems (its pairs derive from `test`): use it to "
        "evaluate a PRM, never to tune one. No split shares a problem with another.",
        "## Columns\n\n" + columns_section("arith-prm", first_row) + "\n\n`math_shepherd`:\n\n"
        + columns_section("arith-prm", table="columns_math_shepherd"),
    ]  # fmt: skip
    configs = {
        "step": {s: f"step/{s}.jsonl" for s in splits},
        "math_shepherd": {s: f"math_shepherd/{s}.jsonl" for s in splits},
    }
    side = [f for f in (MANIFEST, "stats.json") if (folder / f).is_file()]
    return card_spec("arith-prm", configs, sections, provenance, side)


# --------------------------------------------------------------------------------------------------
# SHARP views


def is_sharp(folder: Path) -> bool:
    return (folder / "all" / "span.jsonl").is_file() and "selection" in sec.json_object(folder / "summary.json")


def sharp_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    summary = sec.json_object(folder / "summary.json")
    return {
        "policy": None,
        "judge": None,
        "selection": summary.get("selection"),
        "seeds": {"train/test split": summary.get("seed")},
        "test_share": summary.get("test_share"),
        **known,
    }


def sharp_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    splits = list(SHARP_SPLITS)
    for s in splits:
        for view in SHARP_VIEWS:
            if not (folder / s / f"{view}.jsonl").is_file():
                raise BadInput(f"{folder / s / view}.jsonl: missing (sharp-build writes every split and view)")
    steps = {s: sec.step_counts(sec.rows_of(folder / s / "step.jsonl")) for s in splits}
    spans = {s: sec.span_counts(sec.rows_of(folder / s / "span.jsonl")) for s in splits}
    metas = {s: list(sec.rows_of(folder / s / "meta.jsonl")) for s in splits}
    status = {s: Counter(m["status"] for m in metas[s]) for s in splits}
    problems = {s: len({(m["source"], m["id"]) for m in metas[s]}) for s in splits}
    test_rows = Counter(
        (str(m["source"]), str(m["source_split"])) for s in splits for m in metas[s] if str(m["source_split"]) == "test"
    )
    subset_rows = [
        [f"`{view}`", " / ".join(fmt_int(steps[s]["rows"]) for s in splits), ", ".join(f"`{c}`" for c in cols)]
        for view, cols in (
            ("step", ("question", "steps", "step_labels")),
            ("span", ("question", "model_answer", "hallucination_annotation")),
            ("meta", ("id", "source", "source_split", "sample_index", "status", "n_spans", "first_error")),
        )
    ]
    span_rows = [
        [s, fmt_int(c["rows"]), fmt_int(c["pieces"]), fmt_int(c["spans"]), fmt_int(c["rows_with_spans"]),
         fmt_int(c["no_hallucinations"]), fmt_int(problems[s])]
        for s, c in spans.items()
    ]  # fmt: skip
    statuses = ("clean", "tagged", "repaired", "regenerated")
    status_rows = [[s, *(fmt_int(status[s].get(k, 0)) for k in statuses)] for s in splits]
    warnings = [
        f"- {n} rows come from the `{split}` split of {source}: do not use this corpus, or a PRM trained on it, to "
        f"evaluate a solver on {source} {split}."
        for (source, split), n in sorted(test_rows.items())
    ]
    sections = [
        "## Subsets\n\n" + table(["config", f"rows ({' / '.join(splits)})", "fields"], subset_rows)
        + "\n\nRow *i* of `step`, `span` and `meta` in a split is the same solution. `all/` holds the union of the "
        "splits in annotation order (hashed under Files; `datasets` reserves the split name `all`). Problems are "
        "split by (source, id): no problem is in both splits.",
        "## Step view\n\n`step_labels[i] == 1` means the step is sound, `0` that it holds a hallucination; every "
        "solution is cut after its first faulty step.\n\n" + sec.step_table(steps)
        + "\n\nFirst error:\n\n" + sec.first_error_table(steps),
        "## Span view\n\nThe untruncated solutions with the judge's `<HAL>…</HAL>` markup; stripping the tags "
        "gives `model_answer` back exactly.\n\n"
        + table(["split", "rows", "pieces", "spans", "rows with a span", "`No hallucinations`", "problems"],
                span_rows, right=range(1, 7)),
        "## Annotation status\n\n" + table(["split", *statuses], status_rows, right=range(1, 5))
        + "\n\nFailed annotations are never written (they would read as clean).",
        "## Columns\n\n" + columns_section("sharp"),
        *(["## Contamination\n\n" + "\n".join(warnings)] if warnings else []),
    ]  # fmt: skip
    configs = {view: {s: f"{s}/{view}.jsonl" for s in splits} for view in SHARP_VIEWS}
    side = [f"all/{view}.jsonl" for view in SHARP_VIEWS] + ["summary.json"]
    return card_spec("sharp", configs, sections, provenance, [f for f in side if (folder / f).is_file()])


__all__ = ["arith_prm_derive", "arith_prm_spec", "is_arith_prm", "is_sharp", "sharp_derive", "sharp_spec"]
