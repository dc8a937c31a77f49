"""``run_quickstart``: check the run folder, then walk the stage table (``plan.STAGES``) in order (``run_stages``,
which ``study.plan`` walks its own table with).

A run holds the folder's writer lock (``writer_lock``) from start to end, so a second writer is refused at once.
Nothing is written before ``record.StageRecords.check`` has accepted the folder for every planned stage; a stage
is reused when its record matches this run's settings and what it made is unchanged (``record``), else it runs
again with every stage that reads it (or, ``rerun=False``, the run is refused).
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.quickstart.config import QuickstartConfig, check_config, method_recipe, place
from posttrainlab.quickstart.plan import Run, Stage, plan
from posttrainlab.quickstart.record import StageRecords, model_hashes
from posttrainlab.quickstart.stage_log import StageLog
from posttrainlab.run_layout import STAGE_LOG, RunLayout


def run_quickstart(out: str | Path, cfg: QuickstartConfig, console=None, *, rerun: bool = True) -> Path:
    """Run every stage into ``out``; return the path of report.html (``rerun``: ``run_stages``)."""
    check_config(cfg)
    layout = RunLayout(Path(out))
    r = Run(cfg, layout, base=known_base(cfg))
    place(cfg, layout, r.base)
    run_stages(r, plan(r), console, rerun=rerun)
    return layout.report_html


def run_stages(r: Run, stages: list[Stage], console=None, *, logged=None, log_name: str = STAGE_LOG,
               rerun: bool = True) -> None:  # fmt: skip
    """Check ``r``'s run folder for ``stages``, then run each in order: the quickstart's table, or another job's built
    on it (``study.plan``). ``logged``: the settings ``run.json`` records (default ``r.cfg``); ``log_name``: the
    stage log's file in the run folder; ``rerun``: run a finished stage whose outputs changed again (with what reads
    it), else refuse. A ``rebuilt`` stage (the report) runs every time and is not recorded."""
    from posttrainlab.writer_lock import writer_lock

    with writer_lock(r.layout.root):
        _run_stages(r, stages, console, logged=logged, log_name=log_name, rerun=rerun)


def _run_stages(r: Run, stages: list[Stage], console, *, logged, log_name: str, rerun: bool) -> None:
    from rich.console import Console

    from posttrainlab.errors import BadInput
    from posttrainlab.progress import quiet_libraries
    from posttrainlab.quickstart.stage_log import utc_now

    console = console or Console()
    quiet_libraries()
    layout = r.layout
    records = StageRecords(layout)
    records.check(stages)  # before anything is written
    stale = records.stale(stages)
    if stale and not rerun:
        shown = "; ".join(f"{name}: {why}" for name, why in stale.items())
        raise BadInput(f"{layout.root}: finished stages no longer match what they made ({shown}); run without "
                       f"--no-rerun to make them again")  # fmt: skip
    layout.root.mkdir(parents=True, exist_ok=True)
    now = utc_now().replace(":", "")
    for stage in (s for s in stages if s.name in stale):
        moved = records.forget(stage, now)
        kept = f"; its old folder is {moved}" if moved else ""
        console.print(f"[yellow]stage {stage.name} runs again: {stale[stage.name]}{kept}[/yellow]")
    log = StageLog(layout.root, r.cfg if logged is None else logged, [s.name for s in stages], log_name=log_name)
    log.state["base_model"] = str(r.base) if r.base is not None else r.cfg.base_model
    weights: dict[str, dict[str, str]] = {}
    for stage in stages:
        if stage.rebuilt:
            _record_provenance(log, r, r.cfg, weights)
        if stage.reads_base:
            _link_base(layout, r.base)  # the base is known: pretrain or import ran before
        cached = not stage.rebuilt and stage.done()  # check() refused other settings, stale() what changed
        if not stage.rebuilt and not cached:
            records.started(stage)
        log.stage(stage.name, cached, stage.run, console)
        if not stage.rebuilt:
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
    log.record_invocation(provenance(seeds=seeds))


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
