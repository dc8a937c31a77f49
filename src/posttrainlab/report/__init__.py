"""Plots and the Markdown/HTML report of a quickstart run (``posttrain report RUN_DIR``).

``build_report(run_dir)`` reads a run folder and writes ``report.md``, a self-contained
``report.html`` and the plots in ``report_files/``. Importing this package does not import matplotlib;
only drawing a plot does.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (``__getattr__``)
    from posttrainlab.report.build import build_report, load_run

__all__ = ["build_report", "load_run"]


def __getattr__(name: str) -> Any:
    """``build_report`` and ``load_run``, imported on first use: ``report.format`` (what the CLI prints numbers with)
    stays light."""
    if name in __all__:
        from posttrainlab.report import build

        return getattr(build, name)
    raise AttributeError(f"module 'posttrainlab.report' has no attribute {name!r}")
