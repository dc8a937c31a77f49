"""The PRM evaluation's plots, each a function from a metrics dict to PNG bytes (or ``None``).

Drawn in the house style of ``posttrainlab.report.figstyle`` (150 dpi, no text under 8 pt, units on every
axis; matplotlib imported lazily on an explicit Agg canvas, PNG bytes without a "Software" stamp so the same
numbers give the same file). Kept in ``eval`` because ``eval prm`` and ``eval best-of-n`` write them beside
their metrics; the report embeds the bytes as they are. Each ``*_figure`` function returns the Figure its
PNG function renders, so tests read what is drawn.

Best-of-N curves must stay apart where they coincide: selectors often tie within their 95% intervals
(at n = 1 every selector picks sample 0, so all of them sit on one point). Each selector has its own colour,
marker and line style, and its points and error bars are dodged sideways by a small, fixed share of an
octave on the log2 axis (``DODGE``), so equal intervals show as a row of bars, not one bar; the oracle
(pass@n, an upper bound no selector can pass) is a thick dashed grey line with a band, not a selector look.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.report.figstyle import FONT, figure, rendered, style

SELECTOR_COLORS = {
    "oracle": "#7f7f7f",
    "majority": "#1f77b4",
    "prm_vote": "#9467bd",
    "prm_min": "#2ca02c",
    "prm_last": "#ff7f0e",
    "prm_product": "#d62728",
    "prm_mean": "#8c564b",
    "orm": "#e377c2",
    "orm_vote": "#17becf",
}
# (marker, line style) per selector; unknown selectors cycle through OTHER_STYLES
SELECTOR_STYLES = {
    "majority": ("o", "-"),
    "prm_vote": ("s", "-."),
    "prm_min": ("D", "-"),
    "prm_last": ("v", "--"),
    "prm_product": ("^", ":"),
    "prm_mean": ("P", "-."),
    "orm": ("<", "--"),
    "orm_vote": (">", ":"),
}
OTHER_STYLES = (("X", "-"), ("*", "--"), ("h", ":"))
DODGE = 0.06  # log2 units between neighbouring selectors at one n (an octave is 1)


def reliability_figure(calibration: dict[str, Any], title: str = "PRM step scores"):
    """The Figure of ``reliability_png`` (``None`` when every bin is empty)."""
    bins = [b for b in calibration.get("bins", []) if b.get("count")]
    if not bins:
        return None
    fig = figure(4.6, 4.9)
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    width = bins[0]["upper"] - bins[0]["lower"]
    centres = [(b["lower"] + b["upper"]) / 2 for b in bins]
    top.bar(centres, [b["accuracy"] for b in bins], width * 0.9, color="#1f77b4", alpha=0.75, label="accuracy")
    top.plot([0, 1], [0, 1], color="#555555", linewidth=0.8, linestyle="--", label="perfect calibration")
    top.plot(
        [b["mean_confidence"] for b in bins],
        [b["accuracy"] for b in bins],
        color="#d62728",
        marker="o",
        markersize=3,
        linewidth=1,
        label="(mean score, accuracy)",
    )
    top.set_xlim(0, 1)
    top.set_ylim(0, 1.02)
    ece = calibration.get("ece")
    heading = f"{title}: ECE {ece:.3f} ({calibration.get('n_bins')} bins)" if ece is not None else title
    style(top, ylabel="share of correct steps (0-1)", title=heading)
    top.legend(fontsize=FONT["legend"], loc="upper left", frameon=False)
    bottom.bar(centres, [b["count"] for b in bins], width * 0.9, color="#7f7f7f")
    style(bottom, xlabel="predicted P(correct) (step score, 0-1)", ylabel="steps", grid="y")
    return fig


def reliability_png(calibration: dict[str, Any], title: str = "PRM step scores") -> bytes | None:
    """Reliability diagram: accuracy against mean P(correct) per non-empty bin, bin counts below.

    ``calibration`` is ``prm_metrics(...)["calibration"]``; ``None`` when every bin is empty.
    """
    return rendered(reliability_figure(calibration, title))


def curve_label(name: str, bon: dict[str, Any]) -> str:
    """The legend entry of one curve.

    >>> curve_label("oracle", {}), curve_label("prm_vote", {"vote_aggregation": "last"}), curve_label("prm_min", {})
    ('oracle (pass@n)', 'prm_vote (last)', 'prm_min')
    """
    if name == "oracle":
        return "oracle (pass@n)"
    return f"prm_vote ({bon.get('vote_aggregation', 'min')})" if name == "prm_vote" else name


def best_of_n_figure(bon: dict[str, Any]):
    """The Figure of ``best_of_n_png`` (``None`` when ``bon`` holds no curve)."""
    curves = {"oracle": bon.get("oracle", {}), **bon.get("selectors", {})}
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return None
    fig = figure(7.2, 4.0)
    ax = fig.subplots()
    selectors = [k for k in curves if k != "oracle"]
    top = 0.0
    for name, by_n in curves.items():
        ns = sorted(int(n) for n in by_n)
        values = [100 * by_n[str(n)]["value"] for n in ns]
        lo = [100 * by_n[str(n)]["ci95"][0] for n in ns]
        hi = [100 * by_n[str(n)]["ci95"][1] for n in ns]
        top = max(top, *hi)
        color, label = SELECTOR_COLORS.get(name, "#444444"), curve_label(name, bon)
        if name == "oracle":
            ax.fill_between(ns, lo, hi, color=color, alpha=0.15, linewidth=0)
            ax.plot(ns, values, "--", color=color, linewidth=2.2, marker="o", markersize=3, label=label)
            continue
        j = selectors.index(name)
        marker, line = SELECTOR_STYLES.get(name, OTHER_STYLES[j % len(OTHER_STYLES)])
        shift = 2 ** (DODGE * (j - (len(selectors) - 1) / 2))  # a fixed step in log2 x: same gap at every n
        err = [[v - a for v, a in zip(values, lo, strict=True)], [b - v for v, b in zip(values, hi, strict=True)]]
        ax.errorbar(
            [n * shift for n in ns], values, yerr=err, color=color, marker=marker, markersize=4, linestyle=line,
            linewidth=1.3, elinewidth=0.9, capsize=2, label=label,
        )  # fmt: skip
    ax.set_xscale("log", base=2)
    all_ns = sorted({int(n) for by_n in curves.values() for n in by_n})
    ax.set_xticks(all_ns, [str(n) for n in all_ns])
    ax.minorticks_off()
    ax.set_ylim(0, min(100.0, max(10.0, 1.1 * top)))  # room for the bars; near-0 policies stay readable
    style(
        ax,
        xlabel="n (samples per problem, log2 scale)",
        ylabel="accuracy (% of problems)",
        title=f"Best-of-n on {bon.get('problems', '?')} problems (error bars, oracle band: 95% Wilson)",
    )
    ax.legend(fontsize=FONT["legend"], loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


def best_of_n_png(bon: dict[str, Any]) -> bytes | None:
    """Accuracy against n (log2 axis), one dodged line per selector with 95% error bars, the oracle banded."""
    return rendered(best_of_n_figure(bon))


__all__ = ["best_of_n_figure", "best_of_n_png", "reliability_figure", "reliability_png"]
