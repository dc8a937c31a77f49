"""``posttrain report RUN_DIR``: write the Markdown and HTML report of a quickstart run folder.

A thin verb over ``posttrainlab.report.build_report``; ``posttrain quickstart`` writes the same report
as its last stage, and this verb rebuilds it (after editing a run by hand, or for an older run).

    posttrain report runs/quickstart    # -> runs/quickstart/report.md, report.html, report_files/*.png

``register(app)`` adds the verb to the top-level ``posttrain`` app.
"""

from __future__ import annotations

from pathlib import Path

import typer


def report(
    run_dir: Path = typer.Argument(
        ..., help="A quickstart run folder (with run.json, */train_log.jsonl, eval/*/metrics.json)."
    ),
) -> None:
    """Write RUN_DIR/report.md and a self-contained RUN_DIR/report.html with plots."""
    from posttrainlab.report import build_report

    md_path, html_path = build_report(run_dir)
    typer.echo(f"wrote {md_path} and {html_path}")


def register(app: typer.Typer) -> None:
    """Add ``report`` as a top-level verb of ``app``."""
    app.command("report")(report)
