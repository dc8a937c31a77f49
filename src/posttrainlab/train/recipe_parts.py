"""The parts every recipe shares (``train.recipes``' SFT, DPO, GRPO and RFT recipes, and the PRM's,
``train.prm_recipe``): where the records come from (``DatasetConfig``), the optimisation and its number format
(``OptimConfig``), the LoRA switch, and the checks they share. ``train.recipes`` re-exports each name.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrainlab.errors import BadInput, finite

#: ``OptimConfig.bf16``'s values (``train.launch.use_bf16`` says what each does on this machine)
BF16_CHOICES = ("gpu", "auto", "never")

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

    def check(self) -> None:
        """``BadInput`` naming the field for an empty path or split, or a limit below 1."""
        for name in ("path", "split"):
            if not getattr(self, name):
                raise BadInput(f"{name}: empty; name the data (see --print-config)")
        at_least("limit", self.limit, 1)


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
    # bf16 autocast (the weights stay fp32): "gpu" on a CUDA GPU that has bf16, else fp32 (transformers' usual
    # choice); "auto" also on a CPU with native bf16 (AVX512_BF16 or AMX: SFT 1.45x on the tiny model,
    # bench/bench_precision.py; elsewhere bf16 is emulated, slower); "never": fp32 everywhere (train.launch.use_bf16)
    bf16: str = "gpu"

    def check(self) -> None:
        """``BadInput`` naming the field for a value no run can train with (module docstring); a rate or weight
        that is NaN or infinite first (``optim.learning_rate=inf`` trained NaN weights and exited 0, issue #42)."""
        for name in ("epochs", "learning_rate", "warmup_ratio", "weight_decay", "max_grad_norm"):
            finite(name, getattr(self, name))
        if self.max_steps == 0 or self.max_steps < -1:
            raise BadInput(f"max_steps={self.max_steps}: must be at least 1, or -1 to train optim.epochs")
        if self.max_steps == -1 and not self.epochs > 0:
            raise BadInput(f"epochs={self.epochs}: must be greater than 0 (or set optim.max_steps)")
        if not self.learning_rate > 0:
            raise BadInput(f"learning_rate={self.learning_rate}: must be greater than 0")
        for name in ("batch_size", "grad_accum", "logging_steps", "save_steps", "save_total_limit"):
            at_least(name, getattr(self, name), 1)
        if not 0 <= self.warmup_ratio < 1:
            raise BadInput(f"warmup_ratio={self.warmup_ratio}: must be in [0, 1) (a share of the steps)")
        for name in ("weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                raise BadInput(f"{name}={getattr(self, name)}: must be >= 0")
        if self.bf16 not in BF16_CHOICES:
            raise BadInput(f"bf16={self.bf16!r}: must be one of {', '.join(BF16_CHOICES)}")


@dataclass
class LoraSwitch:
    """LoRA through peft: one switch for models too large to fine-tune whole."""

    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: str = "all-linear"

    def check(self) -> None:
        """``BadInput`` for a rank below 1, a non-positive alpha or a dropout outside [0, 1)."""
        at_least("r", self.r, 1)
        finite("alpha", self.alpha)
        if not self.alpha > 0:
            raise BadInput(f"alpha={self.alpha}: must be greater than 0")
        if not 0 <= self.dropout < 1:
            raise BadInput(f"dropout={self.dropout}: must be in [0, 1)")


def at_least(name: str, value: int | None, low: int) -> None:
    """``BadInput`` when ``value`` is set and below ``low``.

    >>> at_least("limit", None, 1)
    >>> at_least("batch_size", 0, 1)
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: batch_size=0: must be at least 1
    """
    if value is not None and value < low:
        raise BadInput(f"{name}={value}: must be at least {low}")


def check_run_settings(recipe) -> None:
    """What every recipe (the PRM's too) needs: a model, an output_dir and a max_length of at least 1, and an
    output_dir that is not the ``model`` (or DPO's ``ref_model``) it trains from: ``model=X output_dir=X --overwrite``
    destroyed the input model (issue #42)."""
    for name in ("model", "output_dir"):
        if not getattr(recipe, name):
            raise BadInput(f"{name}: empty; name a {'model' if name == 'model' else 'folder'}")
    at_least("max_length", getattr(recipe, "max_length", None), 1)
    from posttrainlab.data.atomic import check_not_input  # the model read must not be the folder written, any spelling

    models = {"model": recipe.model, "ref_model": getattr(recipe, "ref_model", None)}  # "base": the cached base
    if not recipe.output_dir.startswith("(set by "):  # a job's placeholder (quickstart.PLACED): paths come later
        check_not_input(recipe.output_dir, {k: v for k, v in models.items() if v != "base"}, flag="output_dir")
