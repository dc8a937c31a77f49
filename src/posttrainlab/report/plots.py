"""The quickstart report's plots, each a function from plain dicts to PNG bytes (or ``None``).

PNG bytes rather than figures because the report uses one rendering twice: written beside
``report.md`` and embedded in ``report.html`` as a data URI. Matplotlib is imported only inside the
functions (docs/design.md "Layers": importing ``posttrainlab.report`` stays cheap) and figures are drawn on
an explicit Agg canvas, not through pyplot, so no global backend is switched and no display is needed.
A function returns ``None`` when its input holds nothing to draw, and the report leaves that plot out.
Each ``*_figure`` function returns the matplotlib Figure its PNG function renders, so tests can read what is
drawn (which Axes holds which line, the labels) rather than pixels.

Size, resolution and fonts follow ``posttrainlab.report.figstyle``; every value axis says its unit, and
quantities of different units (DPO's preference accuracy, a share, and its margin, in nats) get separate Axes.

Inputs are the parsed files of a run folder: ``train_log.jsonl`` rows and ``eval/<method>/metrics.json``
objects keyed by method (``{"sft": {...}, "grpo": {...}}``); see ``posttrainlab.report.build``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from posttrainlab.data.arith.corrupt import CORRUPTIONS
from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.report.figstyle import (
    FONT,
    FONT_MIN,
    MAX_WIDTH_IN,
    figure,
    grid_of,
    grid_shape,
    rendered,
    style,
    wrap,
)

METHODS = ("base", "sft", "sft-continued", "dpo", "dpo-policy", "grpo", "grpo-prm", "grpo-prm-only", "rft",
           "rft-answer")  # fmt: skip
OUTCOMES = ("correct", "wrong_answer", "missing_answer", "malformed")
METHOD_COLORS = {"base": "#9e9e9e", "sft": "#1f77b4", "dpo": "#ff7f0e", "dpo-policy": "#8c564b", "grpo": "#2ca02c",
                 "prm": "#9467bd", "rft": "#17becf", "rft-answer": "#9edae5",
                 "sft-continued": "#aec7e8"}  # fmt: skip
OTHER_COLOR = "#444444"  # a method with no colour of its own (a seed folder, a method added later)
OUTCOME_COLORS = {"correct": "#2ca02c", "wrong_answer": "#d62728", "missing_answer": "#ff9f1c", "malformed": "#7f7f7f"}
# What each stage's curves show: TRL's log keys (GRPO's frac_reward_zero_std = share of groups whose
# rewards are all equal, i.e. groups with no learning signal). Keys a log lacks are skipped.
STAGE_KEYS = {
    "pretrain": ("loss",),
    "sft": ("loss", "mean_token_accuracy"),
    "dpo": ("loss", "rewards/accuracies", "rewards/margins"),
    "dpo-policy": ("loss", "rewards/accuracies", "rewards/margins"),
    "grpo": ("reward", "kl", "frac_reward_zero_std", "loss"),
}
STAGE_KEYS["grpo-prm"] = STAGE_KEYS["grpo-prm-only"] = STAGE_KEYS["grpo"]  # with the PRM's reward: what GRPO logs
KEY_TITLES = {
    "rewards/accuracies": "implicit-reward accuracy",
    "rewards/margins": "implicit-reward margin",
    "kl": "KL to reference",
    "frac_reward_zero_std": "groups with all rewards equal",
    "mean_token_accuracy": "token accuracy",
}
# The value axis of each logged quantity, with its unit; (stage, key) entries override the key's.
KEY_UNITS = {
    "loss": "loss (nats)",  # token cross-entropy (pretrain, SFT), -log sigmoid(margin) (DPO)
    ("grpo", "loss"): "policy loss (reward units)",
    "mean_token_accuracy": "share of tokens (0-1)",
    "rewards/accuracies": "share chosen > rejected (0-1)",
    "rewards/margins": "β · log-ratio margin (nats)",
    "reward": "mean reward (0-1, 1 = correct)",
    "kl": "KL (nats)",
    "frac_reward_zero_std": "share of groups (0-1)",
}
SHARE_KEYS = ("mean_token_accuracy", "rewards/accuracies", "frac_reward_zero_std")  # drawn on a 0-1 axis


class Stat(NamedTuple):
    """A proportion with its 95% interval (``lo``/``hi`` are ``None`` when the file gives none)."""

    value: float
    lo: float | None
    hi: float | None


def stat(obj: Any) -> Stat | None:
    """Read ``{"value": .43, "ci95": [.39, .47]}`` (or a bare number) as a ``Stat``; ``None`` if unusable.

    >>> stat({"value": 0.43, "ci95": [0.39, 0.47], "n": 500})
    Stat(value=0.43, lo=0.39, hi=0.47)
    >>> stat(0.5), stat("n/a"), stat({"value": None})
    (Stat(value=0.5, lo=None, hi=None), None, None)
    """
    if isinstance(obj, dict):
        value, ci = obj.get("value"), obj.get("ci95")
    else:
        value, ci = obj, None
    if not finite(value):
        return None
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(finite(c) for c in ci):
        return Stat(float(value), float(ci[0]), float(ci[1]))
    return Stat(float(value), None, None)


def finite(x: Any) -> bool:
    """A real, finite number (not a bool)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def sub(obj: Any, key: str) -> dict:
    """``obj[key]`` when both are JSON objects, else ``{}``: a missing or odd section reads as empty.

    >>> sub({"outcomes": {"correct": 0.4}}, "outcomes"), sub({"outcomes": 0.4}, "outcomes"), sub(None, "x")
    ({'correct': 0.4}, {}, {})
    """
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def method_label(method: str) -> str:
    """``"grpo"`` -> ``"GRPO"``, ``"dpo-policy"`` -> ``"DPO-policy"`` (on-policy pairs); others are kept as they are.

    >>> method_label("dpo"), method_label("dpo-policy"), method_label("sft-continued"), method_label("base")
    ('DPO', 'DPO-policy', 'SFT-continued', 'base')
    """
    head, _, tail = method.partition("-")
    if head in ("sft", "dpo", "grpo", "rft"):
        return head.upper() + (f"-{tail}" if tail else "")
    return method


def ordered(names: Iterable[str], preferred: Sequence[str]) -> list[str]:
    """``names`` in the ``preferred`` order first, any others after them alphabetically.

    >>> ordered({"zeta", "multiplication", "addition"}, CATEGORIES)
    ['addition', 'multiplication', 'zeta']
    """
    names = set(names)
    return [n for n in preferred if n in names] + sorted(names - set(preferred))


def series(rows: Sequence[dict], key: str) -> tuple[list[float], list[float]]:
    """Steps and values of ``key`` in log rows that have a finite value for it (x = ``step``, else row index).

    >>> series([{"step": 5, "loss": 2.0}, {"step": 10, "train_loss": 1.0}, {"step": 15, "loss": 1.5}], "loss")
    ([5, 15], [2.0, 1.5])
    """
    xs, ys = [], []
    for i, row in enumerate(rows):
        if finite(row.get(key)):
            step = row.get("step")
            xs.append(step if finite(step) else i)
            ys.append(float(row[key]))
    return xs, ys


class Curve(NamedTuple):
    """One line of a training-curve panel: ``train`` (the log's ``key``) or ``eval`` (its ``eval_<key>``)."""

    label: str
    xs: list[float]
    ys: list[float]


class Panel(NamedTuple):
    """One panel of a stage's training curves: the logged quantity, its title and unit, the lines to draw."""

    key: str
    title: str
    ylabel: str
    curves: list[Curve]


def curve_panels(stage: str, rows: Sequence[dict]) -> list[Panel]:
    """What ``training_curves`` draws: per ``STAGE_KEYS`` quantity with any value, its train and eval lines.

    A recipe with an eval split makes ``transformers.Trainer`` log ``eval_<key>`` rows (``eval_loss``) beside
    the training rows; they go on the same panel, so the gap between the two reads at a glance.

    >>> [(p.key, [c.label for c in p.curves]) for p in curve_panels("sft", [{"step": 1, "loss": 2.0},
    ...     {"step": 1, "eval_loss": 2.2}, {"step": 2, "mean_token_accuracy": 0.5}])]
    [('loss', ['train', 'eval']), ('mean_token_accuracy', ['train'])]
    """
    panels = []
    for key in STAGE_KEYS.get(stage, ("loss",)):
        curves = [Curve(label, *series(rows, k)) for label, k in (("train", key), ("eval", f"eval_{key}"))]
        curves = [c for c in curves if c.xs]
        if curves:
            unit = KEY_UNITS.get((stage, key), KEY_UNITS.get(key, key))
            panels.append(Panel(key, KEY_TITLES.get(key, key), unit, curves))
    return panels


def training_figure(stage: str, rows: Sequence[dict]):
    """The Figure of ``training_curves`` (``None`` when the log holds none of the stage's quantities)."""
    panels = curve_panels(stage, rows)
    if not panels:
        return None
    n_rows, cols = grid_shape(len(panels))
    fig = figure(2.9 * cols + 0.4, 2.6 * n_rows + 0.3)
    color = METHOD_COLORS.get(stage, OTHER_COLOR)
    for ax, panel in zip(grid_of(fig, len(panels)), panels, strict=True):
        for curve in panel.curves:
            xs, ys = curve.xs, curve.ys
            if curve.label == "eval":
                ax.plot(xs, ys, "--", color="#222222", marker="s", markersize=4, linewidth=1.2, label="eval")
            elif len(ys) > 20:  # noisy: the raw values faint, a moving average over them
                w = max(2, len(ys) // 10)
                smooth = [sum(ys[max(0, i - w + 1) : i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(ys))]
                ax.plot(xs, ys, color=color, alpha=0.3, linewidth=0.8)
                ax.plot(xs, smooth, color=color, linewidth=1.6, label="train")
            else:
                ax.plot(
                    xs, ys, color=color, linewidth=1.4, marker="o" if len(ys) < 8 else None, markersize=3, label="train"
                )
        if panel.key in SHARE_KEYS:
            ax.set_ylim(-0.03, 1.03)
        if panel.key == "rewards/accuracies":
            ax.axhline(0.5, color="#777777", linewidth=0.8, linestyle=":", label="chance")
        style(ax, "optimizer step", panel.ylabel, panel.title)
        if len(panel.curves) > 1 or panel.key == "rewards/accuracies":
            ax.legend(fontsize=FONT["legend"], frameon=False)
    fig.suptitle(
        "Base model pretraining" if stage == "pretrain" else f"{method_label(stage)} training",
        fontsize=FONT["title"] + 1,
    )
    return fig


def training_curves(stage: str, rows: Sequence[dict]) -> bytes | None:
    """One stage's training curves, one small panel per logged quantity (``STAGE_KEYS``), eval lines beside
    the train lines (``curve_panels``). Noisy curves (more than 20 points) get a moving average drawn over them."""
    return rendered(training_figure(stage, rows))


def _grouped_bars(ax, groups: list[str], bars: dict[str, list[Stat | None]], ylabel: str) -> None:
    """Bars per group, one per method side by side, each with its 95% interval as an error bar (percent)."""
    width = 0.8 / max(1, len(bars))
    for j, (method, stats) in enumerate(bars.items()):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(groups))]
        keep = [(x, s) for x, s in zip(xs, stats, strict=True) if s is not None]
        if not keep:
            continue
        vals = [100 * s.value for _, s in keep]
        err = [
            [100 * max(0.0, s.value - s.lo) if s.lo is not None else 0.0 for _, s in keep],
            [100 * max(0.0, s.hi - s.value) if s.hi is not None else 0.0 for _, s in keep],
        ]
        ax.bar(
            [x for x, _ in keep],
            vals,
            width * 0.92,
            yerr=err,
            capsize=2,
            error_kw={"linewidth": 0.8},
            color=METHOD_COLORS.get(method, OTHER_COLOR),
            label=method_label(method),
        )
    ax.set_xticks(range(len(groups)), [wrap(g) for g in groups])
    ax.set_ylim(0, 105)
    style(ax, ylabel=ylabel, grid="y")
    ax.legend(fontsize=FONT["legend"], loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def _overall_and_per(results: dict[str, dict], key: str, order) -> tuple[list[str], dict[str, list]]:
    """The groups under ``key`` of every method's result (``per_category``…, in ``order``), and per method its
    ``accuracy`` stat then one stat per group; a method with no stat at all is left out."""
    groups = ordered({g for r in results.values() for g in sub(r, key)}, order)
    bars = {method: [stat(r.get("accuracy"))] + [stat(sub(r, key).get(g)) for g in groups]
            for method, r in results.items()}  # fmt: skip
    return groups, {k: v for k, v in bars.items() if any(v)}


def category_accuracy_figure(metrics: dict[str, dict]):
    """The Figure of ``category_accuracy`` (``None`` when no method has an accuracy)."""
    cats, bars = _overall_and_per(metrics, "per_category", CATEGORIES)
    if not bars:
        return None
    fig = figure(7.8, 3.2)
    ax = fig.subplots()
    _grouped_bars(ax, ["overall", *cats], bars, "accuracy (% of problems)")
    style(ax, title="Exact-answer accuracy (error bars: 95% intervals)", grid="y")
    return fig


def category_accuracy(metrics: dict[str, dict]) -> bytes | None:
    """Accuracy overall and per category, methods side by side, with 95% interval error bars."""
    return rendered(category_accuracy_figure(metrics))


def shares_of_outcomes(m: dict | None) -> dict:
    """Outcome shares of one metrics.json: its ``outcome_shares``, else its ``outcomes`` counts normalised.

    >>> shares_of_outcomes({"outcomes": {"correct": 3, "wrong_answer": 1}})
    {'correct': 0.75, 'wrong_answer': 0.25}
    """
    given = sub(m, "outcome_shares")
    if given:
        return given
    counts = {k: v for k, v in sub(m, "outcomes").items() if finite(v)}
    total = sum(float(v) for v in counts.values())
    return {k: float(v) / total for k, v in counts.items()} if total > 0 else counts


def outcome_shares_figure(metrics: dict[str, dict]):
    """The Figure of ``outcome_shares`` (``None`` when no method has outcomes)."""
    shares = {}
    for method, m in metrics.items():
        out = shares_of_outcomes(m)
        if any(finite(out.get(k)) for k in out):
            shares[method] = out
    if not shares:
        return None
    kinds = ordered({k for out in shares.values() for k in out}, OUTCOMES)
    fig = figure(min(MAX_WIDTH_IN, 1.3 * len(shares) + 3.0), 3.0)  # seven methods and more share the page's width
    ax = fig.subplots()
    bottom = [0.0] * len(shares)
    for kind in kinds:
        vals = [100 * float(out[kind]) if finite(out.get(kind)) else 0.0 for out in shares.values()]
        ax.bar(range(len(shares)), vals, 0.6, bottom=bottom, color=OUTCOME_COLORS.get(kind), label=kind)
        for i, v in enumerate(vals):
            if v >= 8:
                ax.text(i, bottom[i] + v / 2, f"{v:.0f}%", ha="center", va="center", fontsize=FONT_MIN, color="white")
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(shares)), [wrap(method_label(m), 10) for m in shares])
    ax.set_ylim(0, 100)
    style(ax, ylabel="% of test problems", title="Outcome types", grid="y")
    names = [k.replace("_", " ") for k in kinds]
    ax.legend(names, fontsize=FONT["legend"], loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return fig


def outcome_shares(metrics: dict[str, dict]) -> bytes | None:
    """One stacked bar per method: the shares of correct, wrong, missing and malformed answers."""
    return rendered(outcome_shares_figure(metrics))


def margin_label(method: str, pref: dict) -> str:
    """What a method's ``preference.mean_margin`` is, for its tick: DPO's implicit reward or a log-prob margin.

    >>> margin_label("dpo", {"method": "implicit_reward", "beta": 0.1}), margin_label("sft", {"method": "x"})
    ('DPO\\nimplicit reward\\n(β = 0.1)', 'SFT\\nlog-prob\\nmargin')
    """
    if pref.get("method") == "implicit_reward":
        beta = f"\n(β = {pref['beta']:g})" if finite(pref.get("beta")) else ""
        return f"{method_label(method)}\nimplicit reward{beta}"
    return f"{method_label(method)}\nlog-prob\nmargin"


def preference_figure(metrics: dict[str, dict]):
    """The Figure of ``preference_accuracy``: accuracy (a share of pairs, percent) and, in its own panel, the
    mean margin (nats) — two quantities of different units never share an axis."""
    prefs = {k: sub(m, "preference") for k, m in metrics.items() if sub(m, "preference")}
    corrs, bars = _overall_and_per(prefs, "per_corruption", CORRUPTIONS)
    if not bars:
        return None
    margins = {k: p["mean_margin"] for k, p in prefs.items() if k in bars and finite(p.get("mean_margin"))}
    if len(margins) > 3:  # more ticks than a side panel holds: the margins get a row of their own
        fig = figure(8.6, 6.8)
        acc, mar = fig.subplots(2, 1)
    else:
        fig = figure(8.6 if margins else 7.8, 3.4)
        acc, mar = fig.subplots(1, 2, width_ratios=[4, 1.3]) if margins else (fig.subplots(), None)
    _grouped_bars(acc, ["all pairs", *corrs], bars, "pairs ranked right (%)")
    acc.axhline(50, color="#555555", linewidth=0.8, linestyle="--")
    style(acc, title="Preference accuracy (chosen above rejected; dashed: chance)", grid="y")
    if mar is not None:
        colors = [METHOD_COLORS.get(m, OTHER_COLOR) for m in margins]
        mar.bar(range(len(margins)), list(margins.values()), 0.6, color=colors)
        mar.axhline(0, color="#555555", linewidth=0.8)
        mar.set_xticks(range(len(margins)), [margin_label(m, prefs[m]) for m in margins])
        style(mar, ylabel="mean margin (nats)", title="Mean margin", grid="y")
    return fig


def preference_accuracy(metrics: dict[str, dict]) -> bytes | None:
    """Share of preference pairs ranked right (chosen above rejected), all pairs and per corruption type, with
    the mean margin per method in a panel of its own."""
    return rendered(preference_figure(metrics))
