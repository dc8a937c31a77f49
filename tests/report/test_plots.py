"""The report's figures are ones you would share (issue #17): 150 dpi, no text under 8 pt, no overlapping
category labels, units on the value axes, DPO's accuracy and margin on separate Axes, eval loss beside train loss.

Each plot has a ``*_figure`` twin returning the Figure its PNG comes from, so these tests read what is drawn
(which Axes holds which line, bar heights, labels); resolution and size are read from the PNG bytes themselves.
"""

from __future__ import annotations

import pytest

from figure_checks import overlapping_ticks, png_size_dpi, smallest_font
from posttrainlab.report import plots
from posttrainlab.report.figstyle import MAX_WIDTH_IN, figure, png_bytes, wrap

CATS = ("addition", "subtraction", "multiplication", "multi_step", "word_problem")
CORRS = ("arithmetic_slip", "operand_error", "inconsistent_answer", "missing_answer")


def acc(value: float, half: float = 0.05) -> dict:
    return {"value": value, "ci95": [value - half, value + half]}


def method(overall: float, preference: dict | None = None) -> dict:
    m = {
        "accuracy": acc(overall),
        "per_category": {c: acc(overall) for c in CATS},
        "outcomes": {"correct": 43, "wrong_answer": 47, "missing_answer": 6, "malformed": 4},
    }
    if preference:
        m["preference"] = preference
    return m


DPO_PREF = {
    "method": "implicit_reward",
    "beta": 0.1,
    "accuracy": acc(0.81),
    "per_corruption": {c: acc(0.7) for c in CORRS},
    "mean_margin": 0.84,
}
SFT_PREF = {"method": "logprob_margin", "accuracy": acc(0.62), "per_corruption": {}, "mean_margin": -1.7}
METRICS = {
    "base": method(0.05),
    "sft": method(0.43, SFT_PREF),
    "dpo": method(0.45, DPO_PREF),
    "grpo": method(0.51),
}
DPO_LOG = [
    {"step": i, "loss": 0.69 - 0.02 * i, "rewards/accuracies": 0.5 + 0.03 * i, "rewards/margins": 0.1 * i}
    for i in range(1, 12)
]
GRPO_LOG = [{"step": i, "reward": 0.4, "kl": 0.001 * i, "frac_reward_zero_std": 0.5, "loss": 0.01} for i in range(30)]
SFT_LOG = [{"step": 5 * i, "loss": 2.0 / i} for i in range(1, 9)] + [
    {"step": 10 * i, "eval_loss": 2.4 / i, "eval_runtime": 1.0} for i in (1, 2, 3, 4)
]

#: every method the quickstart can train (the effects preset's seven rows): the figures still fit the page
ALL_METHODS = {**METRICS, **{m: method(0.4, DPO_PREF) for m in ("dpo-policy", "rft", "sft-continued", "grpo-s1")}}

FIGURES = {
    "category_accuracy": lambda: plots.category_accuracy_figure(METRICS),
    "outcome_shares": lambda: plots.outcome_shares_figure(METRICS),
    "outcome_shares_every_method": lambda: plots.outcome_shares_figure(ALL_METHODS),
    "category_accuracy_every_method": lambda: plots.category_accuracy_figure(ALL_METHODS),
    "preference_accuracy_every_method": lambda: plots.preference_figure(ALL_METHODS),
    "preference_accuracy": lambda: plots.preference_figure(METRICS),
    "training_sft": lambda: plots.training_figure("sft", SFT_LOG),
    "training_dpo": lambda: plots.training_figure("dpo", DPO_LOG),
    "training_grpo": lambda: plots.training_figure("grpo", GRPO_LOG),
}


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_is_150_dpi_8_pt_and_no_wider_than_the_page(name):
    fig = FIGURES[name]()
    width_in, height_in = fig.get_size_inches()
    width, height, dpi = png_size_dpi(png_bytes(fig))
    assert round(dpi) == 150 and (width, height) == (round(150 * width_in), round(150 * height_in))
    assert width_in <= MAX_WIDTH_IN  # report.html shows it no smaller than drawn
    assert smallest_font(fig) >= 8
    assert overlapping_ticks(fig) == []


def test_the_png_functions_render_their_figures():
    png = plots.category_accuracy(METRICS)
    assert png_size_dpi(png)[:2] == png_size_dpi(png_bytes(plots.category_accuracy_figure(METRICS)))[:2]
    assert plots.training_curves("sft", [{"step": 1, "train_runtime": 3.0}]) is None
    assert plots.preference_accuracy({"sft": {"accuracy": 0.5}}) is None


def test_long_category_names_wrap_instead_of_overlapping():
    # four long labels on a 3.5-inch figure: unwrapped, "inconsistent answer" and its neighbours collide
    fig = figure(3.5, 2.5)
    ax = fig.subplots()
    ax.set_xticks(range(len(CORRS)), [c.replace("_", " ") for c in CORRS], fontsize=8)
    assert overlapping_ticks(fig) != []  # the check can fail ...
    ax.set_xticks(range(len(CORRS)), [wrap(c) for c in CORRS], fontsize=8)
    assert overlapping_ticks(fig) == []  # ... and wrapping fixes it
    labels = [t.get_text() for t in plots.preference_figure(METRICS).axes[0].get_xticklabels()]
    assert labels == ["all pairs", "arithmetic\nslip", "operand\nerror", "inconsistent\nanswer", "missing\nanswer"]


def test_eval_loss_is_drawn_beside_the_train_loss():
    (loss,) = plots.curve_panels("sft", SFT_LOG)
    assert [c.label for c in loss.curves] == ["train", "eval"]
    assert loss.curves[1].xs == [10, 20, 30, 40] and loss.curves[1].ys == pytest.approx([2.4, 1.2, 0.8, 0.6])
    ax = plots.training_figure("sft", SFT_LOG).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["eval"].get_xdata()) == [10, 20, 30, 40] and lines["eval"].get_marker() == "s"
    assert lines["eval"].get_linestyle() != lines["train"].get_linestyle()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "eval"]
    assert ax.get_ylabel() == "loss (nats)" and ax.get_xlabel() == "optimizer step"
    # no eval rows: one line, no legend
    ax = plots.training_figure("sft", SFT_LOG[:8]).axes[0]
    assert len(ax.get_lines()) == 1 and ax.get_legend() is None


def test_dpo_accuracy_and_margin_never_share_an_axis():
    fig = plots.training_figure("dpo", DPO_LOG)
    by_title = {ax.get_title(): ax for ax in fig.axes}
    accuracy, margin = by_title["implicit-reward accuracy"], by_title["implicit-reward margin"]
    assert accuracy is not margin
    assert accuracy.get_ylim() == (-0.03, 1.03) and "0-1" in accuracy.get_ylabel()
    assert "nats" in margin.get_ylabel() and max(margin.get_lines()[0].get_ydata()) == pytest.approx(1.1)
    # the evaluation's figure: accuracy per corruption in percent, mean margins (nats) in a panel of their own
    acc_ax, margin_ax = plots.preference_figure(METRICS).axes
    assert "%" in acc_ax.get_ylabel() and acc_ax.get_ylim() == (0, 105)
    bars = {c.get_label(): [round(b.get_height(), 6) for b in c] for c in acc_ax.containers if hasattr(c, "patches")}
    assert bars == {"SFT": [62.0], "DPO": [81.0, 70.0, 70.0, 70.0, 70.0]}  # all pairs, then per corruption
    assert "nats" in margin_ax.get_ylabel()
    assert [round(b.get_height(), 6) for b in margin_ax.patches] == [-1.7, 0.84]  # SFT, DPO
    ticks = [t.get_text() for t in margin_ax.get_xticklabels()]
    assert ticks == ["SFT\nlog-prob\nmargin", "DPO\nimplicit reward\n(β = 0.1)"]
    # no margins in the file: one panel, as before
    no_margin = {"dpo": method(0.45, {k: v for k, v in DPO_PREF.items() if k != "mean_margin"})}
    assert len(plots.preference_figure(no_margin).axes) == 1


def test_four_panels_go_two_by_two_and_every_value_axis_has_a_unit():
    fig = plots.training_figure("grpo", GRPO_LOG)
    assert len(fig.axes) == 4 and fig.get_size_inches()[0] < 7
    assert [ax.get_ylabel() for ax in fig.axes] == [
        "mean reward (0-1, 1 = correct)",
        "KL (nats)",
        "share of groups (0-1)",
        "policy loss (reward units)",
    ]
    assert plots.category_accuracy_figure(METRICS).axes[0].get_ylabel() == "accuracy (% of problems)"


def test_figure_refuses_a_width_the_page_would_shrink():
    with pytest.raises(ValueError, match="shown smaller than drawn"):
        figure(MAX_WIDTH_IN + 1, 3)
