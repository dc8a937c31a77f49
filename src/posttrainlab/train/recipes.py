"""Typed recipes for ``posttrain train {sft,dpo,grpo}``: one dataclass per concern.

A YAML file under ``configs/arith/`` sets these fields and ``key=value`` arguments override them
(``posttrainlab.config.load_config``); a key that does not exist is a one-line error (exit 2).
Each field's help text lives here, once.

``trainer_args`` (every recipe, the PRM's too) passes TRL's own arguments through as they are: its keys are
fields of the trainer's config class (``trl.SFTConfig``, ``DPOConfig``, ``GRPOConfig``; the PRM's
``transformers.TrainingArguments``), e.g. ``{report_to: none}``, and they replace posttrainlab's defaults
(``report_to: [tensorboard]``...). A key the class lacks, or one a recipe field already sets (``learning_rate``:
``optim.learning_rate``), is a one-line error before any model loads (``train.common.trainer_kwargs``).

Each config's ``check()`` refuses a value no run can train with (``optim.epochs=-3``, ``optim.batch_size=0``,
``preference.source=bogus``): ``config.load_config`` runs them when the recipe is loaded, ``--print-config``
included, and ``train.common.check_run`` again before any run (a recipe built in Python). Without it ``epochs=-3``
trained 0 steps, exited 0 and saved the untouched start model as the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from posttrainlab.errors import BadInput, finite
from posttrainlab.train.prm_reward import PRMRewardConfig
from posttrainlab.train.recipe_parts import (  # noqa: F401 (re-exported: the recipes' parts)
    DEFAULT_DATA,
    DatasetConfig,
    LoraSwitch,
    OptimConfig,
    at_least,
    check_run_settings,
)
from posttrainlab.train.reward_log import ProbeConfig


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

    def check(self) -> None:
        check_run_settings(self)


@dataclass
class PreferenceConfig:
    """Where DPO's (prompt, chosen, rejected) pairs come from (docs/policy-lab.md, "DPO pairs").

    ``synthetic``: the split's own rows (arith-v1's rejected is a synthetic near-miss: off-policy).
    ``policy``: ``k`` answers per prompt sampled from the recipe's ``model`` (the starting policy, so the pairs are
    on-policy for the first step), graded with the arith grader; the i-th distinct correct answer is paired with
    the i-th distinct incorrect one (``label.policy_pairs``). ``step``: sampled and graded the same way, each wrong
    line paired with the reference's line after the sample's own right lines (Step-DPO, ``label.step_pairs``). The
    other fields apply to ``policy`` and ``step`` (``chosen_fallback`` to ``policy`` only).
    """

    source: str = "synthetic"  # synthetic | policy | step
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
    # RPO (Pang et al. 2024, "Iterative Reasoning Preference Optimization"): the chosen answer's mean token NLL
    # added to the DPO loss with this weight (TRL's loss_type [loss_type, "sft"]); 0: DPO alone
    sft_weight: float = 0.0
    max_length: int = 512
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.DPOConfig fields, as they are

    def check(self) -> None:
        """``check_run_settings``, ``beta > 0``, ``sft_weight >= 0`` and the pair settings
        (``label.policy_pairs.check_preference``)."""
        from posttrainlab.label.policy_pairs import check_preference

        check_run_settings(self)
        finite("beta", self.beta)
        finite("sft_weight", self.sft_weight)
        if not self.beta > 0:
            raise BadInput(f"beta={self.beta}: must be greater than 0")
        if not self.sft_weight >= 0:
            raise BadInput(f"sft_weight={self.sft_weight}: must be 0 (DPO alone) or more (RPO: DPO + NLL of chosen)")
        check_preference(self.preference)


@dataclass
class SamplingSettings:
    """``k`` answers per prompt sampled from a recipe's starting ``model`` and graded before training
    (``train.policy_samples``): RFT's samples (``rejection``), GRPO's prompt filter (``prompt_filter``)."""

    k: int = 8  # samples per prompt
    temperature: float = 1.0  # > 0
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    batch_size: int = 32  # prompts per generate call

    def check(self) -> None:
        at_least("k", self.k, 1)
        at_least("batch_size", self.batch_size, 1)
        at_least("max_new_tokens", self.max_new_tokens, 1)
        finite("temperature", self.temperature)
        if not self.temperature > 0:
            raise BadInput(f"temperature={self.temperature}: must be greater than 0 (k samples, not k equal answers)")
        if not 0 < self.top_p <= 1:
            raise BadInput(f"top_p={self.top_p}: must be in (0, 1]")


@dataclass
class RewardWeights:
    """GRPO reward = correctness * weight + format * weight (the arith grader decides both)."""

    correctness: float = 1.0  # 1 when the final answer is right
    format: float = 0.2  # 1 when the answer line has the required form, right or wrong (0: not in the reward)

    def check(self) -> None:
        """``BadInput`` for a weight that is NaN, infinite or below 0 (both at 0 with no PRM reward: ``GRPORecipe``)."""
        for name in ("correctness", "format"):
            finite(name, getattr(self, name))
            if getattr(self, name) < 0:
                raise BadInput(f"{name}={getattr(self, name)}: must be >= 0")


@dataclass
class PromptFilter(SamplingSettings):
    """GRPO's prompts, with ``enabled``: only those the starting policy sometimes but not always solves (``0 <
    correct < k`` of ``k`` samples); an all-wrong or all-right group has equal rewards and no advantage."""

    enabled: bool = False

    def check(self) -> None:
        super().check()
        at_least("k", self.k, 2)


#: TRL 1.16's GRPO loss types and reward scalings (``trl.GRPOConfig``'s ``loss_type``, ``scale_rewards``)
GRPO_LOSSES = ("dapo", "dr_grpo", "grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")
REWARD_SCALINGS = ("group", "batch", "none")


@dataclass
class GRPORecipe:
    """Group relative policy optimisation with rewards from the arith grader.

    Every TRL setting the loss depends on is a field here, passed to ``trl.GRPOConfig`` as written (none is left to
    TRL's defaults, which move between versions); the defaults are TRL 1.16's, the recipe the README measured."""

    model: str = "runs/sft"
    output_dir: str = "runs/grpo"
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(split="rl_train"))
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(learning_rate=1e-5, batch_size=16))
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    rewards: RewardWeights = field(default_factory=RewardWeights)
    num_generations: int = 8  # group size G; batch_size must be a multiple of it
    max_completion_length: int = 64
    temperature: float = 1.0
    beta: float = 0.04  # KL coefficient against the reference (the starting policy); 0: no reference model
    # dapo: token losses summed over the batch / its token count; dr_grpo (Dr. GRPO): / (completions x
    # max_completion_length), a constant; grpo: each completion's mean, then the batch's (length bias)
    loss_type: str = "dapo"
    scale_rewards: str = "group"  # advantage = (r - group mean) / group std (group) | / batch std | none (Dr. GRPO)
    num_iterations: int = 1  # updates per generation batch (mu): > 1 reuses the samples, so the clip acts
    steps_per_generation: int | None = None  # micro-steps one generation batch is split into (None: optim.grad_accum)
    epsilon: float = 0.2  # the probability ratio is clipped to [1 - epsilon, 1 + epsilon]
    mask_truncated_completions: bool = False  # completions cut at max_completion_length leave the loss
    prompt_filter: PromptFilter = field(default_factory=PromptFilter)  # keep prompts the policy sometimes solves
    prm_reward: PRMRewardConfig = field(default_factory=PRMRewardConfig)  # a PRM as a reward (off: path null)
    probe: ProbeConfig = field(default_factory=ProbeConfig)  # a held-out split sampled every N steps (train.reward_log)
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.GRPOConfig fields, as they are

    def check(self) -> None:
        """``check_run_settings``; a group of at least 2 (one answer has no relative advantage), ``temperature > 0``,
        a known loss and scaling, at least one update per generation batch; step-level PRM advantages need a loss
        that reads an advantage per token (not ``vespo``, which weighs whole sequences by the advantage's sign)."""
        check_run_settings(self)
        at_least("num_generations", self.num_generations, 2)
        at_least("max_completion_length", self.max_completion_length, 1)
        at_least("num_iterations", self.num_iterations, 1)
        at_least("steps_per_generation", self.steps_per_generation, 1)
        for name in ("temperature", "beta", "epsilon"):
            finite(name, getattr(self, name))
        if not self.temperature > 0:
            raise BadInput(f"temperature={self.temperature}: must be greater than 0 (GRPO samples a group)")
        if self.beta < 0:
            raise BadInput(f"beta={self.beta}: must be >= 0")
        if not self.epsilon > 0:
            raise BadInput(f"epsilon={self.epsilon}: must be greater than 0")
        for name, known in (("loss_type", GRPO_LOSSES), ("scale_rewards", REWARD_SCALINGS)):
            if getattr(self, name) not in known:
                raise BadInput(f"{name}={getattr(self, name)!r}: choose one of {', '.join(known)}")
        prm = bool(self.prm_reward.path) and self.prm_reward.weight > 0
        if not (self.rewards.correctness + self.rewards.format > 0 or prm):
            raise BadInput("rewards.correctness=0 and rewards.format=0: no reward to learn from; set a weight above 0 "
                           "(or a PRM reward: prm_reward.path)")  # fmt: skip
        if self.prm_reward.path and self.prm_reward.mode == "step" and self.loss_type == "vespo":
            raise BadInput("prm_reward.mode=step: loss_type=vespo weighs whole sequences; choose another loss_type")


#: RFT's sample filters: the final answer right, or every step exactly right too (``data.arith.steps``)
RFT_FILTERS = ("answer", "process")


@dataclass
class RejectionConfig(SamplingSettings):
    """RFT's samples: ``k`` answers per prompt from the policy, kept when ``filter`` accepts them (``train.rft``)."""

    filter: str = "answer"  # answer: the final answer is right | process: and every step is exactly right
    per_prompt: int | None = None  # keep at most N distinct accepted answers per prompt (None: every distinct one)

    def check(self) -> None:
        super().check()
        at_least("per_prompt", self.per_prompt, 1)
        if self.filter not in RFT_FILTERS:
            raise BadInput(f"filter={self.filter!r}: choose one of {', '.join(RFT_FILTERS)}")


@dataclass
class RFTRecipe:
    """Rejection-sampling fine-tuning (expert iteration): sample the policy on RL prompts, keep the right answers,
    continue SFT on them with the original SFT data mixed back in; ``rounds`` > 1 repeats it from each new model."""

    model: str = "runs/sft"  # the policy sampled and fine-tuned
    output_dir: str = "runs/rft"
    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(split="rl_train"))  # the prompts sampled
    sft_data: DatasetConfig = field(default_factory=lambda: DatasetConfig(split="sft_train_3k"))  # mixed back in
    sft_ratio: float = 1.0  # SFT rows per accepted sample, drawn at random (optim.seed) from sft_data; 0: none
    max_pass_rate: float = 1.0  # keep prompts whose share of right samples is at most this (1: all; see train.rft)
    rejection: RejectionConfig = field(default_factory=RejectionConfig)
    rounds: int = 1  # round r > 1 samples and trains the model of round r - 1 (output_dir/round-<r>)
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(learning_rate=1e-4, batch_size=16))
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    max_length: int = 512
    length_grouping: bool = True  # as SFTRecipe's
    packing: bool = False
    padding_free: bool = False
    trust_remote_code: bool = False
    trainer_args: dict[str, Any] = field(default_factory=dict)  # trl.SFTConfig fields, as they are

    def check(self) -> None:
        check_run_settings(self)
        at_least("rounds", self.rounds, 1)
        finite("sft_ratio", self.sft_ratio)
        if not self.sft_ratio >= 0:
            raise BadInput(f"sft_ratio={self.sft_ratio}: must be >= 0")
        if not 0 < self.max_pass_rate <= 1:
            raise BadInput(f"max_pass_rate={self.max_pass_rate}: must be in (0, 1] (1 keeps every prompt)")


RECIPES = {"sft": SFTRecipe, "dpo": DPORecipe, "grpo": GRPORecipe, "rft": RFTRecipe}


def seeded(recipe, k: int):
    """A copy of ``recipe`` (any recipe, the PRM's too) for seed ``k`` of a multi-seed run (``train --seeds``,
    quickstart ``seeds``): ``k`` = 0 is the recipe itself; ``k`` >= 1 trains into ``<output_dir>-s<k>`` with
    ``optim.seed + k`` (and the seed of what is sampled before training: ``preference``, ``rejection``,
    ``prompt_filter``; on-policy DPO pairs, RFT samples and GRPO's prompt filter are sampled again)."""
    from copy import deepcopy

    recipe = deepcopy(recipe)
    if k:
        recipe.output_dir = f"{recipe.output_dir}-s{k}"
        recipe.optim.seed += k
        for sampled in ("preference", "rejection", "prompt_filter"):
            if hasattr(recipe, sampled):
                getattr(recipe, sampled).seed += k
    return recipe
