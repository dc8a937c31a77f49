"""Typed recipes for ``posttrain train {sft,dpo,grpo}``: one dataclass per concern.

A YAML file under ``configs/arith/`` sets these fields and ``key=value`` arguments override them
(``posttrainlab.config.load_config``); a key that does not exist is a one-line error (exit 2).
Each field's help text lives here, once.

``trainer_args`` (every recipe, the PRM's too) passes TRL's own arguments through as they are: its keys are
fields of the trainer's config class (``trl.SFTConfig``, ``DPOConfig``, ``GRPOConfig``; the PRM's
``transformers.TrainingArguments``), e.g. ``{report_to: none}``, and they replace posttrainlab's defaults
(``report_to: [tensorboard]``...). A key the class lacks, or one a recipe field already sets (``learning_rate``:
``optim.learning_rate``), is a one-line error before any model loads (``train.common.trainer_kwargs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_DATA = "data/arith-v1"  # the one path where a missing arith-v1 is built unasked


@dataclass
class DatasetConfig:
    """Where the training records come from."""

    path: str = DEFAULT_DATA  # a local arith-v1 build or hf://owner/name (checksums verified on load)
    split: str = "sft_train"  # sft_train | sft_train_3k | preference_train | rl_train | rl_train_1500 ...
    limit: int | None = None  # keep the first N records (1k/2k/3k give nested subsets)
    # build arith-v1 when `path` is a local folder that does not exist: null = only at the default data/arith-v1
    # (anywhere else a missing folder is an error, so a typo is not a new dataset); true = at any path; false = never
    prepare_if_missing: bool | None = None


@dataclass
class OptimConfig:
    """Optimisation and checkpointing (passed on to transformers.TrainingArguments)."""

    epochs: float = 1.0
    max_steps: int = -1  # > 0 overrides epochs
    learning_rate: float = 1e-4
    batch_size: int = 16  # per device
    grad_accum: int = 1
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    logging_steps: int = 10
    save_steps: int = 100  # checkpoint every N steps; a killed run resumes from the last one
    save_total_limit: int = 2
    seed: int = 0
    # Recompute activations in the backward pass: less memory, ~25% more compute. TRL turns it on by
    # default; it pays for large models on GPUs, not for the tiny CPU model (bench/bench_sft_throughput.py).
    activation_checkpointing: bool = False


@dataclass
class LoraSwitch:
    """LoRA through peft: one switch for models too large to fine-tune whole."""

    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str = "all-linear"


@dataclass
class SFTRecipe:
    """Supervised fine-tuning on (prompt, response) pairs, loss on the completion only."""

    model: str = "base"  # an HF model folder or Hub id; "base" = the cached tiny base (posttrain model pretrain)
    output_dir: str = "runs/sft"
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    max_length: int = 512
    length_grouping: bool = True  # batch similar lengths together (less padding; the fastest choice on CPU)
    packing: bool = False  # TRL bfd packing (pays off on GPUs with FlashAttention; slower on CPU)
    padding_free: bool = False  # TRL padding-free batches (needs FlashAttention; GPU only)
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.SFTConfig fields, as they are


@dataclass
class PreferenceConfig:
    """Where DPO's (prompt, chosen, rejected) pairs come from (docs/policy-lab.md, "DPO pairs").

    ``synthetic``: the split's own rows (arith-v1's rejected is a synthetic near-miss: off-policy).
    ``policy``: ``k`` answers per prompt sampled from the recipe's ``model`` (the starting policy, so the pairs are
    on-policy for the first step), graded with the arith grader; the i-th distinct correct answer is paired with
    the i-th distinct incorrect one (``label.policy_pairs``). The other fields apply to ``policy`` only.
    """

    source: str = "synthetic"  # synthetic | policy
    k: int = 8  # samples per prompt (at least 2: a pair needs a correct and an incorrect answer)
    temperature: float = 1.0  # > 0: greedy would give k equal answers
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    pairs_per_prompt: int = 1  # at most this many pairs per prompt (fewer when it has fewer distinct answers)
    # no correct sample: reference = the split's `chosen` (the reference solution) is the chosen answer;
    # none = the prompt gives no pair
    chosen_fallback: str = "reference"
    batch_size: int = 32  # prompts per generate call


@dataclass
class DPORecipe:
    """Direct preference optimisation on (prompt, chosen, rejected) with a frozen reference model."""

    model: str = "runs/sft"  # the policy to start from (and the reference, unless ref_model is set)
    ref_model: str | None = None
    output_dir: str = "runs/dpo"
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(split="preference_train"))
    preference: PreferenceConfig = field(default_factory=PreferenceConfig)  # synthetic pairs or sampled ones
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(learning_rate=5e-5, batch_size=8))
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    beta: float = 0.1
    loss_type: str = "sigmoid"
    max_length: int = 512
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.DPOConfig fields, as they are


@dataclass
class RewardWeights:
    """GRPO reward = correctness * weight + format * weight (the arith grader decides both)."""

    correctness: float = 1.0  # 1 when the final answer is right
    format: float = 0.2  # 1 when the answer line has the required form, right or wrong


@dataclass
class GRPORecipe:
    """Group relative policy optimisation with rewards from the arith grader."""

    model: str = "runs/sft"
    output_dir: str = "runs/grpo"
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(split="rl_train"))
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(learning_rate=1e-5, batch_size=16))
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    rewards: RewardWeights = field(default_factory=RewardWeights)
    num_generations: int = 8  # group size G; batch_size must be a multiple of it
    max_completion_length: int = 64
    temperature: float = 1.0
    beta: float = 0.04  # KL coefficient against the reference (the starting policy)
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.GRPOConfig fields, as they are


RECIPES = {"sft": SFTRecipe, "dpo": DPORecipe, "grpo": GRPORecipe}


def seeded(recipe, k: int):
    """A copy of ``recipe`` (any recipe, the PRM's too) for seed ``k`` of a multi-seed run (``train --seeds``,
    quickstart ``seeds``): ``k`` = 0 is the recipe itself; ``k`` >= 1 trains into ``<output_dir>-s<k>`` with
    ``optim.seed + k`` (and ``preference.seed + k``: on-policy DPO pairs are sampled again).
    """
    from copy import deepcopy

    recipe = deepcopy(recipe)
    if k:
        recipe.output_dir = f"{recipe.output_dir}-s{k}"
        recipe.optim.seed += k
        if hasattr(recipe, "preference"):
            recipe.preference.seed += k
    return recipe
