"""``posttrain quickstart``: the main job on the embedded default, one command, offline, 2 CPU cores.

prepare arith-v1 → pretrain the tiny base (or reuse the cached one) → SFT → eval → DPO and GRPO, each
from the SFT checkpoint → eval → process supervision (arith-prm sampled from the SFT policy and
labelled exactly → a step PRM → PRM eval on held-out solutions → best-of-N on the test problems) →
report. Every stage writes its outputs into ``OUT/<stage>`` and is
skipped when its finished marker is already there, and every training stage resumes from its last
checkpoint, so a killed quickstart started again carries on where it stopped.

Presets (``--preset``) are YAML files in ``configs/quickstart/`` that set fields of ``QuickstartConfig``:
``default`` is the tuned recipe (tuned on ``dev``, reported on all 500 ``test`` problems); ``smoke`` is a
small base and a few steps of each stage, to check the whole pipeline in minutes; ``smollm2`` runs the same
stages on a real pretrained model, SmolLM2-135M-Instruct, imported offline (``posttrain model import``)
instead of pretraining the tiny base, with LoRA and fewer problems so it fits in about 40 minutes on 2 cores.
``--preset FILE.yaml`` reads a preset of the user's. Any stage setting can be changed with ``key=value``
overrides (``sft.optim.epochs=1``); ``--print-config`` shows the result (``resolved``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from posttrainlab.config import SHIPPED
from posttrainlab.train.pretrain import PretrainConfig
from posttrainlab.train.prm_recipe import PRMDataConfig, PRMRecipe
from posttrainlab.train.recipes import DPORecipe, GRPORecipe, OptimConfig, SFTRecipe


@dataclass
class EvalSettings:
    """Policy evaluation in the quickstart."""

    split: str = "test"
    limit: int | None = None  # None = all 500 test problems
    batch_size: int = 64
    max_new_tokens: int = 48
    preference_split: str | None = "preference_test"
    eval_base: bool = False  # also evaluate the base model (it has never seen the prompt format)


# The quickstart sets model, output_dir and dataset.path of the PRM recipe (OUT/sft, OUT/prm, OUT/arith-prm; ``place``).
def _prm_data() -> PRMDataConfig:
    return PRMDataConfig(path="OUT/arith-prm/step/train.jsonl", format="step")


@dataclass
class ProcessSettings:
    """The process-supervision stages: arith-prm from the SFT policy, a step PRM, its eval, best-of-N."""

    enabled: bool = True
    k: int = 4  # arith-prm: samples per prompt
    limit: int | None = 250  # arith-prm: records per arith-v1 split read (train: rl_train; held out: dev, validation)
    temperature: float = 1.0  # arith-prm sampling (errors are the point)
    prm: PRMRecipe = field(
        default_factory=lambda: PRMRecipe(
            dataset=_prm_data(),
            optim=OptimConfig(epochs=2, learning_rate=1e-4, batch_size=16, logging_steps=10, save_steps=100),
        )
    )
    bon_n: int = 16  # best-of-N: samples per test problem (ns = 1, 2, 4, ... up to bon_n)
    bon_limit: int | None = None  # None = all 500 test problems
    bon_temperature: float = 0.8


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
    eval: EvalSettings = field(default_factory=EvalSettings)
    process: ProcessSettings = field(default_factory=ProcessSettings)
    methods: list[str] = field(default_factory=lambda: ["dpo", "grpo"])


#: the presets: one YAML file each, read by ``load_config`` over ``QuickstartConfig``'s defaults
PRESET_DIR = SHIPPED / "quickstart"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


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
    return load_config(QuickstartConfig, path, overrides, start=QuickstartConfig(preset=path.stem))


def place(cfg: QuickstartConfig, out: Path, base: str) -> None:
    """Set what the quickstart decides itself: each stage's model, output_dir and dataset.path, inside ``out``."""
    data = out / "data" / "arith-v1"
    for name, recipe, start in (("sft", cfg.sft, base), ("dpo", cfg.dpo, out / "sft"), ("grpo", cfg.grpo, out / "sft")):
        recipe.model, recipe.output_dir, recipe.dataset.path = str(start), str(out / name), str(data)
    prm = cfg.process.prm
    prm.model, prm.output_dir = str(out / "sft"), str(out / "prm")
    prm.dataset.path = str(out / "arith-prm" / "step" / "train.jsonl")


def resolved(cfg: QuickstartConfig, out: str | Path) -> QuickstartConfig:
    """``cfg`` as ``run_quickstart(out, cfg)`` will run it (``--print-config``); nothing is read or written.

    The base is the cached tiny base's path, or ``base_model`` as given (an import's folder is known once it ran).
    """
    from copy import deepcopy

    from posttrainlab.train.pretrain import base_cache_path

    cfg = deepcopy(cfg)
    place(cfg, Path(out), str(base_cache_path(cfg.base)) if cfg.base_model is None else cfg.base_model)
    return cfg


class StageLog:
    """Records each stage's time and status in ``OUT/run.json`` (read by the report)."""

    def __init__(self, out: Path, cfg: QuickstartConfig):
        self.out, self.cfg = out, cfg
        self.path = out / "run.json"
        self.state = {"preset": cfg.preset, "stages": [], "started": _now(), "config": asdict(cfg)}

    def stage(self, name: str, done: bool, fn, console) -> None:
        t0 = time.time()
        if done:
            status = "cached"
            console.print(f"[dim]{name}: already done, reusing[/dim]")
        else:
            console.rule(f"[bold]{name}")
            fn()
            status = "done"
        self.state["stages"].append({"name": name, "seconds": round(time.time() - t0, 1), "status": status})
        self.save()

    def save(self) -> None:
        from posttrainlab.data.atomic import write_text

        self.state["finished"] = _now()
        write_text(self.path, json.dumps(self.state, indent=2) + "\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_quickstart(out: str | Path, cfg: QuickstartConfig, console=None) -> Path:
    """Run every stage into ``out``; return the path of report.html."""
    from rich.console import Console

    from posttrainlab.data.arith.release import prepare
    from posttrainlab.data.manifest import has_manifest
    from posttrainlab.eval.policy import evaluate_policy
    from posttrainlab.report.build import build_report
    from posttrainlab.train.common import SUMMARY
    from posttrainlab.train.dpo import train_dpo
    from posttrainlab.train.grpo import train_grpo
    from posttrainlab.train.pretrain import base_cache_path, is_cached, pretrain
    from posttrainlab.train.sft import train_sft

    console = console or Console()
    _quiet_library_bars()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run = StageLog(out, cfg)
    data = out / "data" / "arith-v1"
    run.stage("prepare", has_manifest(data), lambda: prepare(data), console)
    if cfg.base_model is None:
        base = base_cache_path(cfg.base)
        run.state["base_model"] = str(base)
        run.stage("pretrain", is_cached(base, cfg.base), lambda: pretrain(cfg.base, base), console)
    else:
        base = _real_base(run, cfg.base_model, console)
    _link_base(out, base)
    place(cfg, out, str(base))  # run.json's "config" keeps the paths as configured (StageLog copied them)

    def train(name: str, recipe, fn) -> None:
        run.stage(name, (out / name / SUMMARY).is_file(), lambda: fn(recipe), console)

    def evaluate(name: str, model: Path, ref: Path | None = None) -> None:
        target = out / "eval" / name
        e = cfg.eval

        def go() -> None:
            evaluate_policy(
                str(model),
                str(data),
                target,
                split=e.split,
                limit=e.limit,
                batch_size=e.batch_size,
                max_new_tokens=e.max_new_tokens,
                preference_split=e.preference_split,
                ref_model=str(ref) if ref else None,
                beta=cfg.dpo.beta,
            )

        run.stage(f"eval-{name}", (target / "metrics.json").is_file(), go, console)

    if cfg.eval.eval_base:
        evaluate("base", base)
    train("sft", cfg.sft, train_sft)
    evaluate("sft", out / "sft")
    if "dpo" in cfg.methods:
        train("dpo", cfg.dpo, train_dpo)
        evaluate("dpo", out / "dpo", ref=out / "sft")
    if "grpo" in cfg.methods:
        train("grpo", cfg.grpo, train_grpo)
        evaluate("grpo", out / "grpo")
    if cfg.process.enabled:
        _process_stages(run, cfg.process, out, data, console)
    run.stage("report", False, lambda: build_report(out), console)
    return out / "report.html"


def _process_stages(run: StageLog, p: ProcessSettings, out: Path, data: Path, console) -> None:
    """arith-prm from the SFT policy → step PRM (from the SFT model) → PRM eval (held out) → best-of-N (test)."""
    from posttrainlab.eval import best_of_n, prm_eval
    from posttrainlab.label.arith_prm import build
    from posttrainlab.train.prm import train_prm

    policy, prm_data, prm_dir = out / "sft", out / "arith-prm", out / "prm"
    run.stage(
        "arith-prm",
        (prm_data / "manifest.json").is_file(),
        lambda: build(policy, data, prm_data, k=p.k, limit=p.limit, temperature=p.temperature),
        console,
    )
    run.stage("prm", (prm_dir / "prm_config.json").is_file(), lambda: train_prm(p.prm), console)
    target = out / "prm-eval"
    run.stage(
        "eval-prm",
        (target / "metrics.json").is_file(),
        lambda: prm_eval.run(prm_dir, prm_data / "step" / "heldout.jsonl", target),
        console,
    )
    bon = out / "best-of-n"
    run.stage(
        "best-of-n",
        (bon / "bon.json").is_file(),
        lambda: best_of_n.run(policy, prm_dir, data, bon, n=p.bon_n, limit=p.bon_limit, temperature=p.bon_temperature),
        console,
    )


def _real_base(run: StageLog, source: str, console) -> Path:
    """The run's start when ``base_model`` is set: a model folder as it is, else an import (cached by GGUF hash)."""
    from posttrainlab.models.gguf_import import import_model, is_import_source

    if not is_import_source(source):
        from posttrainlab.models.loading import check_folder

        run.state["base_model"] = str(check_folder(source))
        return Path(source)
    found: dict[str, Path] = {}

    def go() -> None:
        found["folder"] = import_model(source)[0]

    run.stage("import", False, go, console)
    run.state["base_model"] = f"{source} ({found['folder']})"
    return found["folder"]


def _quiet_library_bars() -> None:
    """Turn off datasets' map bars and transformers' weight-loading bars: a dozen a stage, they bury
    the stage headers and the training bars (``posttrain train ...`` alone keeps them)."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def _link_base(out: Path, base: Path) -> None:
    """``OUT/base`` points at the cached base, so the run folder shows every model it used."""
    link = out / "base"
    if link.is_symlink():
        if link.readlink() == base:
            return
        link.unlink()
    elif link.exists():
        return  # a real folder of the user's: leave it
    link.symlink_to(base, target_is_directory=True)
