"""The cards of the sampled and labelled runs: generations, annotations, Monte-Carlo values, on-policy DPO pairs.

As in ``labels``, each kind has ``is_<kind>(folder)``, ``derive(folder, known)`` (the provenance its own
files record) and ``spec(folder, provenance)``:

- **generations** (``posttrain generate``): ``generations.jsonl`` (split ``train``) and ``generate.json``;
- **annotations** (``posttrain annotate``): ``annotations.jsonl`` (split ``train``), every record of the run
  with its status; the SHARP views built from it are in ``sharp/``, with their own card;
- **mc-values** (``posttrain label mc``): ``train`` and ``validation`` (``train.*``, ``val.*``) as the
  config ``default``, each value-filtered variant folder (``band-LO-HI/``, ``mid-LO-HI/``) as a config of
  its own; the Polaris MC card's value distribution and columns. Parquet is declared when written, else
  JSON Lines; the other copy is hashed beside it;
- **preference-pairs** (``posttrain train dpo``, ``preference.source: policy`` or ``step``): ``train.jsonl`` and
  ``preference_pairs.json`` in the run's ``pairs/`` folder (``publish_pairs`` in ``data.cards``).

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


def generation_settings(data: str | Path | None) -> dict[str, Any]:
    """The policy, sampling and seed of the ``posttrain generate`` run that wrote ``data`` (a folder or its file)."""
    if data is None:
        return {}
    path = Path(str(data))
    folder = path if path.is_dir() else path.parent
    settings = sec.json_object(folder / "generate.json")
    if not settings:
        return {}
    keep = ("backend", "k", "temperature", "top_p", "max_new_tokens", "limit", "step_split", "system_prompt")
    return {
        "policy": settings.get("model"),
        "sampling": {k: settings.get(k) for k in keep},
        "seeds": {"sampling": settings.get("seed")},
        "generated_from": settings.get("data"),
    }


# --------------------------------------------------------------------------------------------------
# generations


def is_generations(folder: Path) -> bool:
    return (folder / "generations.jsonl").is_file() and (folder / "generate.json").is_file()


def generations_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    found = generation_settings(folder)
    return {"policy": found.get("policy"), "sampling": found.get("sampling"), "grader": "none (annotate labels them)",
            "seeds": found.get("seeds"), "data": found.get("generated_from"), **known}  # fmt: skip


def generations_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    rows = list(sec.rows_of(folder / "generations.jsonl"))
    problems = Counter(str(r.get("id")) for r in rows)
    cut = Counter("empty" if not r.get("steps") else r.get("step_split") for r in rows)
    origin = Counter(f"{r.get('source')}:{r.get('source_split')}" for r in rows)
    n_steps = sum(len(r.get("steps") or []) for r in rows)
    section = table(
        ["rows", "problems", "samples per problem", "steps (mean)", "cut on blank lines", "cut on lines", "empty"],
        [[fmt_int(len(rows)), fmt_int(len(problems)), "/".join(map(str, sorted(set(problems.values())))),
          f"{n_steps / len(rows):.2f}" if rows else "-", fmt_int(cut.get("blank", 0)), fmt_int(cut.get("lines", 0)),
          fmt_int(cut.get("empty", 0))]],
        right=range(7),
    )  # fmt: skip
    test = {k: v for k, v in origin.items() if k.rsplit(":", 1)[-1] == "test"}
    sections = [
        "## Solutions\n\n" + section + "\n\nRows by source and split:\n\n"
        + sec.counter_table(("source:split", "rows"), dict(origin)),
        *(["## Contamination\n\nThese problems come from a test split (" + ", ".join(f"`{k}`" for k in test) + "): a "
           "corpus built from them must not be used to evaluate a solver on that split."] if test else []),
        "## Columns\n\n" + columns_section("generations", rows[0] if rows else None),
    ]  # fmt: skip
    return card_spec(
        "generations", {"default": {"train": "generations.jsonl"}}, sections, provenance, ["generate.json"]
    )


# --------------------------------------------------------------------------------------------------
# annotations


def is_annotations(folder: Path) -> bool:
    return (folder / "annotations.jsonl").is_file()


def annotations_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    first = next(iter(sec.rows_of(folder / "annotations.jsonl")), {})
    judge = {"model": first.get("model"), "prompt_version": first.get("prompt_version")}
    upstream = generation_settings(known.get("data"))
    found = {"policy": upstream.get("policy"), "sampling": upstream.get("sampling"), "judge": judge,
             "seeds": upstream.get("seeds"), "data": known.get("data")}  # fmt: skip
    if isinstance(known.get("judge"), dict):
        known = {**known, "judge": {**judge, **known["judge"]}}
    return {**found, **known}


def annotations_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    rows = list(sec.rows_of(folder / "annotations.jsonl"))
    status = Counter(r.get("status") for r in rows)
    spans = sum(r.get("n_spans") or 0 for r in rows)
    attempts = Counter(r.get("attempts") for r in rows)
    sections = [
        "## Annotation status\n\n" + sec.counter_table(("status", "rows"), dict(sorted(status.items(), key=str)))
        + f"\n\n{fmt_int(spans)} `<HAL>` spans in all; answers asked per row: "
        + ", ".join(f"{k}: {fmt_int(v)}" for k, v in sorted(attempts.items(), key=str))
        + ". A `failed` row has no annotation (`spans` is null) and is left out of the SHARP views in `sharp/`, "
        "which carry their own card.",
        "## Columns\n\nEvery record of the run file: `index, key, model, prompt_version` (which row, which judge), "
        "the solution (`id, source, source_split, sample_index, question, steps`), and the outcome (`status, spans, "
        "hallucination_annotation, n_spans, verified, repair, attempts, rejected, http_retries, response`).",
    ]  # fmt: skip
    return card_spec("annotations", {"default": {"train": "annotations.jsonl"}}, sections, provenance)


# --------------------------------------------------------------------------------------------------
# Monte-Carlo values


def is_mc(folder: Path) -> bool:
    summary = sec.json_object(folder / "summary.json")
    return "value_table" in summary and "config" in summary


def mc_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    summary = sec.json_object(folder / "summary.json")
    config = dict(summary.get("config", {}))
    sampling = {k: config.get(k) for k in ("backend", "n", "samples_per_problem", "temperature", "top_p",
                                            "max_new_tokens", "search", "step_split", "stop")}  # fmt: skip
    return {
        "policy": config.get("policy"),
        "sampling": sampling,
        "grader": config.get("grader"),
        "judge": config.get("judge"),
        "seeds": {"run": config.get("seed")},
        "prompt": summary.get("prompt"),
        "data": None,
        **known,
    }


def _mc_split_files(folder: Path) -> tuple[dict[str, str], list[str]]:
    """``{split: declared file}`` and the other copies, for one folder of MC rows."""
    declared, others = {}, []
    for split, stem in (("train", "train"), ("validation", "val")):
        found = [f"{stem}.{ext}" for ext in ("parquet", "jsonl") if (folder / f"{stem}.{ext}").is_file()]
        if found:
            declared[split] = found[0]
            others += found[1:]
    return declared, others


def mc_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    from posttrainlab.data.formats.mc_value import mc_stats

    configs, side = {}, ["summary.json", "value_table.md"]
    variants = [""] + sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name.startswith(("band-", "mid-")))
    stats = {}
    for name in variants:
        declared, others = _mc_split_files(folder / name if name else folder)
        prefix = f"{name}/" if name else ""
        configs[name or "default"] = {split: prefix + rel for split, rel in declared.items()}
        side += [prefix + rel for rel in others]
        for split, rel in declared.items():
            stats[f"{name}/{split}" if name else split] = mc_stats(sec.rows_of(folder / (prefix + rel)))
    if not configs["default"]:
        raise BadInput(f"{folder}: no train.parquet / train.jsonl of `posttrain label mc`")
    inferred = Counter(
        str(r.get("value_source") or "measured")
        for rel in configs["default"].values()
        for r in sec.rows_of(folder / rel)
    )
    first = next(iter(sec.rows_of(folder / next(iter(configs["default"].values())))), None)
    summary = sec.json_object(folder / "summary.json")
    sections = [
        "## Value distribution\n\n" + sec.value_table(stats)
        + "\n\nThe mass at 0 and 1 is label collapse on problems the policy reliably fails or solves; the "
        "value-filtered configs (`band-LO-HI`: rows with LO <= V <= HI; `mid-LO-HI`: problems whose solve rate lies "
        "in [LO, HI]) exist for that reason.",
        f"## Splits\n\n`validation` holds {fmt_int(len(summary.get('val_ids', [])))} problems held out by id (a hash "
        "of the id alone); the splits are disjoint by `id`. Value sources of the default config: "
        + ", ".join(f"{k} {fmt_int(v)}" for k, v in sorted(inferred.items())) + ".",
        "## Columns\n\n" + columns_section("mc-values", first),
        "## Intended training use\n\nOne row per prefix with a placeholder `yes` verdict; the soft-target PRM loss "
        "reads `reward` as V and minimises `-[V log P(yes) + (1-V) log P(no)]` at the verdict position.",
    ]  # fmt: skip
    return card_spec("mc-values", configs, sections, provenance, [f for f in side if (folder / f).is_file()])


# --------------------------------------------------------------------------------------------------
# on-policy DPO pairs


def is_pairs(folder: Path) -> bool:
    return (folder / "train.jsonl").is_file() and (folder / "preference_pairs.json").is_file()


def pairs_derive(folder: Path, known: dict[str, Any]) -> dict[str, Any]:
    summary = sec.json_object(folder / "preference_pairs.json")
    settings = dict(summary.get("settings", {}))
    keep = ("k", "temperature", "top_p", "max_new_tokens", "pairs_per_prompt", "chosen_fallback", "batch_size")
    return {
        "policy": settings.get("policy"),
        "sampling": {"backend": summary.get("backend"), **{k: settings.get(k) for k in keep}},
        "grader": "arith (Answer: <int>)",
        "seeds": {"sampling": settings.get("seed")},
        "data": {k: settings.get(k) for k in ("data", "split", "limit", "records_sha256")},
        **known,
    }


def pairs_spec(folder: Path, provenance: dict[str, Any]) -> CardSpec:
    rows = list(sec.rows_of(folder / "train.jsonl"))
    counts = sec.json_object(folder / "preference_pairs.json").get("counts", {})
    sections = [
        "## Pairs\n\n"
        + table(["pairs", "prompts with a pair", "chosen from the policy", "chosen = reference"],
                [[fmt_int(len(rows)), fmt_int(len({r.get('source_id') for r in rows})),
                  fmt_int(sum(r.get("chosen_source") == "policy" for r in rows)),
                  fmt_int(sum(r.get("chosen_source") == "reference" for r in rows))]], right=range(4))
        + "\n\nRejected answers by outcome:\n\n"
        + sec.counter_table(("outcome", "pairs"), dict(sorted(Counter(r.get("rejected_outcome") for r in rows).items(),
                                                              key=str)))
        + f"\n\nSampled: {fmt_int(counts.get('prompts', 0))} prompts, {fmt_int(counts.get('samples', 0))} answers; "
        f"{fmt_int(counts.get('prompts_without_correct', 0))} prompts without a correct answer and "
        f"{fmt_int(counts.get('prompts_without_incorrect', 0))} without an incorrect one.",
        "## Columns\n\n" + columns_section("preference-pairs", rows[0] if rows else None),
    ]  # fmt: skip
    return card_spec("preference-pairs", {"default": {"train": "train.jsonl"}}, sections, provenance,
                     ["preference_pairs.json"])  # fmt: skip


__all__ = [
    "annotations_derive",
    "annotations_spec",
    "generation_settings",
    "generations_derive",
    "generations_spec",
    "is_annotations",
    "is_generations",
    "is_mc",
    "is_pairs",
    "mc_derive",
    "mc_spec",
    "pairs_derive",
    "pairs_spec",
]
