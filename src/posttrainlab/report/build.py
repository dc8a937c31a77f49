"""Build the quickstart report: ``RUN/report.md`` and a self-contained ``RUN/report.html``.

Reads what ``posttrain quickstart`` leaves in a run folder, turns it into one list of blocks (headings,
paragraphs, tables, images) and renders that list twice (``posttrainlab.report.render``): as Markdown
with the plots as PNG files in ``RUN/report_files/``, and as HTML with the same PNGs embedded as base64
data URIs and a little inline CSS, so the HTML file can be sent on its own. One list rendered twice keeps
the two reports identical.

    RUN/run.json                          preset, stage timings, base model
    RUN/base/pretrain.json                the base model's held-out accuracy, loss history, contamination check
    RUN/<stage>/train_log.jsonl           one JSON object per logging step (sft, dpo, grpo)
    RUN/eval/<method>/metrics.json        accuracy, per category, with 95% intervals; outcome shares; ...
    RUN/eval/<method>-s<k>/metrics.json   further seeds of a method: mean ± sd beside its accuracy
    RUN/eval/<method>/samples.jsonl, RUN/best-of-n/, RUN/beam-search/   paired comparisons (report.paired),
                                          also written to RUN/report_files/compare.json

Any of these may be missing; its section is left out. A folder holding none of them is bad input
(``report.run_folder.load_run`` reads them). The outputs are replaced atomically (docs/design.md
"Reliability conventions").
"""

from __future__ import annotations

import json
from pathlib import Path

from posttrainlab.data.arith.corrupt import CORRUPTIONS
from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.data.atomic import check_output_folder, staging_dir, write_text
from posttrainlab.data.jsonl import write_json
from posttrainlab.report import orm_curves, paired, plots, results, trace_error
from posttrainlab.report.format import duration, pct, value, with_ci
from posttrainlab.report.gallery_html import gallery_section
from posttrainlab.report.hacking import hacking_blocks
from posttrainlab.report.plots import OUTCOMES, Stat, finite, method_label, ordered, stat, sub
from posttrainlab.report.render import Block, heading, image, paragraph, table, to_html, to_markdown
from posttrainlab.report.run_folder import RunFolder, load_run
from posttrainlab.report.sampled import sampled_section
from posttrainlab.run_layout import BON_PNG, COMPARE_JSON, PRM_CONFIG, PVO_PNG, RELIABILITY_PNG, RESULTS_JSON, RunLayout

# --- formatting -------------------------------------------------------------------------------------


def separated(a: Stat, b: Stat) -> bool | None:
    """Whether two 95% intervals do not overlap (``None`` when either has no interval).

    Non-overlap is a conservative test of a difference: it is rarer than a significant difference, so a
    change it flags is not noise, and one it misses may still be real.

    >>> separated(Stat(0.40, 0.31, 0.50), Stat(0.62, 0.52, 0.71))
    True
    >>> separated(Stat(0.40, 0.30, 0.50), Stat(0.45, 0.35, 0.55))
    False
    """
    if None in (a.lo, a.hi, b.lo, b.hi):
        return None
    return b.lo > a.hi or b.hi < a.lo


def _change(name: str, a: Stat, b: Stat) -> str:
    sep = separated(a, b)
    note = {True: "intervals do not overlap", False: "intervals overlap", None: "no intervals"}[sep]
    return f"{name} {pct(a.value)} → {pct(b.value)} ({100 * (b.value - a.value):+.1f} points, {note})"


def what_changed(metrics: dict[str, dict]) -> list[str]:
    """One plain sentence per method against SFT: overall, then the categories whose intervals separate."""
    ref = metrics.get("sft")
    if ref is None:
        return []
    lines = []
    for method in [m for m in metrics if m not in ("base", "sft")]:
        m = metrics[method]
        parts = []
        a, b = stat(ref.get("accuracy")), stat(m.get("accuracy"))
        if a and b:
            parts.append(_change("overall", a, b))
        ref_cats, cats = sub(ref, "per_category"), sub(m, "per_category")
        shared = [c for c in ordered(cats, CATEGORIES) if c in ref_cats]
        moved = []
        for c in shared:
            a, b = stat(ref_cats[c]), stat(cats[c])
            if a and b and separated(a, b):
                moved.append(_change(c, a, b))
        if shared:
            rest = "all categories within noise" if not moved else "others within noise"
            parts += moved + ([rest] if len(moved) < len(shared) else [])
        if parts:
            lines.append(f"{method_label(method)} vs SFT: " + "; ".join(parts) + ".")
    return lines


def figures(run: RunFolder) -> dict[str, bytes]:
    """Every plot the run's files allow, by file stem (``training_sft``, ``category_accuracy``, ...)."""
    out = {}
    curves = dict(run.logs)
    if isinstance(run.pretrain.get("log_history"), list):
        curves = {"pretrain": [r for r in run.pretrain["log_history"] if isinstance(r, dict)], **curves}
    for stage, rows in curves.items():
        out[f"training_{stage}"] = plots.training_curves(stage, rows)
    out["category_accuracy"] = plots.category_accuracy(run.metrics)
    out["outcome_shares"] = plots.outcome_shares(run.metrics)
    out["preference_accuracy"] = plots.preference_accuracy(run.metrics)
    layout = RunLayout(run.path)
    for name, path in (
        ("prm_reliability", layout.prm_eval / RELIABILITY_PNG),
        ("best_of_n", layout.best_of_n / BON_PNG),
        (orm_curves.IMAGE, layout.best_of_n / PVO_PNG),  # drawn by best-of-N when an ORM scored
    ):
        if path.is_file():
            out[name] = path.read_bytes()
    return {k: v for k, v in out.items() if v is not None}


def blocks(run: RunFolder, images: list[str], comparisons: dict | None = None,
           hacking: list[Block] | None = None) -> list[Block]:  # fmt: skip
    """The whole report, in order; ``images`` names the plots that exist, ``comparisons`` is
    ``report.paired.comparisons`` of the run and ``hacking`` the reward-hacking section (``report.hacking``; each
    computed when not given)."""
    info, metrics = run.info, run.metrics
    if comparisons is None:
        comparisons = paired.comparisons(run.path, list(metrics))
    if hacking is None:
        hacking = hacking_blocks(run.path)[0]
    summary = results.summarize(info, metrics, comparisons, run.bon, run.bf16)
    out = [heading(f"posttrain quickstart report: {run.path.name}", 1)]
    out += results.headline(summary, run.stages)  # also the console's, at the end
    facts = [f"{k.replace('_', ' ')}: {info[k]}" for k in ("preset", "base_model", "started", "finished") if k in info]
    datas = sorted(
        {f"{m['data']} ({m.get('split', '?')}, n={m.get('n', '?')})" for m in metrics.values() if m.get("data")}
    )
    if datas:
        facts.append("evaluated on " + ", ".join(datas))
    if facts:
        out.append(paragraph("; ".join(facts) + "."))
    out += results.results_blocks(summary)
    changed = what_changed(metrics)
    if changed:
        how = "A change is called out when the two 95% intervals do not overlap"
        more = " (a conservative test; the paired comparisons below test each difference problem by problem)."
        out += [heading("What changed"), paragraph(how + (more if comparisons["methods"] else "."))]
        out += [paragraph(line) for line in changed]
    out += _accuracy_section(metrics, images, run.seeds)
    out += paired.paired_section(comparisons)
    out += _outcome_section(metrics, images)
    out += _preference_section(metrics, images)
    out += _passk_section(metrics)
    out += sampled_section(run.path, metrics)  # pass@1 and maj@K beside greedy, paired with SFT
    out += trace_error.blocks(run.path)  # right answers through a wrong step (Uesato et al. 2022), paired with SFT
    out += _prm_section(run.prm, images)
    out += _bon_section(run.bon, images)
    out += orm_curves.blocks(run.path, images)  # process vs outcome at each N, when an ORM scored the samples
    out += gallery_section(run)  # a few problems' samples, lines coloured by PRM score (report.gallery)
    curves = [n for n in images if n.startswith("training_")]
    if curves:
        out.append(heading("Training curves"))
        out += [image(n, _curve_caption(n.removeprefix("training_"))) for n in curves]
    out += hacking  # GRPO: the reward model's score beside exact accuracy over steps
    out += _base_section(run.pretrain)
    out += _timings_section(info.get("stages"))
    out += paired.provenance_section(info)
    return out


def _curve_caption(stage: str) -> str:
    return "Base model pretraining loss" if stage == "pretrain" else f"{method_label(stage)} training curves"


def _accuracy_section(metrics: dict[str, dict], images: list[str], seeds: dict[str, list[dict]]) -> list[Block]:
    if not metrics:
        return []
    rows = []
    for method, m in metrics.items():
        acc, gen = sub(m, "accuracy"), sub(m, "generation")
        count = f"{acc['correct']} / {acc['n']}" if {"correct", "n"} <= set(acc) else "–"
        rps = f"{gen['requests_per_s']:.1f}" if finite(gen.get("requests_per_s")) else "–"
        spread = [paired.seed_cell(m, seeds.get(method, []))] if seeds else []
        accuracy = [method_label(method), with_ci(stat(m.get("accuracy"))), *spread]
        rows.append([*accuracy, count, pct(value(m.get("format_rate"))), rps])
    header = ["method", "accuracy [95% CI]", *(["mean ± sd over seeds"] if seeds else [])]
    out = [heading("Overall accuracy"), table([*header, "correct / n", "format rate", "eval requests/s"], rows)]
    if "category_accuracy" in images:
        out.append(image("category_accuracy", "Accuracy overall and per category, methods side by side"))
    cats = ordered({c for m in metrics.values() for c in sub(m, "per_category")}, CATEGORIES)
    if cats:
        rows = [[c] + [with_ci(stat(sub(m, "per_category").get(c))) for m in metrics.values()] for c in cats]
        out += [heading("Accuracy per category"), table(["category", *map(method_label, metrics)], rows)]
    return out


def _outcome_section(metrics: dict[str, dict], images: list[str]) -> list[Block]:
    shares = {m: plots.shares_of_outcomes(v) for m, v in metrics.items() if plots.shares_of_outcomes(v)}
    if not shares:
        return []
    kinds = ordered({k for s in shares.values() for k in s}, OUTCOMES)
    rows = [[method_label(m)] + [pct(value(s.get(k))) for k in kinds] for m, s in shares.items()]
    out = [heading("Outcome types"), table(["method", *kinds], rows)]
    if "outcome_shares" in images:
        out.append(image("outcome_shares", "Outcome types per method"))
    return out


def _preference_section(metrics: dict[str, dict], images: list[str]) -> list[Block]:
    prefs = {m: sub(v, "preference") for m, v in metrics.items() if sub(v, "preference")}
    if not prefs:
        return []
    how = "; ".join(f"{method_label(m)} by {p.get('method', '?')}" for m, p in prefs.items())
    corrs = ordered({c for p in prefs.values() for c in sub(p, "per_corruption")}, CORRUPTIONS)
    rows = [["all pairs"] + [with_ci(stat(p.get("accuracy"))) for p in prefs.values()]]
    rows += [[c] + [with_ci(stat(sub(p, "per_corruption").get(c))) for p in prefs.values()] for c in corrs]
    out = [
        heading("Preference accuracy"),
        paragraph(f"Share of preference_test pairs where the policy ranks chosen above rejected ({how})."),
        table(["corruption", *map(method_label, prefs)], rows),
    ]
    if "preference_accuracy" in images:
        out.append(image("preference_accuracy", "Preference accuracy per corruption type"))
    return out


def _passk_section(metrics: dict[str, dict]) -> list[Block]:
    passk = {m: sub(v, "pass_at_k") for m, v in metrics.items() if sub(v, "pass_at_k")}
    if not passk:
        return []
    cats = ordered({c for p in passk.values() for c in sub(p, "per_category")}, CATEGORIES)
    rows = [
        [method_label(m), str(p.get("k", "?")), with_ci(stat(p.get("value")))]
        + [with_ci(stat(sub(p, "per_category").get(c))) for c in cats]
        for m, p in passk.items()
    ]
    return [heading("pass@k"), table(["method", "k", "overall", *cats], rows)]


def _prm_section(m: dict, images: list[str]) -> list[Block]:
    """The step PRM on held-out arith-prm solutions (exact labels): wrong-class P/R/F1, AUROC, first error, ECE."""
    step, first, cal = sub(m, "step"), sub(m, "first_error"), sub(m, "calibration")
    if not step:
        return []
    sweep = sub(m, "first_error_sweep")
    f1s = sweep.get("f1") if isinstance(sweep.get("f1"), list) else []
    best = max(((f, t) for f, t in zip(f1s, sweep.get("thresholds", []), strict=False) if finite(f)), default=None)
    rows = [
        ["wrong-step precision / recall / F1", f"{pct(value(step.get('precision')))} / "
         f"{pct(value(step.get('recall')))} / {pct(value(step.get('f1')))}"],
        ["step AUROC", f"{value(step.get('auroc')):.3f}" if finite(value(step.get("auroc"))) else "–"],
        [f"first-error F1 at {m.get('threshold', '?')}", pct(value(first.get("f1")))],
        ["best first-error F1 over the sweep (threshold tuned on this data)",
         f"{pct(best[0])} at {best[1]}" if best else "–"],
        ["expected calibration error", f"{value(cal.get('ece')):.3f}" if finite(value(cal.get("ece"))) else "–"],
    ]  # fmt: skip
    out = [
        heading("Process reward model"),
        paragraph(
            f"A step PRM ({_head_words(m.get('model'))}) trained on arith-prm solutions sampled from the SFT policy "
            f"and labelled exactly, scored on {m.get('solutions', '?')} held-out solutions "
            f"({m.get('steps', '?')} steps, {m.get('wrong_steps', '?')} wrong) from dev and validation problems."
        ),
        table(["metric", "value"], rows),
    ]
    if "prm_reliability" in images:
        out.append(image("prm_reliability", "PRM reliability: predicted P(correct) against the observed share"))
    return out


#: how the report names each PRM head (prm.heads)
HEAD_WORDS = {
    "token-cls": "token-classification head",
    "verdict": "verdict-token head",
    "result": "result head: the SFT policy's own probability of each line's result, fine-tuned on the step labels",
}


def _head_words(model) -> str:
    """The PRM's head in words, from its ``prm_config.json`` (a token-classification head when there is none)."""
    try:
        head = json.loads((Path(str(model)) / PRM_CONFIG).read_text(encoding="utf-8")).get("head")
    except (OSError, ValueError, AttributeError):
        head = None
    return HEAD_WORDS.get(head, HEAD_WORDS["token-cls"])


def _bon_section(b: dict, images: list[str]) -> list[Block]:
    """Best-of-N accuracy per selector and N, with 95% intervals."""
    selectors = sub(b, "selectors")
    if not selectors:
        return []
    ns = [str(n) for n in b.get("ns", [])]
    rows = [[name] + [with_ci(stat(sub(per_n, n))) for n in ns] for name, per_n in selectors.items()]
    if sub(b, "oracle"):
        rows.append(["oracle pass@N (any sample right)"] + [with_ci(stat(sub(b["oracle"], n))) for n in ns])
    out = [
        heading("Best-of-N"),
        paragraph(
            f"{b.get('problems', '?')} {b.get('split', 'test')} problems, N samples each from the SFT policy "
            f"(temperature {sub(b, 'sampling').get('temperature', '?')}); one pick per problem by the PRM "
            f"(min / last / product / mean of step scores), by majority vote over answers, or by PRM-weighted vote "
            f"({b.get('vote_aggregation', '?')} aggregation). Ties: {b.get('tie_rule', '?')}."
        ),
        table(["selector", *[f"N={n}" for n in ns]], rows),
    ]
    if "best_of_n" in images:
        out.append(image("best_of_n", "Best-of-N accuracy against N"))
    return out


def _base_section(pre: dict) -> list[Block]:
    held, cont, params = pre.get("heldout_accuracy"), pre.get("contamination"), pre.get("parameters")
    if not (isinstance(held, dict) or isinstance(cont, dict) or finite(params)):
        return []
    out = [heading("Base model")]
    if finite(params):
        out.append(paragraph(f"{params / 1e6:.1f}M parameters ({params:,})."))
    if isinstance(held, dict) and held:
        out.append(table(["operation", "held-out accuracy"], [[op, pct(value(v))] for op, v in held.items()]))
    if isinstance(cont, dict):
        overlap = cont.get("overlap")
        verdict = "no overlap" if overlap == 0 else f"overlap {overlap}" if overlap is not None else "result"
        extra = "; ".join(
            f"{k.replace('_', ' ')}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in cont.items()
            if k != "overlap" and not isinstance(v, dict)
        )
        out.append(
            paragraph(
                f"Contamination check against arith-v1's evaluation pools: {verdict}"
                + (f" ({extra})." if extra else ".")
            )
        )
    return out


def _timings_section(stages) -> list[Block]:
    if not isinstance(stages, list) or not stages:
        return []
    rows, total = [], 0.0
    stages = [s for s in stages if isinstance(s, dict)]
    runs = len({s.get("run", 1) for s in stages}) > 1  # made by several invocations: say which made each
    for s in stages:
        secs = s.get("seconds")
        total += secs if finite(secs) else 0.0
        status = str(s.get("status", "?")) + (f" (run {s.get('run', 1)})" if runs else "")
        rows.append([str(s.get("name", "?")), status, duration(secs) if finite(secs) else "–"])
    rows.append(["total", "", duration(total)])
    return [heading("Stage timings"), table(["stage", "status", "time"], rows)]


def build_report(run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``RUN/report_files/*.png``, ``RUN/report.md`` and ``RUN/report.html``; return the two report paths."""
    run = load_run(run_dir)
    images = figures(run)
    comparisons = paired.comparisons(run.path, list(run.metrics))
    hacking, pngs = hacking_blocks(run.path)
    images.update(pngs)
    report = blocks(run, list(images), comparisons, hacking)
    layout = RunLayout(run.path)
    md_path, html_path = layout.report_md, layout.report_html
    # the folder is replaced whole: refuse one holding anything but the report's own plots
    files = check_output_folder(
        layout.report_files, lambda rel: rel in (COMPARE_JSON, RESULTS_JSON) or "/" not in rel and rel.endswith(".png"),
        what="report",
    )  # fmt: skip
    summary = results.summarize(run.info, run.metrics, comparisons, run.bon, run.bf16)
    with staging_dir(files) as tmp:
        for name, png in images.items():
            (tmp / f"{name}.png").write_bytes(png)  # the whole folder is swapped in at once
        if paired.has_any(comparisons):
            write_json(tmp / COMPARE_JSON, comparisons)
        # the headline numbers (report.results), strict JSON: a reference run's copy is the README's table
        write_json(tmp / RESULTS_JSON, summary)
    write_text(md_path, to_markdown(report))
    write_text(html_path, to_html(report, images))
    return md_path, html_path
