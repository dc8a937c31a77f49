"""The quickstart's settings: ``QuickstartConfig`` (every stage's recipe), the presets, and where each stage writes.

A preset is a YAML file in ``configs/quickstart/`` over these defaults, then ``key=value`` overrides
(``posttrainlab.config.load_config``; docs/design.md "One config regime").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from posttrainlab.config import SHIPPED
from posttrainlab.data.arith.prm_labels import ArithPRMOptions
from posttrainlab.train.pretrain import PretrainConfig
from posttrainlab.train.prm_recipe import PRMDataConfig, PRMRecipe
from posttrainlab.train.recipes import DPORecipe, GRPORecipe, OptimConfig, RFTRecipe, SFTRecipe


@dataclass
class EvalSettings:
    """Policy evaluation in the quickstart."""

    split: str = "test"
    limit: int | None = None  # None = all 500 test problems
    batch_size: int = 64
    max_new_tokens: int = 48
    preference_split: str | None = "preference_test"
    eval_base: bool = False  # also evaluate the base model (it has never seen the prompt format)
    # K > 1: also K samples per problem at sample_temperature: pass@1 (mean over the K) and maj@K beside greedy
    # accuracy (eval.sampled), paired against SFT in the report; 0 = greedy only
    samples: int = 0
    sample_temperature: float = 1.0

    def check(self) -> None:
        """``BadInput`` for a negative ``samples`` or a ``sample_temperature`` that is not above 0."""
        from posttrainlab.errors import BadInput

        if self.samples < 0:
            raise BadInput(f"samples={self.samples}: must be >= 0 (0: greedy only)")
        if not self.sample_temperature > 0:
            raise BadInput(f"sample_temperature={self.sample_temperature}: must be greater than 0")


#: the value of a path the quickstart sets itself, inside the run folder (``place``)
PLACED = "(set by the quickstart inside --out)"


def _prm_data() -> PRMDataConfig:
    return PRMDataConfig(path=PLACED, format="step", eval_path=PLACED, eval_steps=50)


@dataclass
class BeamSettings:
    """PRM-guided step-level beam search on the best-of-N problems (``eval.beam_search``; docs/prm-eval.md)."""

    enabled: bool = True
    beams: int = 4  # B beams kept after every step
    proposals: int = 4  # M continuations of one step per beam (B x M = 16: best-of-16's token budget)
    max_steps: int = 8
    temperature: float = 0.8
    aggregation: str = "last"  # a beam's score: its last step's (search-and-learn) or its lowest step's ("min")


@dataclass
class ProcessSettings:
    """The process-supervision stages: arith-prm from the SFT policy, a step PRM, its eval, best-of-N."""

    enabled: bool = True
    k: int = 4  # arith-prm: samples per prompt
    limit: int | None = 250  # arith-prm: records per arith-v1 split read (train: rl_train; held out: dev, validation)
    temperature: float = 1.0  # arith-prm sampling (errors are the point)
    # arith-v1 splits whose reference solutions, and one corruption of each, join arith-prm's train split
    # (free exact labels beside the policy samples; e.g. [sft_train_3k]); reference_limit: first N records of each
    references: list[str] = field(default_factory=list)
    reference_limit: int | None = None
    # arith-prm's labels, missing-answer step and near-miss hard negatives (data.arith.prm_labels); labels
    # every-step trains the PRM on the Math-Shepherd view, where every line is (place)
    labelling: ArithPRMOptions = field(default_factory=ArithPRMOptions)
    prm: PRMRecipe = field(
        default_factory=lambda: PRMRecipe(
            dataset=_prm_data(),
            optim=OptimConfig(epochs=2, learning_rate=1e-4, batch_size=16, logging_steps=10, save_steps=100),
        )
    )
    bon_n: int = 16  # best-of-N: samples per test problem (ns = 1, 2, 4, ... up to bon_n)
    bon_limit: int | None = None  # None = all 500 test problems
    bon_temperature: float = 0.8
    beam: BeamSettings = field(default_factory=BeamSettings)


@dataclass
class QuickstartConfig:
    """Every stage's settings: the defaults here, then a preset's YAML, then ``key=value`` overrides."""

    preset: str = "default"
    # a real model to start from instead of the tiny base: a name `posttrain model import` knows
    # (smollm2-135m-instruct), a .gguf file, or a Hugging Face model folder; None pretrains the tiny base
    base_model: str | None = None
    base: PretrainConfig = field(default_factory=PretrainConfig)
    sft: SFTRecipe = field(default_factory=SFTRecipe)
    dpo: DPORecipe = field(default_factory=DPORecipe)
    grpo: GRPORecipe = field(default_factory=GRPORecipe)
    rft: RFTRecipe = field(default_factory=RFTRecipe)
    eval: EvalSettings = field(default_factory=EvalSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)
    # trained from the SFT model, in this order: dpo (the dpo recipe as set), dpo-policy (the same recipe with
    # preference.source=policy: pairs sampled from the SFT model and graded; train/dpo.py), grpo, rft (rejection-
    # sampling fine-tuning; train/rft.py), sft-continued (the more-training control: rft's fine-tune settings on
    # its sft_data alone, from the SFT model, for as many steps as continued_steps_from's run took; train/continued.py)
    methods: list[str] = field(default_factory=lambda: ["dpo", "dpo-policy", "grpo"])
    continued_steps_from: str | None = "rft"  # sft, or a method listed before sft-continued; None: rft.optim as set
    # train every method (SFT too) K times, optim.seed + 0..K-1 (dpo-policy's sampling seed too): OUT/<m>-s<k>,
    # OUT/eval/<m>-s<k> for k >= 1; the report gives mean and sd over the K seeds beside each interval
    seeds: int = 1


#: the presets: one YAML file each, read by ``load_config`` over ``QuickstartConfig``'s defaults
PRESET_DIR = SHIPPED / "quickstart"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


#: the methods ``methods`` may list, and the recipe (a field of QuickstartConfig) each one trains
METHODS = {"dpo": "dpo", "dpo-policy": "dpo", "grpo": "grpo", "rft": "rft", "sft-continued": "rft"}


def check_config(cfg: QuickstartConfig) -> None:
    """``BadInput`` for settings no stage can run: unknown methods, seeds < 1."""
    from posttrainlab.errors import BadInput

    unknown = [m for m in cfg.methods if m not in METHODS]
    if unknown:
        raise BadInput(f"methods: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(METHODS)}")
    if cfg.seeds < 1:
        raise BadInput(f"seeds={cfg.seeds}: must be at least 1")
    if "sft-continued" in cfg.methods and cfg.continued_steps_from is not None:
        before = ["sft", *cfg.methods[: cfg.methods.index("sft-continued")]]
        if cfg.continued_steps_from not in before:
            raise BadInput(f"continued_steps_from={cfg.continued_steps_from!r}: sft-continued trains as many steps as "
                           f"that run took; name sft or a method listed before it ({', '.join(before)})")  # fmt: skip


def quickstart_config(preset: str, overrides: list[str] | None = None) -> QuickstartConfig:
    """A preset (a name in ``configs/quickstart/`` or a YAML file of the user's) with ``key=value`` overrides
    applied (unknown keys are one-line errors). ``preset`` is recorded as the file's name unless the file sets it."""
    from posttrainlab.config import load_config
    from posttrainlab.errors import BadInput

    if preset.endswith((".yaml", ".yml")):
        path = Path(preset)
    elif preset in preset_names():
        path = PRESET_DIR / f"{preset}.yaml"
    else:
        raise BadInput(f"unknown preset {preset!r}: choose one of {', '.join(preset_names())}, or a YAML file")
    cfg = load_config(QuickstartConfig, path, overrides, start=QuickstartConfig(preset=path.stem))
    check_config(cfg)
    return cfg


def seed_name(method: str, k: int) -> str:
    """The run folder of seed ``k`` of ``method``: ``sft``, ``sft-s1``, ``sft-s2``..."""
    return method if k == 0 else f"{method}-s{k}"


def method_recipe(cfg: QuickstartConfig, method: str, k: int = 0):
    """The recipe ``method`` (``sft`` or one of ``METHODS``) trains for seed ``k`` (``train.recipes.seeded``):
    a copy, with the paths ``place`` set; dpo-policy is the dpo recipe with ``preference.source: policy``;
    sft-continued is rft's fine-tune on its sft_data alone (``train.continued.continued_from``)."""
    from copy import deepcopy

    from posttrainlab.train.recipes import seeded

    recipe = deepcopy(getattr(cfg, "sft" if method == "sft" else METHODS[method]))
    if method == "dpo-policy":
        recipe.preference.source = "policy"
        recipe.output_dir = str(Path(recipe.output_dir).parent / method)
    if method == "sft-continued":
        from posttrainlab.train.continued import continued_from

        runs, source = Path(recipe.output_dir).parent, cfg.continued_steps_from
        steps_from = None if source is None else str(runs / seed_name(source, k))
        recipe = continued_from(recipe, str(runs / method), steps_from)
    return seeded(recipe, k)


def place(cfg: QuickstartConfig, layout, base: str | Path | None = None) -> None:
    """Set what the quickstart decides itself, inside the run folder (a ``run_layout.RunLayout``): each stage's
    model, output_dir and dataset paths. SFT starts from ``base``, or from ``OUT/base`` (the link to the run's
    base model) while the base is not known yet (an import that has not run)."""
    data = str(layout.data)
    for name, recipe, start in (("sft", cfg.sft, base or layout.base), ("dpo", cfg.dpo, layout.model("sft")),
                                ("grpo", cfg.grpo, layout.model("sft")),
                                ("rft", cfg.rft, layout.model("sft"))):  # fmt: skip
        recipe.model, recipe.output_dir, recipe.dataset.path = str(start), str(layout.model(name)), data
    cfg.rft.sft_data.path = data
    prm = cfg.process.prm
    prm.model, prm.output_dir = str(layout.model("sft")), str(layout.prm)
    prm.dataset.path = str(layout.prm_train)
    prm.dataset.eval_path = str(layout.prm_heldout)  # its loss: the report's eval curve
    if cfg.process.labelling.labels == "every-step":  # every line is in the Math-Shepherd view
        prm.dataset.format = "math-shepherd"
        prm.dataset.path, prm.dataset.eval_path = (str(layout.arith_prm / "math_shepherd" / f"{split}.jsonl")
                                                   for split in ("train", "heldout"))  # fmt: skip


def resolved(cfg: QuickstartConfig, out: str | Path) -> QuickstartConfig:
    """``cfg`` as ``run_quickstart(out, cfg)`` will run it (``--print-config``); nothing is read or written.

    The base is the cached tiny base's path, or ``base_model`` as given (an import's folder is known once it ran).
    """
    from copy import deepcopy

    from posttrainlab.run_layout import RunLayout
    from posttrainlab.train.pretrain import base_cache_path

    cfg = deepcopy(cfg)
    place(cfg, RunLayout(Path(out)), base_cache_path(cfg.base) if cfg.base_model is None else cfg.base_model)
    return cfg
