"""The PRM evaluation's figures (``posttrainlab.runners.prm_plots``): best-of-N curves stay apart where their
intervals coincide, the oracle looks like no selector, the legend sits outside the data; 150 dpi, 8 pt.

The best-of-N input is ``best_of_n_metrics`` on problems whose step scores are all equal: every PRM selector
then picks sample 0 at every n, so their curves and 95% intervals are identical by construction, the case a
plot must still let a reader tell apart.
"""

from __future__ import annotations

import math

from figure_checks import png_size_dpi, smallest_font
from posttrainlab.eval.best_of_n import Candidates, best_of_n_metrics
from posttrainlab.runners.prm_plots import DODGE, best_of_n_figure, best_of_n_png, reliability_figure, reliability_png


def bon_of_ties() -> dict:
    # 10 problems: sample 0 right in the first 4; all step scores 0.5, so prm_* all pick sample 0
    problems = [Candidates([i < 4] + [True] * 3, [1, 2, 3, 4], [[0.5]] * 4) for i in range(10)]
    bon = best_of_n_metrics(problems, [1, 2, 4])
    return {**bon, "problems": 10, "vote_aggregation": "min"}


def json_key(curve: dict) -> str:
    """One curve's values and intervals as a comparable key."""
    return repr(sorted((n, v["value"], tuple(v["ci95"])) for n, v in curve.items()))


def test_coinciding_selectors_are_dodged_apart_with_their_own_look():
    bon = bon_of_ties()
    prm = [s for s in bon["selectors"] if s.startswith("prm_") and s != "prm_vote"]
    assert len({json_key(bon["selectors"][s]) for s in prm}) == 1  # the premise: identical curves and intervals
    ax = best_of_n_figure(bon).axes[0]
    bars = {c.get_label(): c for c in ax.containers}  # one ErrorbarContainer per selector
    assert set(bars) == set(bon["selectors"]) - {"prm_vote"} | {"prm_vote (min)"}
    xs = {name: list(c.lines[0].get_xdata()) for name, c in bars.items()}
    for n_index, n in enumerate((1, 2, 4)):
        at_n = sorted(x[n_index] for x in xs.values())
        assert len(set(at_n)) == len(at_n)  # no two selectors drawn at one x
        gaps = [math.log2(b / a) for a, b in zip(at_n, at_n[1:], strict=False)]
        assert all(abs(g - DODGE) < 1e-9 for g in gaps)  # the same step in log2 x at every n
        assert math.isclose(math.log2(at_n[0] * at_n[-1]) / 2, math.log2(n))  # centred on n
    markers = [c.lines[0].get_marker() for c in bars.values()]
    assert len(set(markers)) == len(markers)  # each selector its own marker ...
    assert len({c.lines[0].get_linestyle() for c in bars.values()}) >= 3  # ... and line styles vary
    # the oracle: a plain line (no error bars), thick and dashed, with a band
    (oracle,) = [line for line in ax.get_lines() if line.get_label() == "oracle (pass@n)"]
    widest = max(c.lines[0].get_linewidth() for c in bars.values())
    assert oracle.get_linestyle() == "--" and oracle.get_linewidth() > widest
    assert list(oracle.get_xdata()) == [1, 2, 4] and len(ax.collections) >= 1
    assert ax.get_ylabel() == "accuracy (% of problems)" and "log2" in ax.get_xlabel()


def test_the_legend_sits_outside_the_data():
    fig = best_of_n_figure(bon_of_ties())
    fig.canvas.draw()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


def test_prm_figures_are_150_dpi_with_8_pt_text():
    bins = [
        {"lower": b / 10, "upper": (b + 1) / 10, "count": 5 + b, "accuracy": b / 10, "mean_confidence": b / 10 + 0.05}
        for b in range(10)
    ]
    calibration = {"bins": bins, "ece": 0.05, "n_bins": 10}
    for fig, png in (
        (best_of_n_figure(bon_of_ties()), best_of_n_png(bon_of_ties())),
        (reliability_figure(calibration), reliability_png(calibration)),
    ):
        width, height, dpi = png_size_dpi(png)
        assert round(dpi) == 150 and width == round(150 * fig.get_size_inches()[0])
        assert smallest_font(fig) >= 8
    assert best_of_n_png({"selectors": {}, "oracle": {}}) is None
    assert reliability_png({"bins": [{"count": 0}]}) is None
