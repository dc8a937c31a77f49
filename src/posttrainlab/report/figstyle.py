"""The house style of every figure the lab writes: size, resolution, fonts, labels, panel grids.

One place for what makes a figure one you would share (issue #17), used by the report's plots
(``posttrainlab.report.plots``) and the PRM evaluation's (``posttrainlab.runners.prm_plots``):

- 150 dpi (``_DPI``); the PNG's pHYs chunk says so;
- no text under ``FONT_MIN`` (8 pt) at the drawn size, and no figure wider than ``MAX_WIDTH_IN``, so
  ``report.html`` (a 62rem column, ~960 CSS px, images at their pixel size: report/render.py) never shows
  one smaller than drawn;
- category tick labels wrapped (``wrap``) so neighbours do not overlap; value axes name their unit (``style``).

Matplotlib is imported only inside ``figure`` (docs/design.md "Layers": importing ``posttrainlab.report`` stays
cheap), and figures are drawn on an explicit Agg canvas, not through pyplot, so no global backend is switched
and no display is needed.
"""

from __future__ import annotations

import io
import math
import textwrap

_DPI = 150
FONT_MIN = 8  # pt: tick labels, legends, bar annotations
FONT = {"legend": FONT_MIN, "label": 9, "title": 10}
MAX_WIDTH_IN = 10.0  # report.html's column: ~960 CSS px at 96 px/in
PANELS_PER_ROW = 3


def wrap(label: str, width: int = 12) -> str:
    """A category name as a tick label: underscores to spaces, wrapped at ``width`` so neighbours never overlap.

    >>> wrap("inconsistent_answer"), wrap("multiplication"), wrap("overall")
    ('inconsistent\\nanswer', 'multiplication', 'overall')
    """
    return textwrap.fill(label.replace("_", " "), width, break_long_words=False, break_on_hyphens=False)


def figure(width: float, height: float):
    """A matplotlib Figure on its own Agg canvas (no pyplot, no global backend), ``width`` x ``height`` inches."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if width > MAX_WIDTH_IN:
        raise ValueError(f"a {width:.1f} in figure is shown smaller than drawn; keep it within {MAX_WIDTH_IN} in")
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, reproducible for the same inputs."""
    buf = io.BytesIO()
    # No "Software" stamp, so the same inputs give the same bytes on every matplotlib patch release.
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def rendered(fig) -> bytes | None:
    """``png_bytes(fig)``, or ``None`` for no figure (its input held nothing to draw)."""
    return None if fig is None else png_bytes(fig)


def style(ax, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None, grid: str = "both"):
    """The house look of one Axes: labels at ``FONT`` sizes, ticks at ``FONT_MIN``, a light grid."""
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=FONT["label"])
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=FONT["label"])
    if title:
        ax.set_title(title, fontsize=FONT["title"])
    ax.tick_params(labelsize=FONT_MIN)
    ax.grid(axis=grid, alpha=0.3)


def grid_shape(n: int) -> tuple[int, int]:
    """``(rows, cols)`` for ``n`` panels: rows of at most ``PANELS_PER_ROW``, as even as they go.

    >>> grid_shape(1), grid_shape(3), grid_shape(4), grid_shape(5)
    ((1, 1), (1, 3), (2, 2), (2, 3))
    """
    rows = math.ceil(n / PANELS_PER_ROW)
    return rows, math.ceil(n / rows)


def grid_of(fig, n: int) -> list:
    """``n`` Axes laid out by ``grid_shape``, spare cells removed."""
    axes = list(fig.subplots(*grid_shape(n), squeeze=False).flat)
    for ax in axes[n:]:
        fig.delaxes(ax)
    return axes[:n]
