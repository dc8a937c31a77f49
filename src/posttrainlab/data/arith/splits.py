"""The arith-v1 release table: versions, configs and splits, as the card lists them (no generation here).

Its own module so that the dataset card (``card.py``) and the generator (``generator.py``) both read it without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrainlab.errors import BadInput

DATASET = "arith-v1"
GENERATOR = "arith-v1.3"
SEED = 20251018
VERSIONS = ("1.0.0", "1.1.0", "1.2.0", "1.3.0")
LATEST = VERSIONS[-1]
CONFIGS = ("eval", "sft", "preference", "prompt")
KEY_DESCRIPTION = "(category, template, operands)"


@dataclass(frozen=True)
class Split:
    """One split of the card's table. ``sources`` empty: a pool drawn fresh; else derived from them."""

    name: str
    config: str
    size: int
    since: str
    sources: tuple[str, ...] = ()
    use: str = ""


# In pool-drawing order (the card: evaluation pools first, later releases last).
SPLITS: tuple[Split, ...] = (
    Split("test", "eval", 500, "1.0.0", use="all reported results"),
    Split("validation", "eval", 100, "1.0.0", use="development checks"),
    Split("rl_train", "prompt", 500, "1.0.0", use="GRPO (reward uses answer)"),
    Split("preference_train", "preference", 500, "1.0.0", use="DPO"),
    Split("sft_train", "sft", 1000, "1.0.0", use="SFT"),
    Split("preference_test", "preference", 500, "1.0.0", ("test",), "preference accuracy (derived from test)"),
    Split("dev", "eval", 500, "1.1.0", use="hyperparameter selection"),
    Split("sft_extra", "sft", 2000, "1.2.0", use="additional SFT problems"),
    Split("sft_train_3k", "sft", 3000, "1.2.0", ("sft_train", "sft_extra"), "sft_train then sft_extra (data scaling)"),
    Split("rl_extra", "prompt", 1000, "1.3.0", use="additional RL prompts"),
    Split(
        "rl_train_1500", "prompt", 1500, "1.3.0", ("rl_train", "rl_extra"), "rl_train then rl_extra (long GRPO runs)"
    ),
)
SPLITS_BY_NAME = {s.name: s for s in SPLITS}

#: Overlaps the card makes on purpose; every other pair of splits must share nothing.
INTENDED_OVERLAPS = {
    ("test", "preference_test"): "preference_test is derived from test problems on purpose (evaluation only)",
    ("sft_train", "sft_train_3k"): "sft_train_3k is sft_train followed by sft_extra",
    ("sft_extra", "sft_train_3k"): "sft_train_3k is sft_train followed by sft_extra",
    ("rl_train", "rl_train_1500"): "rl_train_1500 is rl_train followed by rl_extra",
    ("rl_extra", "rl_train_1500"): "rl_train_1500 is rl_train followed by rl_extra",
}


def check_split_names(field: str, names) -> None:
    """``BadInput`` naming ``field`` when one of ``names`` is no arith-v1 split: a setting checked before any stage
    runs, not when its stage opens the split (issue #42: ``solutions.train_split=nope`` failed after earlier stages).

    >>> try:
    ...     check_split_names("train_prompts", ["rl_train", "nope"])
    ... except BadInput as e:
    ...     print(e)
    train_prompts: 'nope' is no arith-v1 split (prompt splits: rl_train, rl_extra, rl_train_1500)
    """
    for name in names:
        if name not in SPLITS_BY_NAME:
            prompts = ", ".join(s.name for s in SPLITS if s.config == "prompt")
            raise BadInput(f"{field}: {name!r} is no arith-v1 split (prompt splits: {prompts})")


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def check_version(version: str) -> str:
    if version not in VERSIONS:
        raise BadInput(f"unknown arith-v1 version {version!r}: choose one of {', '.join(VERSIONS)}")
    return version


def splits_of(version: str) -> list[Split]:
    """The splits a release contains, in pool-drawing order."""
    v = _vtuple(check_version(version))
    return [s for s in SPLITS if _vtuple(s.since) <= v]


def rel_path(split: Split) -> str:
    return f"{split.config}/{split.name}.jsonl"
