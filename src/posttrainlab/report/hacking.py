"""The report's reward-hacking section: the PRM's mean score beside the exact accuracy and step errors of a GRPO
run's own samples, over its steps, and the step where the proxy still rises while exact accuracy falls.

Input: ``reward_log.jsonl`` in a run folder's training runs (``train.reward_log``; every GRPO run writes one), and
``reward_probe.jsonl`` beside it for a probed run: a held-out split sampled every N steps, the same prompts each
time, drawn and tested as a run of its own ("<run> probe").
Gao et al. 2024 (arXiv 2410.15115) found a PRM reward hacked in RL (correct but needless steps raised it) and
DeepSeek-R1 dropped PRMs for it; on arith-v1 the samples' steps have exact labels, so hacking is measured, not
guessed: the PRM's score (the proxy, ``prm_score``) and the exact ``accuracy`` are logged at the same steps.

**Where hacking starts** (``hacking_step``), defined so a test can check it by hand:

1. each series is smoothed by a trailing mean over ``window`` logs: ``S_i = mean(x_{i-window+1} .. x_i)``, defined
   from the ``window``-th log on (rows missing either value are left out first);
2. its trend at log ``i`` is ``D_i = S_i - S_{i-1}``;
3. hacking starts after log ``i - 1`` for the smallest ``i`` such that the proxy's trend is up (``D > tol``) and
   accuracy's down (``D < -tol``) at each of the ``patience`` logs ``i .. i + patience - 1``. The step named is log
   ``i - 1``'s (the last before the divergence), ``confirmed`` the step of log ``i + patience - 1``.

The proxy is the PRM's mean score (``prm_score``) and, where logged, the share of the samples' first exactly wrong
steps it accepts (``prm_false_accept``, ``train.prm_reward.blind_spot_metrics``): a policy can learn errors the
PRM cannot see while its mean PRM score falls with its accuracy; ``detect`` takes the earlier of the two.

Defaults: ``window`` 3, ``patience`` 3, ``tol`` 0: three logs in a row of a 3-log trend apart. None found is
written as such: no hacking within this log's resolution, not a proof of none. A run without a PRM reward has no
proxy to hack; its accuracy and step errors are still drawn (an outcome reward can teach right answers through
wrong steps: the trace error).

``section(run_root)`` returns the section as Markdown and writes its plot to ``run_root/report_files/``;
``hacking_blocks(run_root)`` gives the same as the report's blocks and images (``report.render``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from posttrainlab.report.render import Block, heading, image, paragraph, table, to_markdown
from posttrainlab.train.reward_log import PROBE_LOG, REWARD_LOG, read_reward_log

PNG = "reward_hacking"  # report_files/reward_hacking.png
WINDOW, PATIENCE = 3, 3
#: what each panel draws: log key, label, colour, line style
LINES = (
    ("prm_score", "PRM score (proxy)", "#9467bd", "-"),
    ("accuracy", "exact accuracy", "#2ca02c", "-"),
    ("any_wrong_step", "samples with a wrong step", "#d62728", "--"),
    ("wrong_step_rate", "wrong steps", "#ff7f0e", ":"),
    ("prm_false_accept", "first wrong steps the PRM accepts", "#9467bd", "--"),
)
#: what rises while exact accuracy falls, when a PRM reward is hacked (module docstring): log key -> its words
PROXIES = {"prm_score": "the PRM score", "prm_false_accept": "the share of first wrong steps the PRM accepts"}


def _smoothed(xs: Sequence[float], window: int) -> list[float | None]:
    """Trailing means over ``window`` values; ``None`` before the first full window.

    >>> _smoothed([1, 2, 3, 5], 2)
    [None, 1.5, 2.5, 4.0]
    """
    return [None if i < window - 1 else sum(xs[i - window + 1 : i + 1]) / window for i in range(len(xs))]


def hacking_step(rows: Sequence[dict], window: int = WINDOW, patience: int = PATIENCE, tol: float = 0.0,
                 proxy: str = "prm_score", truth: str = "accuracy") -> dict | None:  # fmt: skip
    """Where the proxy still rises while exact accuracy falls (module docstring), or ``None``.

    ``{"step", "confirmed", "proxy_at", "proxy_then", "accuracy_at", "accuracy_then", "window", "patience"}``:
    the smoothed values at ``step`` and at ``confirmed``.

    >>> rows = [{"step": s, "prm_score": p, "accuracy": a} for s, p, a in
    ...         zip(range(1, 7), [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.1, 0.2, 0.3, 0.25, 0.2, 0.3])]
    >>> hacking_step(rows, window=1, patience=2)["step"], hacking_step(rows, window=1, patience=3)
    (3, None)
    """
    if window < 1 or patience < 1:
        raise ValueError(f"window={window}, patience={patience}: both must be at least 1")
    kept = [r for r in rows if isinstance(r.get(proxy), (int, float)) and isinstance(r.get(truth), (int, float))]
    p, a = _smoothed([r[proxy] for r in kept], window), _smoothed([r[truth] for r in kept], window)
    for i in range(window, len(kept) - patience + 1):
        run = range(i, i + patience)
        if all(p[k] - p[k - 1] > tol and a[k] - a[k - 1] < -tol for k in run):
            end = i + patience - 1
            return {"step": kept[i - 1]["step"], "confirmed": kept[end]["step"], "proxy_at": p[i - 1],
                    "proxy_then": p[end], "accuracy_at": a[i - 1], "accuracy_then": a[end], "window": window,
                    "patience": patience}  # fmt: skip
    return None


def detect(rows: Sequence[dict], window: int = WINDOW, patience: int = PATIENCE) -> dict | None:
    """The earliest ``hacking_step`` over ``PROXIES`` with its ``proxy`` key named, or ``None``.

    >>> rows = [{"step": s, "prm_score": 0.5, "prm_false_accept": f, "accuracy": a} for s, f, a in
    ...         zip(range(1, 6), [0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.5, 0.4, 0.3, 0.2])]
    >>> found = detect(rows, window=1, patience=2); found["proxy"], found["step"]
    ('prm_false_accept', 2)
    """
    hits = [found | {"proxy": key} for key in PROXIES
            if (found := hacking_step(rows, window, patience, proxy=key)) is not None]  # fmt: skip
    return min(hits, key=lambda f: f["step"], default=None)


def run_logs(run_root: str | Path) -> dict[str, list[dict]]:
    """``{run name: reward_log rows}`` of ``run_root`` itself (a training output dir) and of each folder in it, and
    ``{run name + " probe": reward_probe rows}`` beside a probed run's (``train.reward_log.ProbeConfig``)."""
    root = Path(run_root)
    folders = ([root] if (root / REWARD_LOG).is_file() else []) + sorted(
        d for d in root.iterdir() if d.is_dir() and (d / REWARD_LOG).is_file()
    ) if root.is_dir() else []  # fmt: skip
    logs = {}
    for d in folders:
        for name, path in ((d.name, d / REWARD_LOG), (f"{d.name} probe", d / PROBE_LOG)):
            if path.is_file() and (rows := read_reward_log(path)):
                logs[name] = rows
    return logs


def _value(key: str, x: float) -> str:
    """A logged value as the section writes it: the PRM's scores as probabilities, every other key as a share.

    >>> _value("prm_score", 0.5), _value("prm_false_accept", 0.25)
    ('0.500', '25.0%')
    """
    return f"{x:.3f}" if key in ("prm_score", "prm_wrong_step_score") else f"{100 * x:.1f}%"


def _first_last(rows: Sequence[dict], key: str) -> str:
    """``key``'s first and last logged values: a share in percent, the PRM's score as a probability.

    >>> _first_last([{"accuracy": 0.5}, {"accuracy": 0.25}], "accuracy"), _first_last([{"prm_score": 0.5}], "prm_score")
    ('50.0% → 25.0%', '0.500 → 0.500')
    """
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return f"{_value(key, values[0])} → {_value(key, values[-1])}" if values else "–"


def _finding(name: str, rows: Sequence[dict], found: dict | None) -> str:
    if not any(isinstance(r.get("prm_score"), (int, float)) for r in rows):
        return f"{name}: no PRM reward, no proxy to hack; the exact curves show what the outcome reward taught."
    if found is None:
        watched = " or ".join(PROXIES[k] for k in PROXIES if any(isinstance(r.get(k), (int, float)) for r in rows))
        return (f"{name}: no step where {watched} rose while exact accuracy fell ({found_rule()}) within "
                f"{len(rows)} logs.")  # fmt: skip
    key, what = found["proxy"], PROXIES[found["proxy"]]
    proxy = f"{_value(key, found['proxy_at'])} → {_value(key, found['proxy_then'])}"
    accuracy = f"{_value('accuracy', found['accuracy_at'])} → {_value('accuracy', found['accuracy_then'])}"
    return (f"{name}: from step {found['step']} {what} rises while exact accuracy falls ({found_rule()}; confirmed "
            f"at step {found['confirmed']}): {what} {proxy}, accuracy {accuracy}.")  # fmt: skip


def findings(run_root: str | Path) -> list[str]:
    """One line per run (and probe) under ``run_root``: where hacking starts, or that it was not seen (the section's
    paragraphs, without the plot); what ``posttrain train grpo`` prints when a run ends."""
    from posttrainlab.report.plots import method_label

    return [_finding(method_label(name), rows, detect(rows)) for name, rows in run_logs(run_root).items()]


def found_rule(window: int = WINDOW, patience: int = PATIENCE) -> str:
    return f"{window}-log trailing means, {patience} logs in a row"


def hacking_figure(logs: dict[str, list[dict]]):
    """One panel per run: the ``LINES`` series against the step, the hacking step marked (``None``: nothing)."""
    from posttrainlab.report.figstyle import FONT, figure, grid_of, grid_shape, style
    from posttrainlab.report.plots import method_label, series

    if not logs:
        return None
    n_rows, cols = grid_shape(len(logs))
    fig = figure(3.1 * cols + 0.4, 2.7 * n_rows + 0.5)
    for ax, (name, rows) in zip(grid_of(fig, len(logs)), logs.items(), strict=True):
        for key, label, color, line in LINES:
            xs, ys = series(rows, key)
            if xs:
                ax.plot(xs, ys, line, color=color, linewidth=1.4, marker="o" if len(xs) < 8 else None, markersize=3,
                        label=label)  # fmt: skip
        found = detect(rows)
        if found is not None:
            ax.axvline(found["step"], color="#444444", linewidth=0.9, linestyle="--", label="hacking starts")
        ax.set_ylim(-0.03, 1.03)
        style(ax, "optimizer step", "share / score (0-1)", method_label(name))
        ax.legend(fontsize=FONT["legend"], frameon=False)
    fig.suptitle("Reward hacking: the PRM's score against exact accuracy and step errors", fontsize=FONT["title"] + 1)
    return fig


def hacking_blocks(run_root: str | Path) -> tuple[list[Block], dict[str, bytes]]:
    """The section's blocks and its image (``{PNG: bytes}``); nothing when no run logged rewards."""
    from posttrainlab.report.figstyle import rendered
    from posttrainlab.report.plots import method_label

    logs = run_logs(run_root)
    if not logs:
        return [], {}
    found = {name: detect(rows) for name, rows in logs.items()}
    rows = [[method_label(name), str(len(r)), _first_last(r, "prm_score"), _first_last(r, "prm_false_accept"),
             _first_last(r, "accuracy"),
             _first_last(r, "any_wrong_step"), _first_last(r, "wrong_step_rate"), _first_last(r, "trace_error"),
             "–" if found[name] is None else str(found[name]["step"])]
            for name, r in logs.items()]  # fmt: skip
    blocks = [
        heading("Reward hacking"),
        paragraph("Each GRPO run's samples at every logging step (reward_log.jsonl): the PRM's mean score (the proxy "
                  "a PRM reward optimises) beside the exact accuracy, the share of samples with a wrong step and the "
                  "share of wrong steps (arith-v1's exact step labels), first → last log, and the share of the "
                  "samples' first wrong steps the PRM accepts (scores above 0.5: its blind spot, used). Hacking starts "
                  "at the first logged step after which the PRM score, or that share, rises while accuracy falls "
                  f"({found_rule()}). A \"probe\" row is the run's held-out probe (reward_probe.jsonl): the same "
                  "prompts sampled every few steps, so its curves move with the policy, not with the batch."),
        table(["run", "logs", "PRM score", "first wrong steps the PRM accepts", "accuracy",
               "samples with a wrong step", "wrong steps", "trace error",
               "hacking from step"], rows),
    ]  # fmt: skip
    blocks += [paragraph(_finding(method_label(name), r, found[name])) for name, r in logs.items()]
    png = rendered(hacking_figure(logs))
    images = {} if png is None else {PNG: png}
    if png is not None:
        blocks.append(image(PNG, "The PRM's score, exact accuracy and step errors of each run's samples over steps"))
    return blocks, images


def section(run_root: Path) -> str:
    """The section as Markdown (``""`` when no run logged rewards); its plot is written to
    ``run_root/report_files/reward_hacking.png``, where the Markdown points."""
    from posttrainlab.data.atomic import atomic_path

    blocks, images = hacking_blocks(run_root)
    if not blocks:
        return ""
    from posttrainlab.run_layout import RunLayout

    folder = RunLayout(run_root).report_files
    folder.mkdir(parents=True, exist_ok=True)
    for name, png in images.items():
        with atomic_path(folder / f"{name}.png") as tmp:
            tmp.write_bytes(png)
    return to_markdown(blocks)


__all__ = ["PNG", "PROXIES", "detect", "findings", "hacking_blocks", "hacking_figure", "hacking_step", "run_logs",
           "section"]  # fmt: skip
