r"""SFT on TRL's SFTTrainer (``posttrain train sft``): prompt-completion chat rows, loss on the completion only.

    posttrain train sft --config configs/arith/sft.yaml
    posttrain train sft --config configs/arith/sft.yaml dataset.split=sft_train_3k dataset.limit=2000
    accelerate launch --config_file configs/accelerate/ddp_cpu.yaml -m posttrainlab \
        train sft --config configs/arith/sft.yaml   # 2 CPU processes; GPUs: ddp.yaml, fsdp.yaml, deepspeed_zero3.yaml

What is ours and not TRL's: the arith-v1 rows as chat prompt-completion pairs, and on CPU, length
grouping instead of packing (TRL's ``bfd`` packing and padding-free batches need FlashAttention to pay
off; on 2 CPU cores packing measured ~3.5x slower per token, see bench/bench_sft_throughput.py).
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.train.common import assistant, check_run, run_trainer, trainer_kwargs, user
from posttrainlab.train.recipes import SFTRecipe
from posttrainlab.train.trl_build import build_trl


def sft_rows(records: list[dict]) -> list[dict]:
    """arith-v1 sft records as TRL conversational prompt-completion rows."""
    return [{"prompt": user(r["prompt"]), "completion": assistant(r["response"])} for r in records]


def config_class():
    """``trl.SFTConfig``: the config class whose fields ``trainer_args`` may set (``posttrain train`` checks them)."""
    from trl import SFTConfig

    return SFTConfig


def build_trainer(recipe: SFTRecipe, records: list[dict] | None = None):
    from trl import SFTTrainer

    SFTConfig = config_class()

    own = {
        "max_length": recipe.max_length,
        "packing": recipe.packing,
        "padding_free": recipe.padding_free,
        "train_sampling_strategy": "group_by_length" if recipe.length_grouping else "random",
    }
    kwargs = trainer_kwargs(SFTConfig, recipe, own, fixed={"completion_only_loss": True})
    return build_trl(SFTTrainer, SFTConfig, recipe, kwargs, sft_rows, records, padding_side="right")


def train_sft(recipe: SFTRecipe, existing: str = "check") -> Path:
    """Check the run folder, then the data and the model, then train (``common.check_run``)."""
    start = check_run(recipe, existing)
    trainer, n = build_trainer(recipe)
    return run_trainer(trainer, recipe, "sft", n, start)
