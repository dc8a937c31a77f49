"""How the report writes numbers: percentages, intervals, durations.

One place for the cell formats every report section uses (``report.build``, ``report.paired``), so a
share reads ``43.0%`` and an interval ``[38.7, 47.4]`` everywhere in ``report.md`` and ``report.html``.
A paired difference and its p-value are written by ``eval.compare.points`` and ``eval.compare.p_value``,
which ``posttrain eval compare`` prints too.
"""

from __future__ import annotations

from posttrainlab.report.plots import Stat, stat


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage with ``digits`` decimals; ``–`` when there is none (the report's cells and every
    verb's printed numbers).

    >>> pct(0.43), pct(None), pct(0.123456, 2)
    ('43.0%', '–', '12.35%')
    """
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def value(obj) -> float | None:
    """The number in ``{"value": x, ...}`` or a bare number; ``None`` if there is none.

    >>> value({"value": 0.25, "ci95": [0.2, 0.3]}), value(0.98), value(None)
    (0.25, 0.98, None)
    """
    s = stat(obj)
    return None if s is None else s.value


def with_ci(s: Stat | None) -> str:
    """``43.0% [38.7, 47.4]``: value and 95% interval, in percent.

    >>> with_ci(Stat(0.43, 0.387, 0.474)), with_ci(Stat(0.5, None, None)), with_ci(None)
    ('43.0% [38.7, 47.4]', '50.0%', '–')
    """
    if s is None:
        return "–"
    return pct(s.value) if s.lo is None else f"{pct(s.value)} [{100 * s.lo:.1f}, {100 * s.hi:.1f}]"


def duration(seconds: float) -> str:
    """Seconds as ``12.3 s``, ``4 min 05 s`` or ``1 h 02 min``.

    >>> duration(12.34), duration(245), duration(3725)
    ('12.3 s', '4 min 05 s', '1 h 02 min')
    """
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
