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
        help="default (the main job; on 2 cores ~35 min the first run, 17-21 min with the base cached), scarce (RFT "
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
    md = html.with_suffix(".md")
    console.print(_section(md.read_text(encoding="utf-8"), "## Results") if md.is_file() else "")
    console.print(f"report: {md} and {html}")


def _section(markdown: str, heading: str) -> str:
    """The table under ``heading`` in the report (what a newcomer wants to see first)."""
    lines = markdown.splitlines()
    if heading not in lines:
        return ""
    body = lines[lines.index(heading) + 1 :]
    table = [line for line in body[: next((i for i, x in enumerate(body) if x.startswith("#")), len(body))]]
    return "\n".join(line for line in table if line.startswith("|"))


def register(app: typer.Typer) -> None:
    app.command("quickstart")(quickstart)
