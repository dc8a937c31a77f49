"""The study's report: ``study.json`` (every number), ``report.md`` (the tables) and ``quality_vs_cost.png``.

``gather`` reads what the stages wrote and computes the summaries (``study.quality``'s pure functions); ``markdown``
and ``cost_figure`` only format them. Tables: each source's labels (cost and quality against exact labels), its
PRM on the held-out solutions (exact labels), best-of-N against majority voting with paired 95% intervals and exact
McNemar p, and where each source's label errors sit (problem category, step position).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.eval.compare import p_value, points
from posttrainlab.run_layout import BON, METRICS
from posttrainlab.study.evaluate import read_json
from posttrainlab.study.layout import COST, SKIPPED, TRAIN, StudyLayout, labellings, sources
from posttrainlab.study.quality import BON_SELECTORS, bon_row, cost_table, label_quality, prm_row

SELECTOR_NAMES = {"prm_vote": "PRM-weighted vote", "prm_min": "top score (min)", "prm_last": "top score (last)"}
KIND_STYLE = {"exact": ("#000000", "o"), "mc": ("#1f77b4", "s"), "judge": ("#ff7f0e", "^")}


def _targets(layout: StudyLayout, labelling: str, keys: list[tuple[str, int]], soft: bool) -> list[list[float] | None]:
    """A labelling's targets for each training solution (``None``: not labelled), hard (target > 0) unless ``soft``."""
    rows = {(r["id"], r["sample_index"]): r["targets"] for r in read_jsonl(layout.labels(labelling) / TRAIN)}
    out: list[list[float] | None] = []
    for key in keys:
        t = rows.get(key)
        out.append(None if t is None else [float(x) if soft else float(x > 0) for x in t])
    return out


def gather(cfg, layout: StudyLayout, identity: dict[str, Any]) -> dict[str, Any]:
    """Every number of the report, from the study folder (module docstring)."""
    from posttrainlab.runners.compare import best_of_n_outcomes
    from posttrainlab.study.evaluate import budget

    train = read_jsonl(layout.train_solutions)
    keys = [(r["id"], r["sample_index"]) for r in train]
    exact = [[int(x) for x in r["labels"]] for r in train]
    categories = [r["category"] for r in train]
    costs = cost_table({name: read_json(layout.labels(name) / COST) or {} for name, _ in labellings(cfg)}, len(train))
    samples = read_json(layout.bon_samples / BON) or {}
    n = str(cfg.bon.n)
    data: dict[str, Any] = {
        "preset": cfg.preset,
        "policy": identity,
        "solutions": {"train": len(train), "heldout": len(read_jsonl(layout.heldout_solutions)),
                      "train_steps": sum(map(len, exact)), "train_wrong_steps": sum(r.count(0) for r in exact)},
        "prm_steps": budget(cfg, layout),
        "bon": {"problems": samples.get("problems"), "n": cfg.bon.n,
                "majority": samples.get("selectors", {}).get("majority", {}).get(n, {}).get("value"),
                "oracle": samples.get("oracle", {}).get(n, {}).get("value"),
                "one_sample": samples.get("oracle", {}).get("1", {}).get("value")},
        "sources": {},
    }  # fmt: skip
    reference = None
    for source in sources(cfg):
        ev = layout.evaluation(source.name)
        entry: dict[str, Any] = {"kind": source.kind, "labelling": source.labelling, "soft": source.soft}
        if source.labelling is not None:
            entry["cost"] = costs[source.labelling]
            entry["quality"] = label_quality(exact, _targets(layout, source.labelling, keys, source.soft), categories)
        else:
            entry["cost"] = {"continuations": 0, "judge_calls": 0, "seconds": 0.0}
        skipped = read_json(layout.prm_of(source.name) / SKIPPED)
        entry["skipped"] = skipped and skipped.get("skipped")
        metrics = read_json(ev / "heldout" / METRICS)
        entry["prm"] = prm_row(metrics) if metrics else None
        if (ev / "bon" / BON).is_file():
            outcomes = best_of_n_outcomes(ev / "bon", cfg.bon.n)[1]
            entry["bon"] = bon_row(outcomes, None if source.name == "exact" else reference)
            reference = outcomes["prm_vote"] if source.name == "exact" else reference
        data["sources"][source.name] = entry
    return data


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _paired(s: dict[str, Any] | None) -> str:
    if s is None:
        return "–"
    return f"{points(s['diff'], s['ci'])}, p {p_value(s['mcnemar_p'])}"


def _seconds(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def main_table(data: dict[str, Any]) -> list[str]:
    """The table with every source: its labels' cost and quality, and its PRM on the held-out solutions."""
    lines = [
        "| source | labelled | continuations | judge calls | seconds | step acc | κ | first error same | "
        "PRM AUROC | pairwise (min) | pairwise (last) | first-error F1 | ECE |",
        "|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in data["sources"].items():
        q, c, p = e.get("quality"), e["cost"], e.get("prm") or {}
        labelled = "–" if q is None else f"{q['labelled']}/{q['solutions']}"
        quality = ["–"] * 3 if q is None else [_pct(q["accuracy"]), _num(q["kappa"]), _pct(q["first_error_agreement"])]
        prm = [_num(p.get(k)) for k in ("auroc", "pairwise_min", "pairwise_last", "first_error_f1", "ece")]
        if e.get("skipped"):
            prm = [f"no PRM: {e['skipped']}"] + [""] * 4
        lines.append(f"| {name} | {labelled} | {c['continuations']} | {c['judge_calls']} | {_seconds(c['seconds'])} | "
                     + " | ".join(quality + prm) + " |")  # fmt: skip
    return lines


def bon_table(data: dict[str, Any]) -> list[str]:
    """Best-of-N at N: each PRM selector against majority voting, and the vote against the exact source's vote."""
    lines = [
        "| source | " + " | ".join(f"{SELECTOR_NAMES[s]} (− majority, 95% CI, McNemar p)" for s in BON_SELECTORS)
        + " | vote − exact source's vote |",
        "|:---|" + "---|" * (len(BON_SELECTORS) + 1),
    ]  # fmt: skip
    for name, e in data["sources"].items():
        b = e.get("bon")
        if b is None:
            continue
        cells = [f"{_pct(b[s]['acc_b'])}: {_paired(b[s])}" for s in BON_SELECTORS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {_paired(b['vote_vs_exact'])} |")
    return lines


def error_table(data: dict[str, Any], by: str) -> list[str]:
    """Where each labelling's errors sit (``by``: ``by_category`` or ``by_position``): error rate (right steps
    labelled wrong / wrong steps labelled right) of the hard labels, one column per source with labels."""
    named = {n: e["quality"] for n, e in data["sources"].items() if e.get("quality") and n != "exact"}
    if not named:
        return []
    keys = list(dict.fromkeys(k for q in named.values() for k in q[by]))
    head = "step position" if by == "by_position" else "category"
    lines = [f"| {head} | steps | " + " | ".join(named) + " |", "|:---|---:|" + "---:|" * len(named)]
    for k in keys:
        first = next(q[by][k] for q in named.values() if k in q[by])
        cells = []
        for q in named.values():
            c = q[by].get(k)
            cells.append("–" if c is None else f"{_pct(c['error_rate'])} ({c['false_wrong']}/{c['missed']})")
        lines.append(f"| {k} | {first['steps']} | " + " | ".join(cells) + " |")
    return lines


def markdown(data: dict[str, Any]) -> str:
    """report.md."""
    s, b = data["solutions"], data["bon"]
    out = [f"# Label sources: exact, Monte-Carlo and judge labels on the same solutions ({data['preset']})", ""]
    if data["preset"] == "smoke":
        out += ["**Smoke run: its numbers measure nothing** (a few solutions, a few PRM steps).", ""]
    out += [
        f"Policy: `{data['policy'].get('policy')}`. Training solutions: {s['train']} ({s['train_steps']} steps, "
        f"{s['train_wrong_steps']} exactly wrong); held-out solutions: {s['heldout']}. Every source labels the same "
        f"training solutions; each PRM trains {data['prm_steps']} optimizer steps from the policy with the same "
        "recipe and seed, and is scored against the exact labels of the same held-out solutions.",
        "",
        "## Every source",
        "",
        "Labelled: solutions the source gave labels (a judge's invalid rows get none). Cost: continuations generated, "
        "judge calls, seconds of labelling. Step acc, κ (Cohen), first error same: the labels (V > 0 for Monte-Carlo) "
        "against the exact ones on the training solutions. PRM columns: on the held-out solutions against exact "
        "labels; pairwise: P(a right solution scores above a wrong one of the same problem), by the solution's "
        "lowest (min) or last step score.",
        "",
        *main_table(data),
        "",
        "![PRM quality against labelling cost](quality_vs_cost.png)",
        "",
        f"## Best-of-{b['n']} on {b['problems']} test problems",
        "",
        f"Majority voting {_pct(b['majority'])}, one sample {_pct(b['one_sample'])}, oracle pass@{b['n']} "
        f"{_pct(b['oracle'])}. Each cell: the selector's accuracy, then its difference from majority voting in points "
        "with Newcombe's paired 95% interval and the exact McNemar p on the same problems.",
        "",
        *bon_table(data),
        "",
        "## Where the label errors sit",
        "",
        "Error rate of each source's hard labels against exact ones; in brackets, right steps labelled wrong / wrong "
        "steps labelled right.",
        "",
        *error_table(data, "by_category"),
        "",
        *error_table(data, "by_position"),
        "",
    ]
    return "\n".join(out)


def cost_figure(data: dict[str, Any]):
    """PRM quality (step AUROC; within-problem pairwise accuracy, min) against labelling seconds, one point per
    source; the policy's own verifier (no labels) as a dashed line. ``None`` when no PRM was scored."""
    from posttrainlab.report.figstyle import FONT, FONT_MIN, figure, style

    points_ = [(n, e) for n, e in data["sources"].items() if e.get("prm") and e["kind"] != "baseline"]
    if not points_:
        return None
    base = data["sources"].get("baseline", {}).get("prm") or {}
    fig = figure(9.0, 3.8)
    panels = {"auroc": "step AUROC (held out, exact labels)", "pairwise_min": "within-problem pairwise accuracy (min)"}
    for ax, (key, label) in zip(fig.subplots(1, 2), panels.items(), strict=True):
        for name, e in points_:
            y = e["prm"].get(key)
            if y is None:
                continue
            colour, marker = KIND_STYLE[e["kind"]]
            x = max(e["cost"]["seconds"], 1e-3)
            ax.scatter([x], [y], color=colour, marker="D" if e["soft"] else marker, s=28, zorder=3)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=FONT_MIN)
        if base.get(key) is not None:
            ax.axhline(base[key], color="#7f7f7f", linestyle="--", linewidth=1, label="policy's own verifier")
            ax.legend(fontsize=FONT["legend"], loc="best", frameon=False)
        ax.set_xscale("log")
        ax.margins(x=0.2, y=0.1)  # room for the names beside the points
        style(ax, xlabel="labelling seconds (log scale)", ylabel=label)
    return fig


def write_report(cfg, layout: StudyLayout, identity: dict[str, Any]) -> Path:
    """Gather, then write ``study.json``, ``quality_vs_cost.png`` and ``report.md`` (last); return report.md."""
    from posttrainlab.data.atomic import atomic_path, write_text
    from posttrainlab.data.jsonl import write_json
    from posttrainlab.report.figstyle import rendered

    data = gather(cfg, layout, identity)
    write_json(layout.study_json, data, ensure_ascii=False)
    png = rendered(cost_figure(data))
    if png is not None:
        with atomic_path(layout.report_png) as tmp:
            tmp.write_bytes(png)
    write_text(layout.report_md, markdown(data))
    return layout.report_md


__all__ = ["bon_table", "cost_figure", "error_table", "gather", "main_table", "markdown", "write_report"]
