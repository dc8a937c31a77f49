"""``run_quickstart``: check the run folder, then walk the stage table (``plan.STAGES``) in order (``run_stages``,
which ``study.plan`` walks its own table with).

Nothing is written before ``record.StageRecords.check`` has accepted the folder for every planned stage; a stage
is reused when its marker is there and its record matches this run's settings (``record``).
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.quickstart.config import QuickstartConfig, check_config, method_recipe, place
from posttrainlab.quickstart.plan import Run, Stage, plan
from posttrainlab.quickstart.record import StageRecords, model_hashes
from posttrainlab.quickstart.stages import StageLog
from posttrainlab.run_layout import STAGE_LOG, RunLayout


def run_quickstart(out: str | Path, cfg: QuickstartConfig, console=None) -> Path:
    """Run every stage into ``out``; return the path of report.html."""
    check_config(cfg)
    layout = RunLayout(Path(out))
    r = Run(cfg, layout, base=known_base(cfg))
    place(cfg, layout, r.base)
    run_stages(r, plan(r), console)
    return layout.report_html


def run_stages(r: Run, stages: list[Stage], console=None, *, logged=None, log_name: str = STAGE_LOG) -> None:
    """Check ``r``'s run folder for ``stages``, then run each in order: the quickstart's table, or another job's built
    on it (``study.plan``). ``logged``: the settings ``run.json`` records (default ``r.cfg``); ``log_name``: the
    stage log's file in the run folder. A stage named ``report`` is rebuilt every time and not recorded."""
    from rich.console import Console

    from posttrainlab.progress import quiet_libraries

    console = console or Console()
    quiet_libraries()
    layout = r.layout
    records = StageRecords(layout)
    records.check(stages)  # before anything is written
    layout.root.mkdir(parents=True, exist_ok=True)
    log = StageLog(layout.root, r.cfg if logged is None else logged, [s.name for s in stages], log_name=log_name)
    log.state["base_model"] = str(r.base) if r.base is not None else r.cfg.base_model
    weights: dict[str, dict[str, str]] = {}
    for stage in stages:
        if stage.name == "report":
            _record_provenance(log, r, r.cfg, weights)
        if stage.name in ("sft", "eval-base"):
            _link_base(layout, r.base)  # the base is known: pretrain or import ran before
        cached = stage.done()  # check() refused any record of other settings, and any output without a record
        if stage.name != "report" and not cached:
            records.started(stage)
        log.stage(stage.name, cached, stage.run, console)
        if stage.name != "report":
            weights[stage.name] = records.finished(stage)


def known_base(cfg: QuickstartConfig) -> Path | None:
    """The base before any stage runs: the tiny base's cache path or a model folder (an import's: once it ran)."""
    from posttrainlab.models.gguf_import import is_import_source
    from posttrainlab.train.pretrain import base_cache_path

    if cfg.base_model is None:
        return base_cache_path(cfg.base)
    if is_import_source(cfg.base_model):
        return None
    from posttrainlab.models.loading import check_folder

    return Path(check_folder(cfg.base_model))


def _record_provenance(log: StageLog, r: Run, cfg: QuickstartConfig, weights: dict) -> None:
    """``run.json``: the base, the SHA-256 of every model's weights, commit, versions, device, threads, seeds."""
    from posttrainlab.provenance import provenance

    if r.base is not None:
        named = cfg.base_model not in (None, str(r.base))
        log.state["base_model"] = f"{cfg.base_model} ({r.base})" if named else str(r.base)
        weights = {"base": model_hashes(r.base, r.layout), **weights}
    log.state["weights"] = {name: w for name, w in weights.items() if w}
    seeds = {m: [method_recipe(cfg, m, k).optim.seed for k in range(cfg.seeds)] for m in ("sft", *cfg.methods)}
    log.state["provenance"] = provenance(seeds=seeds)
    log.save()


def _link_base(layout: RunLayout, base: Path | None) -> None:
    """``OUT/base`` points at the base model, so the run folder shows every model it used (checked beforehand:
    anything else there was refused by ``record``)."""
    link = layout.base
    if base is None:
        raise RuntimeError("the base model is not known yet (the pretrain or import stage did not run)")
    if link.is_symlink():
        if link.readlink() == base:
            return
        link.unlink()
    link.symlink_to(base, target_is_directory=True)
