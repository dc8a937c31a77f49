"""The study's stage table (``STAGES``) and ``run_study``, which walks it with the quickstart's runner.

The study is a run folder of the quickstart's kind: its stages are ``quickstart.plan.Stage`` rows, recorded in
``stages.json`` by ``quickstart.record`` and run by ``quickstart.run.run_stages``, so it prints the same numbered
stage lines, refuses a folder made with other settings, reuses finished stages and resumes a killed one (a training
stage from its last checkpoint, ``label mc`` and ``annotate`` from their run files). Its input policy is the SFT model
of ``--from RUN``, or the quickstart's own prepare, pretrain (the cached base) and SFT stages, taken from the
quickstart's table (``quickstart.plan.plan``) and run into the study folder. The study's stages, in order:

    solutions -> label-exact, label-mc-<N>..., label-judge-<p>..., label-judge-model -> bon-samples
    -> per source: prm-<source> (none for the baseline), eval-<source> -> report
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.quickstart.plan import Stage
from posttrainlab.run_layout import BON, PRM_CONFIG
from posttrainlab.study.config import StudyConfig
from posttrainlab.study.layout import COST, LOG, SKIPPED, StudyLayout, labellings, noise_name, sources

#: the quickstart's stages that make the policy when ``--from`` is not given
POLICY_STAGES = ("prepare", "pretrain", "import", "sft")


@dataclass
class StudyRun:
    """What the study's stages share: the config, the layout, the policy and the stages that make it."""

    cfg: StudyConfig
    layout: StudyLayout
    policy: Path
    made_by: tuple[str, ...] = ()  # ("sft",) when the study trains the policy itself
    identity: dict[str, Any] = field(default_factory=dict)  # the policy's path and, from --from, its weights' SHA-256


def _either(*files: Path) -> Callable[[], bool]:
    return lambda: any(f.is_file() for f in files)


def _solutions(s: StudyRun) -> list[Stage]:
    from posttrainlab.study.labels import sample_solutions

    L = s.layout
    return [
        Stage(
            "solutions",
            partial(sample_solutions, s.policy, L.data, L, s.cfg.solutions),
            {"solutions": s.cfg.solutions, "policy": s.identity},
            marker=L.heldout_solutions,
            after=("prepare", *s.made_by),
            folder=L.solutions,
        )
    ]


def _labelling(s: StudyRun, name: str, kind: str) -> tuple[Callable[[], None], dict[str, Any], tuple[str, ...]]:
    """``(run, settings, stages it reads besides solutions)`` of one label stage."""
    from posttrainlab.study import labels

    cfg, L = s.cfg, s.layout
    if kind == "exact":
        return partial(labels.label_exact, L), {"labels": "every-step"}, ()
    if kind == "mc":
        n = int(name.split("-", 1)[1])
        mc = {k: v for k, v in asdict(cfg.mc).items() if k not in ("ns", "soft")}
        return partial(labels.label_mc, s.policy, L, n, cfg.mc), {"n": n, **mc, "policy": s.identity}, s.made_by
    judge = {k: getattr(cfg.judge, k) for k in ("seed", "max_tokens", "max_attempts")}
    noise = {f"judge-{noise_name(p)}": p for p in cfg.judge.noise}.get(name)  # None: judge-model
    run = partial(labels.label_judge, L, name, cfg.judge, noise, cfg.solutions.train_split)
    return run, {"noise": noise} | judge if noise is not None else {"model": cfg.judge.model} | judge, ()


def _labels(s: StudyRun) -> list[Stage]:
    stages = []
    for name, kind in labellings(s.cfg):
        run, settings, after = _labelling(s, name, kind)
        folder = s.layout.labels(name)
        stages.append(
            Stage(f"label-{name}", run, settings, marker=folder / COST, after=("solutions", *after), folder=folder)
        )
    return stages


def _bon_samples(s: StudyRun) -> list[Stage]:
    from posttrainlab.study.evaluate import sample_bon

    L = s.layout
    return [
        Stage(
            "bon-samples",
            partial(sample_bon, s.cfg, L, s.policy),
            {"bon": s.cfg.bon, "policy": s.identity},
            marker=L.bon_samples / BON,
            after=("prepare", *s.made_by),
            folder=L.bon_samples,
        )
    ]


def _sources(s: StudyRun) -> list[Stage]:
    """Per source: its PRM (from the policy, on its labels), then its evaluation (held out, best-of-N)."""
    from posttrainlab.quickstart.plan import prm_record
    from posttrainlab.study.evaluate import evaluate_source, recipe_of, train_source

    L, cfg, stages = s.layout, s.cfg, []
    for source in sources(cfg):
        trained: tuple[str, ...] = s.made_by
        if source.labelling is not None:
            prm = L.prm_of(source.name)
            stages.append(
                Stage(
                    f"prm-{source.name}",
                    partial(train_source, cfg, L, source, s.policy),
                    {"recipe": prm_record(recipe_of(cfg, L, source, s.policy)), "policy": s.identity},
                    is_done=_either(prm / PRM_CONFIG, prm / SKIPPED),
                    after=(f"label-{source.labelling}", *s.made_by),
                    folder=prm,
                    models=(prm,),
                )
            )
            trained = (f"prm-{source.name}",)
        ev = L.evaluation(source.name)
        stages.append(
            Stage(
                f"eval-{source.name}",
                partial(evaluate_source, cfg, L, source, s.policy),
                {"eval": cfg.eval, "bon": cfg.bon, "policy": s.identity},
                is_done=_either(ev / "bon" / BON, ev / SKIPPED),
                after=("solutions", "bon-samples", *trained),
                folder=ev,
            )
        )
    return stages


def _report(s: StudyRun) -> list[Stage]:
    from posttrainlab.study.report import write_report

    return [Stage("report", partial(write_report, s.cfg, s.layout, s.identity), None, rebuilt=True)]


#: the study after its policy, in order: each row adds the stages it runs for a config
STAGES: tuple[Callable[[StudyRun], list[Stage]], ...] = (_solutions, _labels, _bon_samples, _sources, _report)


def plan(s: StudyRun) -> list[Stage]:
    return [stage for row in STAGES for stage in row(s)]


def from_run(run: str | Path, layout: StudyLayout) -> tuple[Path, dict[str, Any]]:
    """The SFT model of a quickstart run folder and its identity (path, weights' SHA-256); ``BadInput`` if none."""
    from posttrainlab.quickstart.record import model_hashes

    folder = Path(run).expanduser().resolve() / "sft"
    if not (folder / "config.json").is_file():
        raise BadInput(
            f"--from {run}: no SFT model in it ({folder} holds no config.json); name a quickstart run folder"
        )
    return folder, {"policy": str(folder), "weights": model_hashes(folder, layout)}


def study_plan(out: str | Path, cfg: StudyConfig, source_run: str | Path | None = None):
    """``(run, stages)``: what ``run_study`` walks, nothing run or written (``source_run``: module docstring)."""
    from posttrainlab.quickstart.config import place
    from posttrainlab.quickstart.plan import Run
    from posttrainlab.quickstart.plan import plan as quickstart_plan
    from posttrainlab.quickstart.run import known_base
    from posttrainlab.study.config import policy_config

    layout = StudyLayout(Path(out))
    qcfg = policy_config(cfg)
    if source_run is None:
        r = Run(qcfg, layout, base=known_base(qcfg))
        wanted, made_by = POLICY_STAGES, ("sft",)
        policy, identity = layout.model("sft"), {"policy": str(layout.model("sft"))}
    else:
        r = Run(qcfg, layout)
        wanted, made_by = ("prepare",), ()
        policy, identity = from_run(source_run, layout)
    place(qcfg, layout, r.base)
    first = [stage for stage in quickstart_plan(r) if stage.name in wanted]
    return r, first + plan(StudyRun(cfg, layout, policy, made_by, identity))


def run_study(out: str | Path, cfg: StudyConfig, source_run: str | Path | None = None, console=None) -> Path:
    """Run the study into ``out`` (``source_run``: take its SFT model instead of training one); return report.md."""
    from posttrainlab.quickstart.run import run_stages

    r, stages = study_plan(out, cfg, source_run)
    run_stages(r, stages, console, logged=cfg, log_name=LOG)
    return r.layout.report_md


__all__ = ["POLICY_STAGES", "STAGES", "StudyRun", "from_run", "plan", "run_study", "study_plan"]
