"""GRPO on TRL's GRPOTrainer (``posttrain train grpo``), rewarded by the arith grader.

    posttrain train grpo --config configs/arith/grpo.yaml model=runs/sft

Rewards are correctness and format as two weighted terms (``rewards.correctness``, ``rewards.format``).
TRL logs ``reward``, ``kl`` (when ``beta`` > 0) and ``frac_reward_zero_std``: the share of groups whose
rewards are all equal, which carry no learning signal (GRPO's advantage is reward minus group mean).

Every setting the loss depends on is a recipe field passed to ``trl.GRPOConfig`` as written (``grpo_kwargs``):
``loss_type``, ``scale_rewards``, ``num_iterations``, ``steps_per_generation``, ``epsilon``,
``mask_truncated_completions``, ``beta``, ``temperature``, the reward weights; the few TRL settings no field names are
pinned in ``PINNED``. ``prompt_filter.enabled`` samples ``prompt_filter.k`` answers per prompt from the starting
policy before training and keeps the prompts it sometimes but not always solves (``filter_prompts``; written to
``OUT/grpo_prompts.jsonl`` and reused on resume): a group whose answers are all wrong or all right has no advantage.

``prm_reward.path`` adds a trained PRM as a reward (``train.prm_reward``): ``mode: sequence`` as a third weighted
term, ``mode: step`` as step-level advantages on ``ProcessGRPOTrainer`` (``train.grpo_process.trainer_class``).
Every run writes ``OUT/reward_log.jsonl`` (``train.reward_log``): the PRM's mean score (when used) beside the
samples' exact accuracy and step errors at each logging step, where reward hacking shows (``report.hacking``).
``probe.split`` also samples that held-out split every ``probe.every`` steps through TRL's evaluation loop
(``eval_strategy: steps``, ``num_generations_eval``; ``PROBE_BATCH`` prompts a batch) into ``OUT/reward_probe.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.train.common import (
    Start,
    check_model,
    check_run,
    checked_records,
    run_rows,
    run_trainer,
    trainer_kwargs,
    user,
)
from posttrainlab.train.recipes import GRPORecipe
from posttrainlab.train.rewards import correctness_reward, format_reward
from posttrainlab.train.trl_build import build_trl


def grpo_rows(records: list[dict]) -> list[dict]:
    """arith-v1 prompt records as TRL conversational prompts, with the answer for the reward."""
    return [{"prompt": user(r["prompt"]), "answer": r["answer"], "category": r["category"]} for r in records]


def config_class():
    """``trl.GRPOConfig``: the config class whose fields ``trainer_args`` may set (``posttrain train`` checks them)."""
    from trl import GRPOConfig

    return GRPOConfig


#: TRL settings the loss depends on that no recipe field names: written here so a TRL upgrade cannot change them unseen
#: (TRL 1.16's values; ``trainer_args`` may still replace one)
PINNED = {
    "importance_sampling_level": "token",  # the ratio per token, not per sequence (GSPO)
    "epsilon_high": None,  # the clip is symmetric: [1 - epsilon, 1 + epsilon]
    "multi_objective_aggregation": "sum_then_normalize",  # weighted sum of the rewards, then the advantage
    "use_bias_correction_kl": True,  # the KL term times the ratio (only with beta > 0)
    "top_entropy_quantile": 1.0,  # every token in the loss, not only high-entropy ones
    "top_p": 1.0,
    "top_k": 0,
    "shuffle_dataset": True,
}


#: prompts per evaluation batch of the probe (its batch is this times ``probe.samples`` completions)
PROBE_BATCH = 16


def probe_kwargs(recipe: GRPORecipe) -> dict:
    """``trl.GRPOConfig``'s evaluation settings for ``recipe.probe`` (none while it is off).

    >>> from posttrainlab.train.reward_log import ProbeConfig
    >>> kwargs = probe_kwargs(GRPORecipe(probe=ProbeConfig(split="validation", every=10, samples=4)))
    >>> kwargs["eval_steps"], kwargs["num_generations_eval"], kwargs["per_device_eval_batch_size"]
    (10, 4, 64)
    """
    probe = recipe.probe
    if probe.split is None:
        return {}
    return {"eval_strategy": "steps", "eval_steps": probe.every, "num_generations_eval": probe.samples,
            "per_device_eval_batch_size": PROBE_BATCH * probe.samples}  # fmt: skip


def probe_dataset(recipe: GRPORecipe):
    """The probe's prompts as a ``datasets.Dataset`` of ``grpo_rows`` (``None`` while it is off)."""
    if recipe.probe.split is None:
        return None
    from dataclasses import replace

    from datasets import Dataset

    from posttrainlab.train.common import load_records

    cfg = replace(recipe.dataset, split=recipe.probe.split, limit=recipe.probe.limit)
    return Dataset.from_list(grpo_rows(load_records(cfg)))


def grpo_kwargs(recipe: GRPORecipe) -> dict:
    """``trl.GRPOConfig``'s keyword arguments for ``recipe`` (module docstring); a bad ``trainer_args`` key is refused
    here, and so is a batch that does not hold whole groups."""
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
        "reward_weights": [recipe.rewards.correctness, recipe.rewards.format, *prm_weight(recipe)],
        "loss_type": recipe.loss_type,
        "scale_rewards": recipe.scale_rewards,
        "num_iterations": recipe.num_iterations,
        "steps_per_generation": recipe.steps_per_generation or recipe.optim.grad_accum,
        "epsilon": recipe.epsilon,
        "mask_truncated_completions": recipe.mask_truncated_completions,
        **probe_kwargs(recipe),
    }
    return trainer_kwargs(config_class(), recipe, own, fixed=PINNED)


def prm_weight(recipe: GRPORecipe) -> list[float]:
    """The PRM reward's weight in TRL's sum, when there is one: ``prm_reward.weight`` as a sequence reward, 0 in step
    mode (its advantages are added per token by ``ProcessGRPOTrainer``; the sum only logs its mean)."""
    cfg = recipe.prm_reward
    if not cfg.path:
        return []
    return [cfg.weight if cfg.mode == "sequence" else 0.0]


def build_trainer(recipe: GRPORecipe, records: list[dict] | None = None, scorer=None):
    """``(trainer, records)``; ``scorer`` (with ``score_batch``) replaces the PRM loaded from ``prm_reward.path``."""
    from trl import GRPOTrainer

    from posttrainlab.train.reward_log import reward_log_callback

    kwargs = grpo_kwargs(recipe)
    rewards, trainer_cls, extra = [correctness_reward, format_reward], GRPOTrainer, {}
    cfg = recipe.prm_reward
    if cfg.path:
        from posttrainlab.train.prm_reward import PRMReward

        check_model(recipe.model)  # the policy first: a missing policy is named before the PRM loads
        prm = PRMReward(cfg, scorer)
        rewards.append(prm)
        if cfg.mode == "step":
            from posttrainlab.train.grpo_process import trainer_class

            trainer_cls, extra = trainer_class(), {"process_reward": prm, "process_weight": cfg.weight,
                                                   "credit": cfg.credit}  # fmt: skip
    probe = probe_dataset(recipe)
    if probe is not None:
        extra["eval_dataset"] = probe
    trainer, n = build_trl(trainer_cls, config_class(), recipe, kwargs, grpo_rows, records, padding_side="left",
                           reward_funcs=rewards, **extra)  # fmt: skip
    trainer.add_callback(reward_log_callback(recipe.output_dir))
    return trainer, n


PROMPTS = "grpo_prompts"  # OUT/grpo_prompts.jsonl (the prompts kept) and OUT/grpo_prompts.json (settings, counts)


def filter_prompts(records: list[dict], graded: list[list[dict]]) -> tuple[list[dict], dict]:
    """``(kept records, counts)``: the records with ``0 < correct < k`` of their graded samples, in order.

    >>> rs = [{"id": i} for i in "abc"]
    >>> kept, counts = filter_prompts(rs, [[{"correct": c, "outcome": "x"} for c in cs] for cs in
    ...                                    ([True, False], [False, False], [True, True])])
    >>> [r["id"] for r in kept], counts["all_wrong"], counts["all_right"], counts["pass_rates"]
    (['a'], 1, 1, [0.5, 0.0, 1.0])
    """
    from posttrainlab.train.policy_samples import outcome_counts

    solved = [sum(s["correct"] for s in samples) for samples in graded]
    kept = [r for r, c, samples in zip(records, solved, graded, strict=True) if 0 < c < len(samples)]
    counts = {
        "prompts": len(records),
        "kept": len(kept),
        "all_wrong": sum(c == 0 for c in solved),
        "all_right": sum(c == len(s) for c, s in zip(solved, graded, strict=True)),
        "sample_outcomes": outcome_counts(graded),
        "pass_rates": [c / len(s) if s else 0.0 for c, s in zip(solved, graded, strict=True)],
    }
    return kept, counts


def filtered_records(recipe: GRPORecipe, start: Start, backend=None) -> list[dict]:
    """``prompt_filter.enabled``: the split's prompts the starting policy sometimes solves (sampled or reused)."""
    from posttrainlab.errors import BadInput
    from posttrainlab.train.policy_samples import Kept

    grpo_kwargs(recipe)
    records = checked_records(recipe)
    kept, counts = run_rows(recipe, start, recipe.prompt_filter, Kept(PROMPTS, filter_prompts), records, backend)
    if len(kept) * recipe.num_generations < recipe.optim.batch_size:
        raise BadInput(
            f"prompt_filter: {len(kept)} of {counts['prompts']} prompts kept ({counts['all_wrong']} all wrong, "
            f"{counts['all_right']} all right in {recipe.prompt_filter.k} samples): too few for one batch; "
            "use more prompts (dataset.split, dataset.limit) or a larger prompt_filter.k"
        )
    print(f"grpo: {len(kept)} of {counts['prompts']} prompts kept ({counts['all_wrong']} all wrong, "
          f"{counts['all_right']} all right in {recipe.prompt_filter.k} samples)", flush=True)  # fmt: skip
    return kept


def train_grpo(recipe: GRPORecipe, existing: str = "check", backend=None, scorer=None) -> Path:
    """Check the run folder, then the data and the model, then train (``common.check_run``); with
    ``prompt_filter.enabled`` the prompts are filtered first (``backend``, a ``SamplingBackend``, replaces the model
    sampled; ``scorer`` the PRM of ``prm_reward.path``)."""
    start = check_run(recipe, existing)
    records = filtered_records(recipe, start, backend) if recipe.prompt_filter.enabled else None
    trainer, n = build_trainer(recipe, records, scorer)
    return run_trainer(trainer, recipe, "grpo", n, start)
