"""The report's headline: the base it was made from, and one "Results" table of the main comparisons.

The README's results table is this table, rendered from the reference run's summary (``reference/<preset>.json``,
package data), so it cannot drift from the code: ``tests/test_readme.py`` renders it and compares it with the
README. ``summarize`` takes the numbers from what the report already computed (each method against SFT, each
best-of-N selector and beam search against majority voting, sampled pass@1 and maj@K); ``results_blocks`` renders
them; ``base_note`` says whether a run's base is the reference run's (then its numbers should be the README's to
the last problem) or not (then they move within the spread docs/experiments.md gives over three bases);
``headline`` holds the note, what the report opens with and ``posttrain quickstart`` prints above the table.

Written by hand: it only arranges numbers ``report.paired`` and the evaluations computed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from posttrainlab.eval.compare import p_value, points
from posttrainlab.report.format import pct
from posttrainlab.report.plots import finite, method_label, ordered, sub
from posttrainlab.report.render import Block, heading, paragraph, table

#: the reference runs' summaries: ``<preset>.json`` (written by ``posttrain report`` as report_files/results.json)
REFERENCE_DIR = Path(__file__).resolve().parent / "reference"

#: what the report and the quickstart's console say first about a smoke run (``headline``)
SMOKE_NOTE = "Smoke run: its numbers measure nothing (a few steps of each stage, to check the pipeline)."

#: the order of the policies' rows: SFT, then each method beside its control
ORDER = ("sft", "rft", "rft-answer", "sft-continued", "dpo", "dpo-policy", "grpo", "grpo-prm", "grpo-prm-only")

#: how the table names best-of-N selectors (``eval.best_of_n.SELECTORS``; others keep their own name)
SELECTOR_WORDS = {
    "prm_vote": "PRM-weighted vote",
    "prm_min": "PRM min (best-of-N)",
    "prm_last": "PRM last (best-of-N)",
    "prm_product": "PRM product (best-of-N)",
    "prm_mean": "PRM mean (best-of-N)",
    "orm": "ORM (best-of-N)",
    "orm_vote": "ORM-weighted vote",
}


def _num(x: Any) -> float | None:
    return float(x) if finite(x) else None  # results.json is strict JSON


def base_sha256(info: dict) -> str | None:
    """The SHA-256 of the base model's weights as run.json records them (``weights.base``), if one file."""
    files = sub(sub(info, "weights"), "base")
    shas = [v for v in files.values() if isinstance(v, str)]
    return shas[0] if len(shas) == 1 else None


def _against(overall: dict) -> dict:
    """A paired comparison's overall numbers (``eval.compare.paired``): B − A, its interval, b, c and McNemar p."""
    return {k: overall.get(k) for k in ("diff", "ci", "mcnemar_p", "b", "c")}


def summarize(info: dict, metrics: dict[str, dict], comparisons: dict, bon: dict,
              bf16: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The headline numbers of a run folder (``report_files/results.json``): plain JSON, no paths. ``bf16``: the
    models that trained under bf16 autocast (``optim.bf16``), recorded so a run can be told it differs there."""
    policies = []
    for m in ordered(metrics, ORDER):
        mm = metrics[m]
        if m == "base" or not isinstance(mm, dict):
            continue
        acc, sampled = sub(mm, "accuracy"), sub(mm, "sampled")
        row: dict[str, Any] = {"method": m, "accuracy": _num(acc.get("value")), "n": acc.get("n")}
        if sampled:
            row |= {"pass_at_1": _num(sub(sampled, "pass_at_1").get("value")),
                    "maj_at_k": _num(sub(sampled, "maj_at_k").get("value")), "k": sampled.get("n_samples")}  # fmt: skip
        against = sub(sub(comparisons, "methods"), m).get("overall")
        if isinstance(against, dict):
            row["vs_sft"] = _against(against)
        policies.append(row)
    search: dict[str, Any] = {}
    found = comparisons.get("best_of_n")
    if isinstance(found, dict) and found.get("selectors"):
        first = next(iter(found["selectors"].values()))["overall"]
        search = {"n": found.get("n"), "problems": first.get("n"), "majority": first.get("acc_a"), "rows": []}
        found = {name: r["overall"] for name, r in found["selectors"].items()}
        beam = comparisons.get("beam_search")
        if isinstance(beam, dict):
            found["beam search"] = beam["overall"]
        for name, o in found.items():
            search["rows"].append({"name": name, "accuracy": o.get("acc_b"), "vs_majority": _against(o)})
        search["pairwise_min"] = _num(sub(sub(bon, "within_problem"), "min").get("pairwise_accuracy"))
    return {"preset": info.get("preset"), "base_sha256": base_sha256(info), "policies": policies, "search": search,
            "bf16": sorted(bf16 or [])}  # fmt: skip


def _diff(d: Any) -> list[str]:
    if not isinstance(d, dict) or _num(d.get("diff")) is None:
        return ["", ""]
    ci = d.get("ci") if isinstance(d.get("ci"), (list, tuple)) and len(d["ci"]) == 2 else None
    p = _num(d.get("mcnemar_p"))
    diff = points(d["diff"], ci) if ci else f"{100 * d['diff']:+.1f}"
    return [diff, p_value(p) if p is not None else "–"]


def results_blocks(summary: dict) -> list[Block]:
    """The "Results" section: policies (greedy, sampled) against SFT, then search against majority voting."""
    policies, search = summary.get("policies") or [], summary.get("search") or {}
    if not policies and not search:
        return []
    rows = []
    for p in policies:
        sampled = [pct(p.get("pass_at_1")) if p.get("pass_at_1") is not None else "",
                   pct(p.get("maj_at_k")) if p.get("maj_at_k") is not None else ""]  # fmt: skip
        against = "" if p["method"] == "sft" else "SFT"
        rows.append([f"{method_label(p['method'])} (greedy, n={p.get('n')})", pct(p.get("accuracy")), *sampled,
                     against, *_diff(p.get("vs_sft"))])  # fmt: skip
    ks = sorted({p["k"] for p in policies if p.get("k")})
    if search:
        n = search.get("n")
        rows.append(
            [f"majority vote@{n} (n={search.get('problems')})", pct(search.get("majority")), "", "", "", "", ""]
        )
        for r in search.get("rows", []):
            name = SELECTOR_WORDS.get(r["name"], r["name"])
            label = name if r["name"] == "beam search" else f"{name}@{n}"
            rows.append([label, pct(r.get("accuracy")), "", "", "majority", *_diff(r.get("vs_majority"))])
    k = f"@{ks[0]}" if len(ks) == 1 else "@K"
    header = ["", "accuracy", f"pass@1 ({k[1:]} samples)", f"maj{k}", "B − A against", "B − A [95% CI]", "McNemar p"]
    out = [heading("Results"), table(header, rows)]
    notes = []
    if search.get("pairwise_min") is not None:
        notes.append(f"Within-problem pairwise accuracy of the PRM (min): {search['pairwise_min']:.3f}.")
    notes.append("Differences are in points, paired problem by problem (Newcombe interval, exact McNemar p).")
    return out + [paragraph(" ".join(notes))]


def headline(summary: dict, stages: dict[str, str] | None = None) -> list[Block]:
    """The base note (``base_note``), then ``SMOKE_NOTE`` for a smoke run: the report's first lines, and with the
    "Results" section (``results_blocks``) what ``posttrain quickstart`` prints when it ends."""
    note = base_note(summary, stages)
    smoke = [paragraph(SMOKE_NOTE)] if summary.get("preset") == "smoke" else []
    return ([paragraph(note)] if note else []) + smoke


def reference(preset: str | None) -> dict | None:
    """The reference run's summary for ``preset`` (the README's numbers), or None."""
    path = REFERENCE_DIR / f"{preset}.json"
    if not preset or not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def base_note(summary: dict, stages: dict[str, str] | None = None) -> str | None:
    """One sentence: the run's base SHA-256, and whether it is the reference run's (the README's numbers).

    ``stages`` is the run's ``{stage: settings hash}`` (``stages.json``): the README's numbers are promised only
    when the settings are the reference run's too. A run on dev, or with any other setting, is told so.
    """
    sha, ref = summary.get("base_sha256"), reference(summary.get("preset"))
    if not sha:
        return None
    said = f"Base model weights SHA-256 {sha[:16]}…"
    if ref is None:
        return f"{said} (no reference run for preset {summary.get('preset')!r})."
    theirs, other = ref.get("stages") or {}, []
    if stages and theirs:  # none recorded (a folder without stages.json): not known to differ
        names = (set(theirs) | set(stages)) - {"report"}
        other = sorted(name for name in names if stages.get(name) != theirs.get(name))
    if sha == ref.get("base_sha256"):
        mine, theirs_bf16 = summary.get("bf16"), ref.get("bf16")
        if not other and None not in (mine, theirs_bf16) and mine != theirs_bf16:
            return (f"{said}: the README's reference base and settings, but bf16 autocast trained "
                    f"{', '.join(theirs_bf16) or 'nothing'} there and {', '.join(mine) or 'nothing'} here (optim.bf16 "
                    f"auto is fp32 on a CPU without native bf16); so the numbers move within the spread "
                    f"docs/experiments.md gives over bases, not to the README's.")  # fmt: skip
        if other:
            return (f"{said}: the README's reference base, but these stages differ from the reference run's "
                    f"(other settings, or a stage only one of the two has): {', '.join(other)}; so the README's "
                    f"numbers are not this run's.")  # fmt: skip
        return (f"{said}: the README's reference base, so every number below should equal the README's "
                f"(reference commit {ref.get('commit', '?')}).")  # fmt: skip
    base = f"the README's reference base ({str(ref.get('base_sha256'))[:16]}…)"
    known = next((where for prefix, where in (ref.get("known_bases") or {}).items() if sha.startswith(prefix)), None)
    if known:
        return f"{said}: not {base} but one measured before: {known}."
    return (f"{said}: NOT {base}, and no run in docs/experiments.md had it: expect numbers within the spread "
            f"given there over bases, not the README's.")  # fmt: skip
