"""What makes a figure one you would share, as checks on a PNG and on a drawn matplotlib Figure (issue #17).

Used by tests/report/test_plots.py and tests/runners/test_prm_plots.py (importable from any test folder:
tests/conftest.py puts ``tests/`` on ``sys.path``). They read what a reader gets: the PNG's own header
(size in pixels, the pHYs resolution) and the text objects of the drawn figure with their sizes and boxes.
"""

from __future__ import annotations

import struct
from itertools import combinations

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_chunks(data: bytes) -> dict[bytes, bytes]:
    """The chunks of a PNG file by type (the first of each type), read from its bytes."""
    assert data[:8] == PNG_MAGIC, "not a PNG"
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        chunks.setdefault(kind, data[at + 8 : at + 8 + length])
        at += 12 + length
    return chunks


def png_size_dpi(data: bytes) -> tuple[int, int, float]:
    """``(width px, height px, dots per inch)`` from the IHDR and pHYs chunks (pHYs in pixels per metre)."""
    chunks = png_chunks(data)
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    x_ppm, y_ppm, unit = struct.unpack(">IIB", chunks[b"pHYs"])
    assert unit == 1 and x_ppm == y_ppm, "pHYs not in pixels per metre, or not square"
    return width, height, x_ppm * 0.0254


def texts(fig) -> list:
    """Every visible, non-empty text of the drawn figure (tick labels exist only after a draw)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def smallest_font(fig) -> float:
    return min(t.get_fontsize() for t in texts(fig))


def overlapping_ticks(fig) -> list[tuple[str, str]]:
    """Pairs of neighbouring x tick labels, on any Axes, whose drawn boxes overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
        out += [(a, b) for (a, ba), (b, bb) in combinations(boxes, 2) if ba.overlaps(bb)]
    return out


def texts_outside(fig) -> list[str]:
    """The texts of the drawn figure that reach beyond its edges (cut off in the PNG), by their words."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    out = []
    for t in texts(fig):
        b = t.get_window_extent(renderer)
        if b.x0 < box.x0 - 0.5 or b.x1 > box.x1 + 0.5 or b.y0 < box.y0 - 0.5 or b.y1 > box.y1 + 0.5:
            out.append(t.get_text())
    return out
