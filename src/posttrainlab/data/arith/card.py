"""The dataset card (``README.md``) written beside an arith-v1 build.

Its YAML header declares one configuration per record kind, ``eval`` the default, so that
``datasets.load_dataset(DIR, "eval", split="test")`` loads a local build like the Hub copy.
The body restates the card's facts, with the numbers taken from the manifest of this build.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.data.arith.splits import SPLITS_BY_NAME

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


def _yaml_header(manifest: dict[str, Any]) -> str:
    lines = ["---", "license: apache-2.0", "language:", "- en", "pretty_name: arith-v1", "configs:"]
    by_config: dict[str, list[str]] = {}
    for rel in manifest["files"]:
        config, name = rel.split("/", 1)
        by_config.setdefault(config, []).append(name.removesuffix(".jsonl"))
    for config, splits in by_config.items():
        lines.append(f"- config_name: {config}")
        if config == "eval":
            lines.append("  default: true")
        lines.append("  data_files:")
        for split in splits:
            lines += [f"  - split: {split}", f"    path: {config}/{split}.jsonl"]
    lines.append("---")
    return "\n".join(lines) + "\n\n"


def render_card(manifest: dict[str, Any]) -> str:
    """The README.md of a build, from its manifest."""
    rows = "\n".join(
        f"| {name} | {info['config']} | {info['records']} | {info['since']} | {SPLITS_BY_NAME[name].use} |"
        for name, info in manifest["splits"].items()
    )
    mult = manifest["multiplication_space"]
    checks = manifest["contamination_checks"]
    return _yaml_header(manifest) + _BODY.format(
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
