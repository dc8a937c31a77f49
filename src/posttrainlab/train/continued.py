"""``sft-continued``, the more-training control: SFT continued from the SFT model for as many steps as a method took.

A method that keeps training from the SFT checkpoint (RFT, DPO, GRPO) is otherwise compared with an SFT that
stopped: part of its gain may be the extra steps alone. The control trains the SFT model further on SFT data only,
for exactly the optimizer steps of another finished run (``steps_from``: every round of an RFT run counted), so
"method − SFT" can be read beside "sft-continued − SFT".

``continued_from(rft, ...)`` is the quickstart's control of RFT: RFT's own fine-tune settings (``optim``, ``lora``,
lengths, batching) on its ``sft_data`` alone, so the two runs differ in their data and nothing else. From the command
line it is an SFT run: ``posttrain train sft model=runs/sft optim.max_steps=N`` with RFT's ``optim`` values.
"""

from __future__ import annotations

import json
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path

from posttrainlab.errors import BadInput
from posttrainlab.train.common import SUMMARY
from posttrainlab.train.recipes import RFTRecipe, SFTRecipe


@dataclass
class ContinuedRecipe(SFTRecipe):
    """An SFT recipe whose ``optim.max_steps`` is set, when it starts, to the steps a finished run took."""

    steps_from: str | None = None  # a finished training run (its train_summary.json); None: optim as set


def run_steps(folder: str | Path) -> int:
    """The optimizer steps a finished run took: its ``global_step``, plus each ``round-<r>/`` run's (RFT rounds).

    ``BadInput`` when ``folder`` holds no finished run.
    """
    folder = Path(folder)
    summaries = [folder / SUMMARY, *sorted(folder.glob(f"round-*/{SUMMARY}"))]
    if not summaries[0].is_file():
        raise BadInput(f"steps_from {folder}: no finished training run there (no {SUMMARY}); train it first")
    total = 0
    for path in summaries:
        try:
            total += int(json.loads(path.read_text(encoding="utf-8"))["global_step"])
        except (OSError, ValueError, KeyError, TypeError):
            raise BadInput(f"{path}: unreadable or without global_step") from None
    return total


def continued_from(rft: RFTRecipe, output_dir: str, steps_from: str | None) -> ContinuedRecipe:
    """RFT's control: its fine-tune settings on its ``sft_data`` alone, from its starting model (module docstring)."""
    return ContinuedRecipe(
        model=rft.model,
        output_dir=output_dir,
        dataset=deepcopy(rft.sft_data),
        optim=deepcopy(rft.optim),
        lora=deepcopy(rft.lora),
        max_length=rft.max_length,
        length_grouping=rft.length_grouping,
        packing=rft.packing,
        padding_free=rft.padding_free,
        trust_remote_code=rft.trust_remote_code,
        trainer_args=deepcopy(rft.trainer_args),
        steps_from=steps_from,
    )


def train_continued(recipe: ContinuedRecipe, existing: str = "check") -> Path:
    """``train.sft.train_sft`` with ``optim.max_steps`` = ``run_steps(steps_from)`` when ``steps_from`` is set."""
    from posttrainlab.train.sft import train_sft

    if recipe.steps_from is not None:
        recipe = deepcopy(recipe)
        recipe.optim.max_steps = run_steps(recipe.steps_from)
        print(f"sft-continued: {recipe.optim.max_steps} steps, as {recipe.steps_from} took", flush=True)
    return train_sft(recipe, existing)


__all__ = ["ContinuedRecipe", "continued_from", "run_steps", "train_continued"]
