"""The dataset card (``README.md``) written beside an arith-v1 build.

Its YAML header declares one configuration per record kind, ``eval`` the default, so that
``datasets.load_dataset(DIR, "eval", split="test")`` loads a local build like the Hub copy.
The body restates the card's facts, with the numbers taken from the manifest of this build, and ends
with the Provenance and Files sections every card of the lab has (``data.cards.render``, whose front
matter this card uses too: ``dataset_info`` with each config's features read from the files).
"""

from __future__ import annotations

import json
from typing import Any

from posttrainlab.data.arith.splits import SPLITS_BY_NAME
from posttrainlab.data.cards.features import Type, merge, type_of
from posttrainlab.data.cards.render import (
    PROVENANCE_LABELS,
    ConfigInfo,
    SplitInfo,
    files_table,
    front_matter,
    provenance_section,
    size_category,
)

_BODY = """\
# arith-v1 ({version})

A small, fully controlled benchmark for comparing post-training methods (SFT, DPO, GRPO) on a task
whose answers can be checked exactly by a program. 100% synthetic, produced by `posttrain data
prepare` (generator {generator}, seed {seed}); re-running the command reproduces every file bit for
bit (`posttrain data prepare --check`). No model generated any of the text.

## Loading

```python
from datasets import load_dataset

test = load_dataset("path/to/this/folder", "eval", split="test")
```

Inside posttrainlab every load re-hashes the file against `manifest.json` and refuses a mismatch.

## Splits

| split | config | records | since | used by |
|---|---|---|---|---|
{rows}

Categories have an equal share in every split: addition, subtraction, multiplication (12-199 x 3-9),
multi_step (two operations, with and without parentheses) and word_problem (8 templates, gender-neutral
names repeated instead of pronouns). All answers are non-negative integers.

## Contamination control

Problems are identified by {key}; pools are drawn in a fixed order, evaluation pools first, and a key
already drawn is rejected. `manifest.json` -> `contamination_checks` lists the prompt and key overlap
of every pair of splits: {unintended} unintended overlaps. The intended ones: preference_test is derived
from test (evaluation only); sft_train_3k and rl_train_1500 concatenate earlier splits.
Multiplication has {mult_size} distinct problems; this release draws {mult_drawn}, leaving {mult_unused} unused.

## Preference pairs

`chosen` is the reference solution; `rejected` is one controlled corruption of it, propagated
through later steps: arithmetic_slip, operand_error, inconsistent_answer, missing_answer (25% each).
Every pair is graded during the build: chosen correct and well formatted, rejected incorrect with the
expected outcome type; a violation aborts the build.

## Limitations

Narrow domain (short integer arithmetic, one prompt template); test shares word-problem templates
with training (in-distribution generalisation only); rejected responses are synthetic near-misses,
not model samples; difficulty is uneven across categories by design.

## License

Apache-2.0.
"""


def _configs(manifest: dict[str, Any], files: dict[str, bytes] | None) -> list[ConfigInfo]:
    """One config per record kind (``eval`` the default), its splits in manifest order; column types from ``files``."""
    by_config: dict[str, list[SplitInfo]] = {}
    columns: dict[str, dict[str, Type]] = {}
    for rel, entry in manifest["files"].items():
        config, name = rel.split("/", 1)
        data = (files or {}).get(rel)
        by_config.setdefault(config, []).append(
            SplitInfo(name.removesuffix(".jsonl"), rel, entry["records"], len(data) if data is not None else 0)
        )
        cols = columns.setdefault(config, {})
        for line in (data or b"").splitlines():
            for key, value in json.loads(line).items():
                cols[key] = merge(cols.get(key, ("null",)), type_of(value))
    return [ConfigInfo(c, tuple(s), columns[c], default=c == "eval") for c, s in by_config.items()]


def _yaml_header(manifest: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
    """The front matter (``data.cards.render.front_matter``); ``dataset_info`` only when the files are given."""
    configs = _configs(manifest, files)
    meta = {
        "license": "apache-2.0",
        "language": ["en"],
        "pretty_name": "arith-v1",
        "tags": ["posttrainlab", "math", "arithmetic", "synthetic"],
        "task_categories": ["text-generation"],
        "size_categories": [size_category(max(sum(s.rows for s in c.splits) for c in configs))],
    }
    return front_matter(meta, configs, dataset_info=files is not None) + "\n"


def _provenance(manifest: dict[str, Any], files: dict[str, bytes] | None) -> str:
    """Provenance and Files: the build's own record (no time or host, so the card stays byte-identical)."""
    record = {
        "kind": "arith-v1",
        "policy": None,
        "judge": None,
        "grader": "arith (every preference pair graded during the build)",
        "generator": manifest["generator"],
        "seeds": {"build": manifest["seed"]},
        "command": ["posttrain", "data", "prepare", "--version", manifest["version"]],
    }
    entries = {
        rel: {"rows": e["records"], "bytes": len(files[rel]) if files and rel in files else None, "sha256": e["sha256"]}
        for rel, e in manifest["files"].items()
    }
    return (
        "\n"
        + provenance_section(record, {**PROVENANCE_LABELS, "policy": "policy (no model wrote any text)"})
        + "\n"
        + files_table(entries)
    )


def render_card(manifest: dict[str, Any], files: dict[str, bytes] | None = None) -> str:
    """The README.md of a build, from its manifest (and the bytes of its files, for the features and sizes)."""
    rows = "\n".join(
        f"| {name} | {info['config']} | {info['records']} | {info['since']} | {SPLITS_BY_NAME[name].use} |"
        for name, info in manifest["splits"].items()
    )
    mult = manifest["multiplication_space"]
    checks = manifest["contamination_checks"]
    return (
        _yaml_header(manifest, files)
        + _BODY.format(
            version=manifest["version"],
            generator=manifest["generator"],
            seed=manifest["seed"],
            rows=rows,
            key=checks["problem_key"],
            unintended=checks["unintended_overlaps"],
            mult_size=mult["size"],
            mult_drawn=mult["drawn"],
            mult_unused=mult["unused"],
        )
        + _provenance(manifest, files)
    )
