"""The report's paired comparisons, seed spread and provenance (issue #15).

Paired comparisons are computed here from the run folder's per-problem outcomes, not read from a
file the quickstart wrote, so ``posttrain report`` on any run folder (an older one, one edited by
hand) tests what is there (``eval.compare``: Newcombe's paired interval, McNemar's exact test):

    RUN/eval/<method>/samples.jsonl       every method but base and SFT, against RUN/eval/sft
    RUN/best-of-n/{samples,scores}.jsonl  each selector at the largest N, against majority voting
    RUN/beam-search/outcomes.jsonl        beam search against majority voting at the largest N
    RUN/best-of-n/bon.json, RUN/beam-search/beam.json   "tokens_per_problem" (beam.json's
                                          "best_of_n_tokens_per_problem" for best-of-N), shown where present

``comparisons(run_dir, methods)`` returns them as one JSON object (``RUN/report_files/compare.json``),
``paired_section`` turns it into report blocks. A pair that cannot be compared (different problems,
a malformed file) gets a sentence saying why, never a failed report.

Eval folders named ``<method>-s<k>`` (k >= 1) beside ``<method>`` are further seeds of that method
(``seed_folders``); the accuracy table shows the mean ± sample sd of the overall accuracy over the
method's folder and all its seeds (``seed_spread``), and they are not rows of their own.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import json_object_or_empty
from posttrainlab.errors import BadInput
from posttrainlab.eval.compare import describe, p_value, paired, points, verdict
from posttrainlab.report.format import pct, value
from posttrainlab.report.plots import finite, method_label, sub
from posttrainlab.report.render import Block, heading, paragraph, table
from posttrainlab.run_layout import BEAM, BON, OUTCOMES, SAMPLES, SCORES, RunLayout
from posttrainlab.runners.compare import best_of_n_outcomes, read_outcomes

SEEDED = re.compile(r"^(?P<method>.+)-s(?P<k>[1-9][0-9]*)$")


def seed_folders(names: Iterable[str]) -> dict[str, str]:
    """``{seeded folder: method}`` for every ``<method>-s<k>`` (k >= 1) whose ``<method>`` is also there.

    >>> seed_folders(["sft", "grpo", "grpo-s2", "grpo-s1", "dpo-s1", "grpo-s0"])
    {'grpo-s1': 'grpo', 'grpo-s2': 'grpo'}
    """
    names = set(names)
    found = [(m["method"], int(m["k"]), n) for n in names if (m := SEEDED.match(n)) and m["method"] in names]
    return {name: method for method, _, name in sorted(found)}


def seed_spread(accuracies: list[float]) -> str:
    """``mean ± sd over K seeds`` (sd: the sample standard deviation, in points); ``–`` for fewer than 2.

    >>> seed_spread([0.40, 0.44, 0.42])
    '42.0% ± 2.0 over 3 seeds'
    >>> seed_spread([0.4])
    '–'
    """
    if len(accuracies) < 2:
        return "–"
    return f"{pct(statistics.mean(accuracies))} ± {100 * statistics.stdev(accuracies):.1f} over {len(accuracies)} seeds"


def seed_cell(metrics: dict, seeds: list[dict]) -> str:
    """The spread of overall accuracy over a method's metrics and those of its seeds (``seed_spread``)."""
    accs = [value(m.get("accuracy")) for m in [metrics, *seeds]]
    return seed_spread([a for a in accs if a is not None])


# --- computing ----------------------------------------------------------------------------------------


def _method_comparisons(run_dir: Path, methods: list[str], out: dict) -> None:
    others = [m for m in methods if m not in ("base", "sft")]
    layout = RunLayout(run_dir)
    if "sft" not in methods or not others or not (layout.eval_dir("sft") / SAMPLES).is_file():
        return
    try:
        sft = read_outcomes(layout.eval_dir("sft"))
    except BadInput as e:
        out["not_compared"]["SFT"] = str(e)
        return
    read: dict[str, Any] = {}  # each method's outcomes, read once for both its comparisons
    for m in others:
        folder = layout.eval_dir(m)
        if not (folder / SAMPLES).is_file():
            continue
        try:
            read[m] = read_outcomes(folder)
            result = paired(sft, read[m], names=("SFT", method_label(m)))
        except BadInput as e:
            out["not_compared"][f"{method_label(m)} vs SFT"] = str(e)
            continue
        out["methods"][m] = {"a": "eval/sft", "b": f"eval/{m}", **result}
    for a, b in HEAD_TO_HEAD:  # pairs read against each other too, beside each against SFT
        if a in out["methods"] and b in out["methods"]:
            result = paired(read[a], read[b], names=(method_label(a), method_label(b)))
            out["head_to_head"][f"{b} vs {a}"] = {"a": f"eval/{a}", "b": f"eval/{b}", **result}


#: method pairs compared directly too, (A, B): B − A: the two DPO pair sources; GRPO with the PRM's reward against
#: GRPO with the outcome reward alone (the same steps), and the PRM alone against each; RFT against its more-training
#: control, and RFT keeping exactly right solutions against RFT keeping every right answer (what step labels buy it)
HEAD_TO_HEAD = (("dpo", "dpo-policy"), ("grpo", "grpo-prm"), ("grpo", "grpo-prm-only"), ("grpo-prm", "grpo-prm-only"),
                ("sft-continued", "rft"), ("rft-answer", "rft"))  # fmt: skip


def _search_comparisons(run_dir: Path, out: dict) -> None:
    layout = RunLayout(run_dir)
    bon, beam = layout.best_of_n, layout.beam_search / OUTCOMES
    has_bon = (bon / SAMPLES).is_file() and (bon / SCORES).is_file()
    if not has_bon:
        if beam.is_file():
            out["not_compared"]["beam search"] = (
                "no best-of-N run (best-of-n/samples.jsonl, scores.jsonl) to compare with"
            )
        return
    try:
        n, per = best_of_n_outcomes(bon)
        if "majority" not in per:
            raise BadInput(f"{bon / SCORES}: no majority selector to compare with")
        majority = per.pop("majority")
        out["best_of_n"] = {
            "n": n,
            "selectors": {s: {"a": "majority", "b": s, **paired(majority, o, ("majority", s))} for s, o in per.items()},
        }
    except BadInput as e:
        out["not_compared"]["best-of-N selectors"] = str(e)
        return
    if beam.is_file():
        try:
            result = paired(majority, read_outcomes(beam), names=(f"majority at N={n}", "beam search"))
            out["beam_search"] = {"n": n, "a": "majority", "b": "beam-search/outcomes.jsonl", **result}
        except BadInput as e:
            out["not_compared"]["beam search"] = str(e)


def comparisons(run_dir: str | Path, methods: list[str]) -> dict[str, Any]:
    """Every paired comparison the run folder allows (module docstring), as ``compare.json`` holds them.

    ``methods`` are the eval folders that are rows of the report (seeded folders left out).
    """
    run_dir = Path(run_dir)
    out: dict[str, Any] = {"methods": {}, "head_to_head": {}, "best_of_n": None, "beam_search": None,
                           "not_compared": {}}  # fmt: skip
    _method_comparisons(run_dir, methods, out)
    _search_comparisons(run_dir, out)
    layout = RunLayout(run_dir)
    bon, beam = json_object_or_empty(layout.best_of_n / BON), json_object_or_empty(layout.beam_search / BEAM)
    tokens = {  # beam search records best-of-N's count beside its own when given the best-of-N folder
        "best-of-N": bon.get("tokens_per_problem", beam.get("best_of_n_tokens_per_problem")),
        "beam search": beam.get("tokens_per_problem"),
    }
    out["tokens_per_problem"] = {k: v for k, v in tokens.items() if v is not None}
    return out


def has_any(comp: dict[str, Any]) -> bool:
    """Whether ``comparisons`` found anything to report (a comparison or a reason one was not made)."""
    return bool(comp["methods"] or comp["best_of_n"] or comp["beam_search"] or comp["not_compared"])


# --- the blocks ---------------------------------------------------------------------------------------


def _row(name: str, s: dict[str, Any]) -> list[str]:
    return [name, str(s["n"]), pct(s["acc_a"]), pct(s["acc_b"]), points(s["diff"], s["ci"]), str(s["b"]),
            str(s["c"]), p_value(s["mcnemar_p"])]  # fmt: skip


def _tokens_text(tokens: Any) -> str:
    return f"{tokens:,.1f}" if finite(tokens) else str(tokens)


def paired_section(comp: dict[str, Any]) -> list[Block]:
    """Method vs SFT tables (overall and per category), selectors and beam search vs majority, in words."""
    if not has_any(comp):
        return []
    out = [
        heading("Paired comparisons"),
        paragraph(
            "Each difference is tested problem by problem on the same problems: B − A in percentage points with "
            "Newcombe's (1998) paired 95% interval, and McNemar's exact test on the problems only one side gets "
            "right (b: A right and B wrong; c: A wrong and B right). Significant means p < 0.05."
        ),
    ]
    for m, r in comp["methods"].items():
        label = method_label(m)
        rows = [_row(name, s) for name, s in {"overall": r["overall"], **r["categories"]}.items()]
        out += [
            heading(f"{label} vs SFT", 3),
            table(["group", "n", "SFT", label, f"{label} − SFT [95% CI]", "b", "c", "McNemar p"], rows),
            paragraph(f"{describe(f'{label} − SFT', r['overall'])}. {verdict(r)}"),
        ]
    for r in comp.get("head_to_head", {}).values():
        la, lb = method_label(r["a"].split("/")[-1]), method_label(r["b"].split("/")[-1])
        rows = [_row(name, s) for name, s in {"overall": r["overall"], **r["categories"]}.items()]
        out += [
            heading(f"{lb} vs {la}", 3),
            table(["group", "n", la, lb, f"{lb} − {la} [95% CI]", "b", "c", "McNemar p"], rows),
            paragraph(f"{describe(f'{lb} − {la}', r['overall'])}. {verdict(r)}"),
        ]
    bon, beam = comp["best_of_n"], comp["beam_search"]
    if bon:
        n = bon["n"]
        rows = [_row(s, r["overall"]) for s, r in bon["selectors"].items()]
        words = [describe(f"{s} − majority", r["overall"]) for s, r in bon["selectors"].items()]
        if beam:
            rows.append(_row("beam search", beam["overall"]))
            words.append(describe("beam search − majority", beam["overall"]))
        out += [
            heading(f"Search vs majority vote at N = {n}", 3),
            table(["method", "n", "majority", "method acc", "method − majority [95% CI]", "b", "c", "McNemar p"], rows),
            paragraph("; ".join(words) + "."),
        ]
    if comp["tokens_per_problem"]:
        shown = ", ".join(f"{k} {_tokens_text(v)}" for k, v in comp["tokens_per_problem"].items())
        out.append(paragraph(f"Generated tokens per problem: {shown}."))
    out += [paragraph(f"{what} not compared: {why}.") for what, why in comp["not_compared"].items()]
    return out


def provenance_section(info: dict) -> list[Block]:
    """Commit, versions, device, threads, command line, seeds, host and time from run.json's ``provenance``."""
    p = sub(info, "provenance")
    if not p:
        return []
    rows = []
    if "commit" in p:
        commit = p["commit"] or "not a git checkout"
        rows.append(["commit", f"{commit} (with uncommitted changes)" if p.get("dirty") else str(commit)])
    versions = sub(p, "versions")
    if versions:
        rows.append(["versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None)])
    if p.get("device"):
        rows.append(["device", str(p["device"])])
    if p.get("threads") is not None:
        rows.append(["threads", str(p["threads"])])
    if isinstance(p.get("argv"), list):
        rows.append(["command line", " ".join(map(str, p["argv"]))])
    seeds = p.get("seeds")
    if seeds:
        rows.append(
            ["seeds", ", ".join(f"{k} {v}" for k, v in seeds.items()) if isinstance(seeds, dict) else str(seeds)]
        )
    host = sub(p, "host")
    if host:
        rows.append(["host", f"{host.get('platform', '?')}, {host.get('cpus', '?')} CPUs"])
    if p.get("time"):
        rows.append(["time (UTC)", str(p["time"])])
    return [heading("Provenance"), table(["", "value"], rows)] if rows else []
