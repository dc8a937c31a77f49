"""The PRM evaluation's plots, each a function from a metrics dict to PNG bytes (or ``None``).

Drawn with the report's ``figure`` / ``png_bytes`` (``posttrainlab.report.plots``): matplotlib imported lazily,
an explicit Agg canvas (no pyplot, no global backend switch, no display needed), PNG bytes without a
"Software" stamp so the same numbers give the same file. Kept in ``eval`` because ``eval prm`` and
``eval best-of-n`` write them beside their metrics; the report can embed the bytes as they are.

Written by hand: two small figures, not worth a plotting dependency beyond matplotlib.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.report.plots import figure, png_bytes

SELECTOR_COLORS = {
    "oracle": "#9e9e9e",
    "majority": "#1f77b4",
    "prm_vote": "#9467bd",
    "prm_min": "#2ca02c",
    "prm_last": "#ff7f0e",
    "prm_product": "#d62728",
    "prm_mean": "#8c564b",
}


def reliability_png(calibration: dict[str, Any], title: str = "PRM step scores") -> bytes | None:
    """Reliability diagram: accuracy against mean P(correct) per non-empty bin, bin counts below.

    ``calibration`` is ``prm_metrics(...)["calibration"]``; ``None`` when every bin is empty.
    """
    bins = [b for b in calibration.get("bins", []) if b.get("count")]
    if not bins:
        return None
    fig = figure(4.2, 4.6)
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
    top.set_ylabel("share of correct steps", fontsize=8)
    ece = calibration.get("ece")
    top.set_title(
        f"{title}: ECE {ece:.3f} ({calibration.get('n_bins')} bins)" if ece is not None else title, fontsize=9
    )
    top.legend(fontsize=7, loc="upper left")
    top.tick_params(labelsize=7)
    top.grid(alpha=0.3)
    bottom.bar(centres, [b["count"] for b in bins], width * 0.9, color="#7f7f7f")
    bottom.set_xlabel("predicted P(correct)", fontsize=8)
    bottom.set_ylabel("steps", fontsize=8)
    bottom.tick_params(labelsize=7)
    return png_bytes(fig)


def best_of_n_png(bon: dict[str, Any]) -> bytes | None:
    """Accuracy against n (log2 axis), one line per selector with its 95% interval as a band."""
    curves = {"oracle": bon.get("oracle", {}), **bon.get("selectors", {})}
    curves = {k: v for k, v in curves.items() if v}
    if not curves:
        return None
    fig = figure(6.2, 3.8)
    ax = fig.subplots()
    top = 0.0
    for name, by_n in curves.items():
        ns = sorted(int(n) for n in by_n)
        values = [100 * by_n[str(n)]["value"] for n in ns]
        lo = [100 * by_n[str(n)]["ci95"][0] for n in ns]
        hi = [100 * by_n[str(n)]["ci95"][1] for n in ns]
        color = SELECTOR_COLORS.get(name)
        style = "--" if name == "oracle" else "-"
        label = f"prm_vote ({bon.get('vote_aggregation', 'min')})" if name == "prm_vote" else name
        label = "oracle (pass@n)" if name == "oracle" else label
        ax.plot(ns, values, style, marker="o", markersize=3, linewidth=1.4, color=color, label=label)
        ax.fill_between(ns, lo, hi, color=color, alpha=0.12, linewidth=0)
        top = max(top, *hi)
    ax.set_xscale("log", base=2)
    all_ns = sorted({int(n) for by_n in curves.values() for n in by_n})
    ax.set_xticks(all_ns, [str(n) for n in all_ns])
    ax.set_xlabel("n (samples per problem)", fontsize=8)
    ax.set_ylabel("accuracy (%)", fontsize=8)
    ax.set_ylim(0, min(100.0, max(10.0, 1.1 * top)))  # room for the bands; near-0 policies stay readable
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    ax.set_title(f"Best-of-n on {bon.get('problems', '?')} problems (bands: 95% Wilson)", fontsize=9)
    return png_bytes(fig)


__all__ = ["best_of_n_png", "reliability_png"]
