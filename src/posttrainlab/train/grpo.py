"""GRPO on TRL's GRPOTrainer (``posttrain train grpo``), rewarded by the arith grader.

    posttrain train grpo --config configs/arith/grpo.yaml model=runs/sft

Rewards are correctness and format as two weighted terms (``rewards.correctness``, ``rewards.format``).
TRL logs ``reward``, ``kl`` (when ``beta`` > 0) and ``frac_reward_zero_std``: the share of groups whose
rewards are all equal, which carry no learning signal (GRPO's advantage is reward minus group mean).
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.train.common import (
    check_model,
    check_run,
    load_policy,
    load_records,
    run_trainer,
    trainer_kwargs,
    trl_trainer,
    user,
)
from posttrainlab.train.recipes import GRPORecipe
from posttrainlab.train.rewards import correctness_reward, format_reward


def grpo_rows(records: list[dict]) -> list[dict]:
    """arith-v1 prompt records as TRL conversational prompts, with the answer for the reward."""
    return [{"prompt": user(r["prompt"]), "answer": r["answer"], "category": r["category"]} for r in records]


def build_trainer(recipe: GRPORecipe, records: list[dict] | None = None):
    from trl import GRPOConfig, GRPOTrainer

    from posttrainlab.errors import BadInput

    if recipe.optim.batch_size % recipe.num_generations:
        raise BadInput(
            f"optim.batch_size={recipe.optim.batch_size} must be a multiple of num_generations={recipe.num_generations}"
        )
    own = {
        "num_generations": recipe.num_generations,
        "max_completion_length": recipe.max_completion_length,
        "temperature": recipe.temperature,
        "beta": recipe.beta,
        "reward_weights": [recipe.rewards.correctness, recipe.rewards.format],
    }
    kwargs = trainer_kwargs(GRPOConfig, recipe, own)
    check_model(recipe.model)
    records = load_records(recipe.dataset) if records is None else records
    model, tokenizer = load_policy(recipe, padding_side="left")
    args = GRPOConfig(**kwargs)
    rewards = [correctness_reward, format_reward]
    trainer = trl_trainer(GRPOTrainer, recipe, model, tokenizer, args, grpo_rows(records), reward_funcs=rewards)
    return trainer, len(records)


def train_grpo(recipe: GRPORecipe, existing: str = "check") -> Path:
    """Check the run folder, then the data and the model, then train (``common.check_run``)."""
    start = check_run(recipe, existing)
    trainer, n = build_trainer(recipe)
    return run_trainer(trainer, recipe, "grpo", n, start)
