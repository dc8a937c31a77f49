"""``run_quickstart``: every stage in order, each skipped when its finished marker is there (``StageLog``)."""

from __future__ import annotations

from pathlib import Path

from posttrainlab.quickstart.config import (
    ProcessSettings,
    QuickstartConfig,
    check_config,
    method_recipe,
    place,
    seed_name,
)
from posttrainlab.quickstart.stages import StageLog


def run_quickstart(out: str | Path, cfg: QuickstartConfig, console=None) -> Path:
    """Run every stage into ``out``; return the path of report.html."""
    from rich.console import Console

    from posttrainlab.data.arith.release import prepare
    from posttrainlab.data.manifest import has_manifest
    from posttrainlab.eval.policy import evaluate_policy
    from posttrainlab.progress import quiet_libraries
    from posttrainlab.report.build import build_report
    from posttrainlab.train.common import SUMMARY
    from posttrainlab.train.dpo import train_dpo
    from posttrainlab.train.grpo import train_grpo
    from posttrainlab.train.pretrain import base_cache_path, is_cached, pretrain
    from posttrainlab.train.sft import train_sft

    check_config(cfg)
    console = console or Console()
    quiet_libraries()
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

    trainers = {"sft": train_sft, "dpo": train_dpo, "dpo-policy": train_dpo, "grpo": train_grpo}

    def train(method: str, k: int) -> None:
        name = seed_name(method, k)
        recipe = method_recipe(cfg, method, k)
        run.stage(name, (out / name / SUMMARY).is_file(), lambda: trainers[method](recipe), console)

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
    for method in ("sft", *cfg.methods):  # DPO and GRPO start from OUT/sft, the first seed's SFT model
        for k in range(cfg.seeds):
            train(method, k)
            name = seed_name(method, k)
            evaluate(name, out / name, ref=out / "sft" if method.startswith("dpo") else None)
    if cfg.process.enabled:
        _process_stages(run, cfg.process, out, data, console)
    run.record_provenance(cfg)
    run.stage("report", False, lambda: build_report(out), console)
    return out / "report.html"


def _process_stages(run: StageLog, p: ProcessSettings, out: Path, data: Path, console) -> None:
    """arith-prm from the SFT policy → step PRM (from the SFT model) → PRM eval (held out) → best-of-N (test)."""
    from posttrainlab.eval import beam_search, best_of_n, prm_eval
    from posttrainlab.label.arith_prm import build
    from posttrainlab.train.prm import train_prm

    policy, prm_data, prm_dir = out / "sft", out / "arith-prm", out / "prm"
    run.stage(
        "arith-prm",
        (prm_data / "manifest.json").is_file(),
        lambda: build(
            policy,
            data,
            prm_data,
            k=p.k,
            limit=p.limit,
            temperature=p.temperature,
            reference_splits=p.references,
            reference_limit=p.reference_limit,
        ),
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
    if p.beam.enabled:  # the same problems as best-of-N, at about its token budget (B x M = N)
        b, beam = p.beam, out / "beam-search"
        run.stage(
            "beam-search",
            (beam / "beam.json").is_file(),
            lambda: beam_search.run(
                policy,
                prm_dir,
                data,
                beam,
                beams=b.beams,
                proposals=b.proposals,
                max_steps=b.max_steps,
                temperature=b.temperature,
                aggregation=b.aggregation,
                limit=p.bon_limit,
                best_of_n=bon,
            ),
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
