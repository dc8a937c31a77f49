"""The quickstart report's plots, each a function from plain dicts to PNG bytes (or ``None``).

PNG bytes rather than figures because the report uses one rendering twice: written beside
``report.md`` and embedded in ``report.html`` as a data URI. Matplotlib is imported only inside the
functions (docs/design.md "Layers": importing ``posttrainlab.report`` stays cheap) and figures are drawn on
an explicit Agg canvas, not through pyplot, so no global backend is switched and no display is needed.
A function returns ``None`` when its input holds nothing to draw, and the report leaves that plot out.

Inputs are the parsed files of a run folder: ``train_log.jsonl`` rows and ``eval/<method>/metrics.json``
objects keyed by method (``{"sft": {...}, "grpo": {...}}``); see ``posttrainlab.report.build``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from posttrainlab.data.arith.corrupt import CORRUPTIONS
from posttrainlab.data.arith.problems import CATEGORIES

METHODS = ("base", "sft", "dpo", "grpo")
OUTCOMES = ("correct", "wrong_answer", "missing_answer", "malformed")
METHOD_COLORS = {"base": "#9e9e9e", "sft": "#1f77b4", "dpo": "#ff7f0e", "grpo": "#2ca02c"}
OUTCOME_COLORS = {"correct": "#2ca02c", "wrong_answer": "#d62728", "missing_answer": "#ff9f1c", "malformed": "#7f7f7f"}
# What each stage's curves show: TRL's log keys (GRPO's frac_reward_zero_std = share of groups whose
# rewards are all equal, i.e. groups with no learning signal). Keys a log lacks are skipped.
STAGE_KEYS = {
    "pretrain": ("loss",),
    "sft": ("loss", "mean_token_accuracy"),
    "dpo": ("loss", "rewards/accuracies", "rewards/margins"),
    "grpo": ("reward", "kl", "frac_reward_zero_std", "loss"),
}
KEY_TITLES = {
    "rewards/accuracies": "reward accuracy (chosen > rejected)",
    "rewards/margins": "reward margin",
    "kl": "KL to reference",
    "frac_reward_zero_std": "groups with all rewards equal",
    "mean_token_accuracy": "token accuracy",
}
_DPI = 100


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
    """``"grpo"`` -> ``"GRPO"``; other names are kept as they are.

    >>> method_label("dpo"), method_label("base")
    ('DPO', 'base')
    """
    return method.upper() if method in ("sft", "dpo", "grpo") else method


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


def figure(width: float, height: float):
    """A matplotlib Figure on its own Agg canvas (no pyplot, no global backend), ``width`` x ``height`` inches."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, reproducible for the same inputs."""
    buf = io.BytesIO()
    # No "Software" stamp, so the same inputs give the same bytes on every matplotlib patch release.
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def training_curves(stage: str, rows: Sequence[dict]) -> bytes | None:
    """One stage's training curves, one small panel per logged quantity (``STAGE_KEYS``).

    Noisy curves (more than 20 points) get a moving average drawn over the raw values.
    """
    panels = [(k, *series(rows, k)) for k in STAGE_KEYS.get(stage, ("loss",))]
    panels = [p for p in panels if p[1]]
    if not panels:
        return None
    fig = figure(2.7 * len(panels) + 0.3, 2.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    color = METHOD_COLORS.get(stage, "#444444")
    for ax, (key, xs, ys) in zip(axes, panels, strict=True):
        if len(ys) > 20:
            w = max(2, len(ys) // 10)
            smooth = [sum(ys[max(0, i - w + 1) : i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(ys))]
            ax.plot(xs, ys, color=color, alpha=0.3, linewidth=0.8)
            ax.plot(xs, smooth, color=color, linewidth=1.6)
        else:
            ax.plot(xs, ys, color=color, linewidth=1.4, marker="o" if len(ys) < 8 else None, markersize=3)
        if key in ("frac_reward_zero_std", "rewards/accuracies"):
            ax.set_ylim(-0.03, 1.03)
        ax.set_title(KEY_TITLES.get(key, key), fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("Base model pretraining" if stage == "pretrain" else f"{method_label(stage)} training", fontsize=10)
    return png_bytes(fig)


def _grouped_bars(ax, groups: list[str], bars: dict[str, list[Stat | None]]) -> None:
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
            color=METHOD_COLORS.get(method),
            label=method_label(method),
        )
    ax.set_xticks(range(len(groups)), [g.replace("_", " ") for g in groups], fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("%", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def category_accuracy(metrics: dict[str, dict]) -> bytes | None:
    """Accuracy overall and per category, methods side by side, with 95% interval error bars."""
    cats = ordered({c for m in metrics.values() for c in sub(m, "per_category")}, CATEGORIES)
    bars = {
        method: [stat(m.get("accuracy"))] + [stat(sub(m, "per_category").get(c)) for c in cats]
        for method, m in metrics.items()
    }
    bars = {k: v for k, v in bars.items() if any(v)}
    if not bars:
        return None
    fig = figure(7.8, 3.0)
    ax = fig.subplots()
    _grouped_bars(ax, ["overall", *cats], bars)
    ax.set_title("Exact-answer accuracy (error bars: 95% intervals)", fontsize=10)
    return png_bytes(fig)


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


def outcome_shares(metrics: dict[str, dict]) -> bytes | None:
    """One stacked bar per method: the shares of correct, wrong, missing and malformed answers."""
    shares = {}
    for method, m in metrics.items():
        out = shares_of_outcomes(m)
        if any(finite(out.get(k)) for k in out):
            shares[method] = out
    if not shares:
        return None
    kinds = ordered({k for out in shares.values() for k in out}, OUTCOMES)
    fig = figure(1.3 * len(shares) + 3.0, 2.8)
    ax = fig.subplots()
    bottom = [0.0] * len(shares)
    for kind in kinds:
        vals = [100 * float(out[kind]) if finite(out.get(kind)) else 0.0 for out in shares.values()]
        ax.bar(range(len(shares)), vals, 0.6, bottom=bottom, color=OUTCOME_COLORS.get(kind), label=kind)
        for i, v in enumerate(vals):
            if v >= 8:
                ax.text(i, bottom[i] + v / 2, f"{v:.0f}%", ha="center", va="center", fontsize=7, color="white")
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(shares)), [method_label(m) for m in shares], fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("% of test problems", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend([k.replace("_", " ") for k in kinds], fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    ax.set_title("Outcome types", fontsize=10)
    return png_bytes(fig)


def preference_accuracy(metrics: dict[str, dict]) -> bytes | None:
    """Share of preference pairs ranked right (chosen above rejected), all pairs and per corruption type."""
    prefs = {k: sub(m, "preference") for k, m in metrics.items() if sub(m, "preference")}
    corrs = ordered({c for p in prefs.values() for c in sub(p, "per_corruption")}, CORRUPTIONS)
    bars = {
        method: [stat(p.get("accuracy"))] + [stat(sub(p, "per_corruption").get(c)) for c in corrs]
        for method, p in prefs.items()
    }
    bars = {k: v for k, v in bars.items() if any(v)}
    if not bars:
        return None
    fig = figure(7.8, 3.0)
    ax = fig.subplots()
    _grouped_bars(ax, ["all pairs", *corrs], bars)
    ax.axhline(50, color="#555555", linewidth=0.8, linestyle="--")
    ax.set_title("Preference accuracy (chosen ranked above rejected; dashed: chance)", fontsize=10)
    return png_bytes(fig)
