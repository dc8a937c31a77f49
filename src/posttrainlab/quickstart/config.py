"""The quickstart's settings: ``QuickstartConfig`` (every stage's recipe), the presets, and where each stage writes.

A preset is a YAML file in ``configs/quickstart/`` over these defaults, then ``key=value`` overrides
(``posttrainlab.config.load_config``; docs/design.md "One config regime"). Training stages take the recipes of
``train``; the evaluation stages the runners' settings (``runners.settings``), held here (``eval`` is a
``PolicyEvalSettings``, ``process.beam`` a ``BeamSettings``) or built from the ``process.bon_*`` keys
(``ProcessSettings.best_of_n``), with the defaults written there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from posttrainlab.config import SHIPPED
from posttrainlab.data.arith.prm_labels import ArithPRMOptions
from posttrainlab.runners.settings import BeamSettings, BestOfNSettings, PolicyEvalSettings
from posttrainlab.train.pretrain import PretrainConfig
from posttrainlab.train.prm_recipe import PRMDataConfig, PRMRecipe
from posttrainlab.train.recipes import (
    DatasetConfig,
    DPORecipe,
    GRPORecipe,
    OptimConfig,
    RejectionConfig,
    RFTRecipe,
    SFTRecipe,
)


@dataclass
class EvalSettings(PolicyEvalSettings):
    """Policy evaluation in the quickstart: ``runners.settings.PolicyEvalSettings`` (every field of ``posttrain eval
    policy``) with the quickstart's own defaults, and ``eval_base``. A DPO policy's pairs are ranked against the SFT
    model with ``dpo.beta`` (the plan sets both), so ``beta`` stays unset here."""

    split: str = "test"
    batch_size: int = 64
    max_new_tokens: int = 48
    # samples K > 1: also K samples per problem at sample_temperature: pass@1 (mean over the K) and maj@K beside
    # greedy accuracy (eval.sampled), paired against SFT in the report; 0 = greedy only
    sample_temperature: float = 1.0
    samples: int = 8  # PolicyEvalSettings' 0 (greedy only) there; the main job reports pass@1 and maj@8 beside greedy
    eval_base: bool = False  # also evaluate the base model (it has never seen the prompt format)

    def check(self) -> None:
        """``BadInput`` for a negative ``samples``, a ``sample_temperature`` that is not above 0, a ``beta`` (the
        quickstart's is ``dpo.beta``), and what ``PolicyEvalSettings.check`` refuses."""
        from posttrainlab.errors import BadInput

        if self.samples < 0:
            raise BadInput(f"samples={self.samples}: must be >= 0 (0: greedy only)")
        if not self.sample_temperature > 0:
            raise BadInput(f"sample_temperature={self.sample_temperature}: must be greater than 0")
        if self.beta != PolicyEvalSettings.beta:
            raise BadInput(f"beta={self.beta}: the quickstart ranks a DPO policy's pairs with dpo.beta; set that")
        super().check()

    def policy_settings(self, beta: float) -> PolicyEvalSettings:
        """What ``evaluate_policy`` runs with: these settings, a DPO policy's pairs ranked with ``beta``."""
        return PolicyEvalSettings(**{f.name: getattr(self, f.name) for f in fields(PolicyEvalSettings)} | {
            "beta": beta})  # fmt: skip


#: the main job's SFT and PRM train under bf16 autocast where the CPU has native bf16 (``train.launch.use_bf16``):
#: 1.2-1.5x on this model (bench/bench_precision.py), the same dev accuracy (docs/experiments.md); base stays fp32
BF16 = "auto"

#: the value of a path the quickstart sets itself, inside the run folder (``place``)
PLACED = "(set by the quickstart inside --out)"


def _prm_data() -> PRMDataConfig:
    # held-out loss 4 times in the ~810 steps (every 50 steps cost 86 s of the PRM stage's 608, 2026-12-07)
    return PRMDataConfig(path=PLACED, format="step", eval_path=PLACED, eval_steps=200)


@dataclass
class BeamStage(BeamSettings):
    """PRM-guided step-level beam search in the quickstart: ``runners.settings.BeamSettings`` (docs/prm-eval.md) on
    the best-of-N problems (its ``limit`` is ``process.bon_limit``), and ``enabled: false`` to skip it."""

    enabled: bool = True

    def check(self) -> None:
        from posttrainlab.errors import BadInput

        if self.limit is not None:
            raise BadInput(f"limit={self.limit}: beam search runs on the best-of-N problems; set process.bon_limit")
        super().check()


@dataclass
class ProcessSettings:
    """The process-supervision stages: arith-prm from the SFT policy, a step PRM, its eval, best-of-N, beam search."""

    enabled: bool = True
    k: int = 8  # arith-prm: samples per prompt
    limit: int | None = None  # arith-prm: records per arith-v1 split read (None: all; held out: dev, validation)
    temperature: float = 1.0  # arith-prm sampling (errors are the point)
    # arith-v1 prompt splits sampled for arith-prm's train split (more prompts: more exact-labelled policy errors;
    # rl_train_1500 rather than rl_train was chosen on dev: docs/experiments.md "PRM data from 3x the prompts")
    train_prompts: list[str] = field(default_factory=lambda: ["rl_train_1500"])
    # arith-v1 splits whose reference solutions, and one corruption of each, join arith-prm's train split
    # (free exact labels beside the policy samples; e.g. [sft_train_3k]); reference_limit: first N records of each
    references: list[str] = field(default_factory=list)
    reference_limit: int | None = None
    # arith-prm's labels, missing-answer step and near-miss hard negatives (data.arith.prm_labels); labels
    # every-step trains the PRM on the Math-Shepherd view, where every line is (place)
    labelling: ArithPRMOptions = field(
        default_factory=lambda: ArithPRMOptions(labels="every-step", missing_answer="explicit")
    )
    # the result head (the SFT policy's own probability of each line's result, fine-tuned on the labels): chosen on
    # dev against the token-classification head (docs/prm-eval.md "What each lever bought")
    prm: PRMRecipe = field(
        default_factory=lambda: PRMRecipe(
            dataset=_prm_data(),
            head="result",
            input_format="policy",
            optim=OptimConfig(
                epochs=1, learning_rate=1e-4, batch_size=16, logging_steps=10, save_steps=100, bf16=BF16
            ),  # fmt: skip
        )
    )
    # also an outcome reward model (ORM): the PRM's recipe on the same samples with outcome labels only
    # (supervision: outcome), scoring best-of-N's samples beside the PRM: process vs outcome at each N (issue #39)
    orm: bool = False
    # best-of-N (runners.settings.BestOfNSettings: n, limit, temperature; the rest its defaults, best_of_n()):
    bon_n: int = BestOfNSettings.n  # samples per test problem (ns = 1, 2, 4, ... up to bon_n)
    bon_limit: int | None = 300  # the first 300 problems of the eval split (None: all 500)
    bon_temperature: float = BestOfNSettings.temperature
    # min: on dev 35.3% against 17.3% for last (an answer line after a wrong step from the same number scores high)
    beam: BeamStage = field(default_factory=lambda: BeamStage(aggregation="min"))

    def check(self) -> None:
        """``BadInput`` for what the arith-prm and best-of-N stages would refuse, when the config is loaded, not
        after the stages before them trained (issue #42): the stages' own rules (``check_settings`` runs those of
        ``labelling``, ``prm`` and ``beam``, which are fields)."""
        if not self.enabled:
            return
        from posttrainlab.errors import BadInput

        self.arith_prm().check()
        if self.orm and self.labelling.labels != "every-step":
            raise BadInput("orm=true: an ORM trains on whole solutions; set labelling.labels=every-step")
        try:
            self.best_of_n().check()
        except BadInput as e:  # its fields are bon_* here: name them as the user sets them
            field_name = str(e).split("=", 1)[0]
            raise BadInput(f"bon_{e}" if field_name in ("n", "limit", "temperature") else str(e)) from None

    def orm_recipe(self, output_dir: str):
        """The ORM's recipe: ``prm``'s, on the same data, with outcome labels (``supervision: outcome``)."""
        from dataclasses import replace

        return replace(self.prm, supervision="outcome", output_dir=str(output_dir))

    def arith_prm(self):
        """The arith-prm stage's ``label.arith_prm.ArithPRMBuild`` (the rest its defaults)."""
        from posttrainlab.label.arith_prm import ArithPRMBuild

        return ArithPRMBuild(k=self.k, limit=self.limit, temperature=self.temperature, reference_splits=self.references,
                             reference_limit=self.reference_limit, train_prompts=tuple(self.train_prompts))  # fmt: skip

    def best_of_n(self, split: str | None = None) -> BestOfNSettings:
        """The best-of-N stage's settings, on arith-v1 split ``split`` (the policies' eval split)."""
        return BestOfNSettings(n=self.bon_n, limit=self.bon_limit, temperature=self.bon_temperature, split=split)

    def beam_search(self, split: str | None = None) -> BeamSettings:
        """The beam-search stage's settings: ``beam``'s, on the best-of-N problems (``bon_limit``, ``split``)."""
        return BeamSettings(**{f.name: getattr(self.beam, f.name) for f in fields(BeamSettings)} | {
            "limit": self.bon_limit, "split": split})  # fmt: skip


def _base() -> PretrainConfig:
    """configs/models/tiny-base.yaml at half its peak lr and twice its warm-up: the base whose SFT was stable across
    base seeds on the Intel Xeon type (61.2-62.8% dev; fp32 on the AMD EPYC one: 55.6-73.0% test) and whose weights
    are byte-identical on machines of one CPU type (four Intel Xeons; docs/experiments.md)."""
    base = PretrainConfig()
    base.train.learning_rate, base.train.warmup_ratio = 5e-4, 0.1
    return base


def _sft() -> SFTRecipe:
    """4 epochs of sft_train_3k at lr 5e-4: the SFT that is stable on ``_base`` (the 2-epoch SFT at 1e-3 gives
    18.6-27.4% dev there; the pair is what is stable)."""
    return SFTRecipe(
        dataset=DatasetConfig(split="sft_train_3k"), optim=OptimConfig(epochs=4, learning_rate=5e-4, bf16=BF16)
    )


def _rft() -> RFTRecipe:
    """Expert iteration from the SFT policy: 8 samples of each rl_train prompt, those whose every step is exactly
    right kept, mixed 1:1 with sft_train_3k, one epoch at lr 2e-5 (chosen on dev for this SFT: at 1e-4 RFT -0.6
    and its control -2.6, at 2e-5 +2.0 and +0.2)."""
    rejection = RejectionConfig(k=8, temperature=1.0, max_new_tokens=48, filter="process")
    optim = OptimConfig(epochs=1, learning_rate=2e-5, batch_size=16, logging_steps=5, save_steps=50)
    return RFTRecipe(rejection=rejection, optim=optim)


@dataclass
class QuickstartConfig:
    """Every stage's settings. These defaults are the main job (``--preset default``, whose YAML sets nothing); a
    preset's YAML changes some of them (``extends:`` starts it from another preset), then ``key=value`` overrides."""

    preset: str = "default"
    # a real model to start from instead of the tiny base: a name `posttrain model import` knows
    # (smollm2-135m-instruct), a .gguf file, or a Hugging Face model folder; None pretrains the tiny base
    base_model: str | None = None
    base: PretrainConfig = field(default_factory=_base)
    sft: SFTRecipe = field(default_factory=_sft)
    dpo: DPORecipe = field(default_factory=DPORecipe)
    grpo: GRPORecipe = field(default_factory=GRPORecipe)
    rft: RFTRecipe = field(default_factory=_rft)
    eval: EvalSettings = field(default_factory=EvalSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)
    # trained from the SFT model, in this order: dpo (the dpo recipe as set), dpo-policy (the same recipe with
    # preference.source=policy: pairs sampled from the SFT model and graded; train/dpo.py), grpo, rft (rejection-
    # sampling fine-tuning; train/rft.py), rft-answer (rft keeping every right answer: rejection.filter=answer),
    # sft-continued (the more-training control: rft's fine-tune settings on its sft_data alone, from the SFT model, for
    # as many steps as continued_steps_from's run took; train/continued.py); after the PRM: grpo-prm (grpo with the
    # run's PRM as prm_reward beside the outcome reward) and grpo-prm-only (the PRM the only reward). None by
    # default: with 3,000 SFT solutions no method beat its same-steps control on any of four bases (RFT − control
    # +0.6 to +1.0), so the main job spends its time on the PRM; --preset scarce is where RFT beats its control
    methods: list[str] = field(default_factory=list)
    continued_steps_from: str | None = "rft"  # sft, or a method listed before sft-continued; None: rft.optim as set
    # train every method (SFT too) K times, optim.seed + 0..K-1 (dpo-policy's sampling seed too): OUT/<m>-s<k>,
    # OUT/eval/<m>-s<k> for k >= 1; the report gives mean and sd over the K seeds beside each interval
    seeds: int = 1


#: the presets: one YAML file each, read by ``load_config`` over ``QuickstartConfig``'s defaults
PRESET_DIR = SHIPPED / "quickstart"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


#: presets that are gone, and where their experiments live now (``quickstart_config`` says so in one line)
RETIRED = {
    "stable": "its settings are the default preset's now: drop --preset",
    "effects": 'its experiment is `key=value` lines over the default now: docs/experiments.md "The effects preset"',
}


#: the methods ``methods`` may list, and the recipe (a field of QuickstartConfig) each one trains
METHODS = {"dpo": "dpo", "dpo-policy": "dpo", "grpo": "grpo", "rft": "rft", "rft-answer": "rft", "sft-continued": "rft",
           "grpo-prm": "grpo", "grpo-prm-only": "grpo"}  # fmt: skip
#: methods that read the run's PRM: they train after the ``prm`` stage (grpo-prm: ``grpo``'s recipe with the PRM as
#: its ``prm_reward`` beside the outcome reward: "GRPO-prm − GRPO" is the process reward's effect at the same steps;
#: grpo-prm-only: the same with the grader's rewards at 0, the PRM the only signal; docs/process-vs-outcome.md)
PRM_METHODS = ("grpo-prm", "grpo-prm-only")


def check_config(cfg: QuickstartConfig) -> None:
    """``BadInput`` for settings no stage can run: unknown methods, seeds < 1."""
    from posttrainlab.errors import BadInput

    unknown = [m for m in cfg.methods if m not in METHODS]
    if unknown:
        raise BadInput(f"methods: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(METHODS)}")
    if cfg.seeds < 1:
        raise BadInput(f"seeds={cfg.seeds}: must be at least 1")
    needs_prm = [m for m in cfg.methods if m in PRM_METHODS]
    if "rft-answer" in cfg.methods and cfg.rft.rejection.filter == "answer":
        raise BadInput("methods: rft-answer is rft with rejection.filter=answer, and rft.rejection.filter is answer "
                       "already; set it to process (the default) to compare the two filters")  # fmt: skip
    if needs_prm and not cfg.process.enabled:
        raise BadInput(f"methods: {', '.join(needs_prm)} reads the run's PRM; it needs process.enabled=true")
    if "sft-continued" in cfg.methods and cfg.continued_steps_from is not None:
        # a PRM method trains after the PRM, so after sft-continued: it cannot set its step count
        before = ["sft", *(m for m in cfg.methods[: cfg.methods.index("sft-continued")] if m not in PRM_METHODS)]
        if cfg.continued_steps_from not in before:
            raise BadInput(f"continued_steps_from={cfg.continued_steps_from!r}: sft-continued trains as many steps as "
                           f"that run took; name sft or a method listed before it ({', '.join(before)})")  # fmt: skip


def quickstart_config(preset: str, overrides: list[str] | None = None) -> QuickstartConfig:
    """A preset (a name in ``configs/quickstart/`` or a YAML file of the user's) with ``key=value`` overrides
    applied (unknown keys are one-line errors). ``preset`` is recorded as the file's name unless the file sets it."""
    from posttrainlab.config import load_config, preset_file
    from posttrainlab.errors import BadInput

    if preset in RETIRED:
        raise BadInput(f"preset {preset!r} was retired: {RETIRED[preset]}")
    path = preset_file(preset, PRESET_DIR)
    cfg = load_config(QuickstartConfig, path, overrides, start=QuickstartConfig(preset=path.stem), presets=PRESET_DIR)
    check_config(cfg)
    return cfg


def seed_name(method: str, k: int) -> str:
    """The run folder of seed ``k`` of ``method``: ``sft``, ``sft-s1``, ``sft-s2``..."""
    return method if k == 0 else f"{method}-s{k}"


def method_recipe(cfg: QuickstartConfig, method: str, k: int = 0):
    """The recipe ``method`` (``sft`` or one of ``METHODS``) trains for seed ``k`` (``train.recipes.seeded``):
    a copy, with the paths ``place`` set; dpo-policy is the dpo recipe with ``preference.source: policy``;
    rft-answer the rft recipe with ``rejection.filter: answer``;
    sft-continued is rft's fine-tune on its sft_data alone (``train.continued.continued_from``)."""
    from copy import deepcopy

    from posttrainlab.train.recipes import seeded

    field_name = "sft" if method == "sft" else METHODS[method]
    recipe = deepcopy(getattr(cfg, field_name))
    runs = Path(recipe.output_dir).parent
    if method != field_name:  # a method trained from another's recipe has a folder of its own: OUT/<method>
        recipe.output_dir = str(runs / method)
    if method == "dpo-policy":
        recipe.preference.source = "policy"
    if method == "rft-answer":
        recipe.rejection.filter = "answer"
    if method in PRM_METHODS:  # the run's PRM as GRPO's process reward (prm_reward.mode, credit... as grpo sets them)
        recipe.prm_reward.path = cfg.process.prm.output_dir
    if method == "grpo-prm-only":  # the PRM alone: no outcome or format reward
        recipe.rewards.correctness = recipe.rewards.format = 0.0
    if method == "sft-continued":
        from posttrainlab.train.continued import continued_from

        source = cfg.continued_steps_from
        steps_from = None if source is None else str(runs / seed_name(source, k))
        recipe = continued_from(recipe, recipe.output_dir, steps_from)
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
    # the held-out split's loss is the report's eval curve
    prm.dataset.path, prm.dataset.eval_path = str(layout.prm_train), str(layout.prm_heldout)
    if cfg.process.labelling.labels == "every-step":  # every line is in the Math-Shepherd view
        prm.dataset.format = "math-shepherd"
        prm.dataset.path = str(layout.prm_train_every_step)
        prm.dataset.eval_path = str(layout.prm_heldout_every_step)


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
