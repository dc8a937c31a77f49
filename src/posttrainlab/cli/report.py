"""``posttrain report RUN_DIR``: write the Markdown and HTML report of a quickstart run folder.

A thin verb over ``posttrainlab.report.build_report``; ``posttrain quickstart`` writes the same report
as its last stage, and this verb rebuilds it (after editing a run by hand, or for an older run).

    posttrain report runs/quickstart    # -> runs/quickstart/report.md, report.html, report_files/*.png

It writes only into a run folder: one holding ``run.json`` (what the quickstart writes first). A folder without it
is refused in one line (exit 2), so the user's own ``report.md`` in any other folder is never replaced (issue #42).

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
    from posttrainlab.errors import BadInput
    from posttrainlab.report import build_report
    from posttrainlab.run_layout import RUN_JSON

    if run_dir.is_dir() and not (run_dir / RUN_JSON).is_file():
        raise BadInput(
            f"{run_dir}: no {RUN_JSON}, so not a run folder; `posttrain report` writes report.md and report.html only "
            "into a run folder (`posttrain quickstart --out DIR`)"
        )
    md_path, html_path = build_report(run_dir)
    typer.echo(f"wrote {md_path} and {html_path}")


def register(app: typer.Typer) -> None:
    """Add ``report`` as a top-level verb of ``app``."""
    app.command("report")(report)
