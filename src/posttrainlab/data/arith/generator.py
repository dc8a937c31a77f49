"""Build arith-v1 exactly as its card describes it, byte for byte, for any of its releases.

Pools are drawn in the card's order (test, validation, rl_train, preference_train, sft_train, dev,
sft_extra, rl_extra), each from its own RNG stream seeded with ``arith-v1:<seed>:<pool>``, and a key
already drawn by an earlier pool is rejected. A pool therefore depends only on the pools drawn before
it, which is what keeps every file of an earlier release byte-identical in every later one: building
release 1.0.0 simply stops before ``dev``.

The build is checked while it runs: every reference solution must grade correct and well formatted
with the evaluation grader, every rejected response must grade incorrect with its expected outcome
type, and every pair of splits must share no prompt and no problem key except the overlaps the card
makes on purpose. Any violation aborts the build before anything is written.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from posttrainlab.data.arith.card import render_card
from posttrainlab.data.arith.corrupt import CORRUPTIONS, EXPECTED_OUTCOME, corrupt
from posttrainlab.data.arith.problems import CATEGORIES, Problem, draw, space_size
from posttrainlab.data.arith.splits import (  # noqa: F401 - the release table, re-exported for callers
    CONFIGS,
    DATASET,
    GENERATOR,
    INTENDED_OVERLAPS,
    KEY_DESCRIPTION,
    LATEST,
    SEED,
    SPLITS,
    SPLITS_BY_NAME,
    VERSIONS,
    Split,
    check_version,
    rel_path,
    splits_of,
)
from posttrainlab.data.jsonl import dumps
from posttrainlab.errors import PosttrainError
from posttrainlab.grading.arith import ArithGrader


class BuildError(PosttrainError):
    """A generated record failed a build check; nothing was written."""


def file_order(version: str) -> list[Split]:
    """Splits in file order: by config (eval, sft, preference, prompt), then drawing order."""
    splits = splits_of(version)
    return sorted(splits, key=lambda s: CONFIGS.index(s.config))


def draw_pools(version: str = LATEST, seed: int = SEED) -> dict[str, list[Problem]]:
    """The problems of every split of a release (derived splits reuse their sources' problems)."""
    taken: set = set()
    problems: dict[str, list[Problem]] = {}
    for split in splits_of(version):
        if split.sources:
            problems[split.name] = [p for src in split.sources for p in problems[src]]
            continue
        rng = random.Random(f"{DATASET}:{seed}:{split.name}")
        per_category = split.size // len(CATEGORIES)
        categories = [c for c in CATEGORIES for _ in range(per_category)]
        rng.shuffle(categories)
        problems[split.name] = [draw(c, rng, taken) for c in categories]
    return problems


def _records(split: Split, problems: list[Problem], seed: int, built: dict[str, list[dict]]) -> list[dict]:
    if split.sources and split.name != "preference_test":
        return [r for src in split.sources for r in built[src]]
    records = []
    kinds: list[str] = []
    if split.config == "preference":
        rng = random.Random(f"{DATASET}:{seed}:{split.name}:corruption")
        kinds = [k for k in CORRUPTIONS for _ in range(split.size // len(CORRUPTIONS))]
        rng.shuffle(kinds)
    for i, p in enumerate(problems):
        record: dict[str, Any] = {
            "id": f"{split.name}-{i:04d}",
            "category": p.category,
            "prompt": p.prompt,
            "answer": p.answer,
        }
        if split.config == "eval":
            record["solution"] = p.solution
        elif split.config == "sft":
            record["response"] = p.solution
        elif split.config == "preference":
            record["chosen"] = p.solution
            record["rejected"] = corrupt(p, kinds[i], rng)
            record["corruption"] = kinds[i]
        records.append(record)
    return records


def _verify_grades(split: Split, records: list[dict], grader: ArithGrader) -> None:
    """Abort on any reference that does not grade correct, or any rejected that does."""
    for r in records:
        reference = r.get("solution") or r.get("response") or r.get("chosen")
        if reference is not None:
            g = grader.grade(reference, r["answer"])
            if not (g.correct and g.well_formatted):
                raise BuildError(f"arith-v1 build aborted: {r['id']}: reference graded {g.outcome}")
        if "rejected" in r:
            g = grader.grade(r["rejected"], r["answer"])
            expected = EXPECTED_OUTCOME[r["corruption"]]
            if g.correct or g.outcome != expected:
                raise BuildError(
                    f"arith-v1 build aborted: {r['id']}: rejected ({r['corruption']}) graded "
                    f"{g.outcome}, expected {expected}"
                )


def contamination_checks(problems: dict[str, list[Problem]], records: dict[str, list[dict]]) -> dict:
    """Prompt and key overlap of every pair of splits; raise ``BuildError`` on an unintended one."""
    pairs = []
    unintended = 0
    prompts = {name: {r["prompt"] for r in rs} for name, rs in records.items()}
    keys = {name: {p.key for p in ps} for name, ps in problems.items()}
    for a, b in itertools.combinations(list(records), 2):
        prompt_overlap = len(prompts[a] & prompts[b])
        key_overlap = len(keys[a] & keys[b])
        entry: dict[str, Any] = {"splits": [a, b], "prompt_overlap": prompt_overlap, "key_overlap": key_overlap}
        reason = INTENDED_OVERLAPS.get((a, b)) or INTENDED_OVERLAPS.get((b, a))
        if reason:
            entry["intended"] = reason
        elif prompt_overlap or key_overlap:
            unintended += 1
        pairs.append(entry)
    if unintended:
        bad = [p for p in pairs if "intended" not in p and (p["prompt_overlap"] or p["key_overlap"])]
        raise BuildError(f"arith-v1 build aborted: unintended overlap between splits {bad[0]['splits']}")
    return {"problem_key": KEY_DESCRIPTION, "unintended_overlaps": unintended, "pairs": pairs}


def _counts(values, order: tuple[str, ...]) -> dict[str, int]:
    counts = Counter(values)
    return {k: counts[k] for k in order}


@dataclass
class Build:
    """An arith-v1 release built in memory: file bytes by relative path, and its manifest."""

    version: str
    files: dict[str, bytes] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    records: dict[str, list[dict]] = field(default_factory=dict)


def build(version: str = LATEST, seed: int = SEED) -> Build:
    """Generate, check and serialise a release; raises ``BuildError`` on any failed check."""
    import hashlib

    from posttrainlab.data.manifest import MANIFEST, manifest_text

    problems = draw_pools(version, seed)
    grader = ArithGrader()
    records: dict[str, list[dict]] = {}
    for split in splits_of(version):
        records[split.name] = _records(split, problems[split.name], seed, records)
        _verify_grades(split, records[split.name], grader)
    checks = contamination_checks(problems, records)

    out = Build(version, records=records)
    files: dict[str, dict] = {}
    splits_info: dict[str, dict] = {}
    for split in file_order(version):
        data = "".join(dumps(r) + "\n" for r in records[split.name]).encode("utf-8")
        rel = rel_path(split)
        out.files[rel] = data
        files[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "records": len(records[split.name])}
        info: dict[str, Any] = {
            "config": split.config,
            "records": len(records[split.name]),
            "since": split.since,
            "categories": _counts((r["category"] for r in records[split.name]), CATEGORIES),
        }
        if split.sources:
            info["derived_from"] = list(split.sources)
        if split.config == "preference":
            info["corruptions"] = _counts((r["corruption"] for r in records[split.name]), CORRUPTIONS)
        splits_info[split.name] = info

    drawn_mult = sum(
        1 for s in splits_of(version) if not s.sources for p in problems[s.name] if p.category == "multiplication"
    )
    size = space_size("multiplication")
    out.manifest = {
        "dataset": DATASET,
        "version": version,
        "generator": GENERATOR,
        "seed": seed,
        "license": "Apache-2.0",
        "files": files,
        "splits": splits_info,
        "multiplication_space": {"size": size, "drawn": drawn_mult, "unused": size - drawn_mult},
        "contamination_checks": checks,
    }
    out.files["README.md"] = render_card(out.manifest, out.files).encode("utf-8")
    out.files[MANIFEST] = manifest_text(out.manifest).encode("utf-8")
    return out
