"""DPO on TRL's DPOTrainer (``posttrain train dpo``), with a frozen reference model.

    posttrain train dpo --config configs/arith/dpo.yaml model=runs/sft

The reference is a frozen copy of the starting policy unless ``ref_model`` names another checkpoint.
Ours: only the arith-v1 preference rows as chat prompt/chosen/rejected.
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.train.common import (
    assistant,
    check_model,
    check_run,
    load_policy,
    load_records,
    resolve_model,
    run_trainer,
    trainer_kwargs,
    trl_trainer,
    user,
)
from posttrainlab.train.recipes import DPORecipe


def dpo_rows(records: list[dict]) -> list[dict]:
    """arith-v1 preference records as TRL conversational preference rows."""
    return [
        {"prompt": user(r["prompt"]), "chosen": assistant(r["chosen"]), "rejected": assistant(r["rejected"])}
        for r in records
    ]


def build_trainer(recipe: DPORecipe, records: list[dict] | None = None):
    from trl import DPOConfig, DPOTrainer

    from posttrainlab.models.loading import load_causal_lm

    own = {"beta": recipe.beta, "loss_type": [recipe.loss_type], "max_length": recipe.max_length}
    kwargs = trainer_kwargs(DPOConfig, recipe, own)
    check_model(recipe.model)
    check_model(recipe.ref_model)
    records = load_records(recipe.dataset) if records is None else records
    model, tokenizer = load_policy(recipe, padding_side="right")
    ref = None
    if recipe.ref_model:
        ref, _ = load_causal_lm(resolve_model(recipe.ref_model), trust_remote_code=recipe.trust_remote_code)
    args = DPOConfig(**kwargs)
    trainer = trl_trainer(DPOTrainer, recipe, model, tokenizer, args, dpo_rows(records), ref_model=ref)
    return trainer, len(records)


def train_dpo(recipe: DPORecipe, existing: str = "check") -> Path:
    """Check the run folder, then the data and the models, then train (``common.check_run``)."""
    start = check_run(recipe, existing)
    trainer, n = build_trainer(recipe)
    return run_trainer(trainer, recipe, "dpo", n, start)
