"""``posttrain quickstart``: the main job on the embedded default."""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import OUT, out_folder


def quickstart(
    out: Path = typer.Option(
        Path("runs/quickstart"), *OUT, parser=out_folder, help="Run folder (stages already done there are reused)."
    ),
    preset: str = typer.Option(
        "default",
        help="default (the main job; on 2 cores 25-35 min the first run, 13-17 min with the base cached), scarce (RFT "
        "where SFT data are scarce, ~25 min), smoke (the same stages in a few minutes), smollm2 (the real model, "
        "~21 min): configs/quickstart/NAME.yaml; or a preset YAML file of your own (`extends: NAME` starts it from a "
        "preset).",
    ),
    no_rerun: bool = typer.Option(
        False,
        "--no-rerun",
        help="Refuse, instead of running them again, finished stages whose outputs were changed "
        "or deleted since (and the stages that read them).",
    ),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the resolved config as YAML and exit (nothing is run or written)."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show the libraries' progress bars and notes too (datasets, transformers, TRL)."
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. sft.optim.epochs=1."),
) -> None:
    """prepare arith-v1 → pretrain the tiny base (cached) → SFT → eval (greedy, pass@1, maj@8) → arith-prm → PRM →
    PRM eval → best-of-N → beam search → report (README, "The main job"). methods=[rft,sft-continued] adds RFT and
    its more-training control (--preset scarce: where RFT beats it), methods=[dpo,grpo,...] other methods.

    Each stage prints ``stage i/M: NAME`` and its time; ``OUT/quickstart.log`` gets a line at each start and end.
    """
    from rich.console import Console

    from posttrainlab.progress import quiet_libraries
    from posttrainlab.quickstart import quickstart_config, resolved, run_quickstart

    cfg = quickstart_config(preset, overrides)
    if print_config:
        from posttrainlab.config import to_yaml

        typer.echo(to_yaml(resolved(cfg, out)), nl=False)
        return
    quiet_libraries(verbose)
    console = Console()
    html = run_quickstart(out, cfg, console, rerun=not no_rerun)
    summary = _summary(out)
    if summary:
        from rich.markdown import Markdown

        # a log or a pipe gets rich's 80 columns, where the table's labels would be cut: 120 there
        wide = console if console.is_terminal else Console(file=console.file, width=max(console.width, 120))
        wide.print(Markdown(summary))
    console.print(f"report: {html.with_suffix('.md')} and {html}")


def _summary(out: Path) -> str:
    """The report's first lines (is this base the README's?) and its Results table, as Markdown: what a newcomer
    wants to see first. Read from what the report wrote (``report_files/results.json``), so the same numbers."""
    from posttrainlab.data.jsonl import json_object_or_empty
    from posttrainlab.report import results
    from posttrainlab.report.render import to_markdown
    from posttrainlab.report.run_folder import stage_hashes
    from posttrainlab.run_layout import RESULTS_JSON, RunLayout

    layout = RunLayout(out)
    summary = json_object_or_empty(layout.report_files / RESULTS_JSON)
    if not summary:
        return ""
    top = results.headline(summary, stage_hashes(layout))
    return to_markdown(top + results.results_blocks(summary))


def register(app: typer.Typer) -> None:
    app.command("quickstart")(quickstart)
