"""Plots and the Markdown/HTML report of a quickstart run (``posttrain report RUN_DIR``).

``build_report(run_dir)`` reads a run folder and writes ``report.md``, a self-contained
``report.html`` and the plots in ``report_files/``. Importing this package does not import matplotlib;
only drawing a plot does.
"""

from posttrainlab.report.build import build_report, load_run

__all__ = ["build_report", "load_run"]
