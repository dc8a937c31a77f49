"""``posttrain study …``: studies built on the lab's stages; ``label-sources`` (docs/label-sources.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import OUT, out_folder

study_app = typer.Typer(
    help="Studies built on the lab's stages: label-sources (exact vs Monte-Carlo vs judge labels -> PRM -> search).",
    no_args_is_help=True,
)


@study_app.command("label-sources")
def label_sources(
    config: str = typer.Option(
        "label-sources",
        "--config",
        help="label-sources (the measured preset, ~30 min on 2 cores with the base cached) or smoke: "
        "configs/study/NAME.yaml; or a YAML file of your own.",
    ),
    out: Path = typer.Option(
        Path("runs/label-sources"), *OUT, parser=out_folder, help="Study folder (stages already done there are reused)."
    ),
    from_run: Path | None = typer.Option(
        None, "--from", help="A quickstart run folder: label with its SFT model instead of training one here."
    ),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the resolved config as YAML and exit (nothing is run or written)."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show the libraries' progress bars and notes too (datasets, transformers, TRL)."
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. mc.ns=[1,4] judge.noise=[0.2]."),
) -> None:
    """One set of policy solutions labelled by every source (exact, Monte-Carlo N, judge noise p), a step PRM per
    source, each scored against exact labels and in best-of-N, with each source's labelling cost.

    Each stage prints ``stage i/M: NAME`` and its time; ``OUT/study.log`` gets a line at each start and end; a killed
    study started again carries on. Writes OUT/report.md, OUT/quality_vs_cost.png and OUT/study.json.
    """
    from rich.console import Console

    from posttrainlab.progress import quiet_libraries
    from posttrainlab.study import run_study, study_config

    cfg = study_config(config, overrides)
    if print_config:
        from posttrainlab.config import to_yaml

        typer.echo(to_yaml(cfg), nl=False)
        return
    quiet_libraries(verbose)
    console = Console()
    md = run_study(out, cfg, from_run, console)
    import json

    from posttrainlab.study.layout import STUDY_JSON
    from posttrainlab.study.report import main_table

    typer.echo("\n".join(main_table(json.loads((md.parent / STUDY_JSON).read_text(encoding="utf-8")))))
    typer.echo(f"report: {md}")
