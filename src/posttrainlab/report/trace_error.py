"""The report's trace-error section: right answers reached through a wrong step, per method, each paired with SFT.

Trace error (Uesato et al. 2022; ``eval.trace_error``): among the samples whose final answer is right, the share
holding at least one wrong step by arith-v1's exact program labels. For every ``eval policy`` folder under
``RUN/eval`` (``base``, ``sft``, ``sft-continued``, ``dpo``, ``grpo``, ``rft``, any other; the seed folders
``<method>-s<k>`` left out, as in ``report.paired``) the section shows greedy trace error with its Wilson interval
and sampled trace error pooled over the K samples of every problem (when the folder holds samples), and each method
but base and SFT paired with SFT: greedy on the problems both answer right (exact McNemar), sampled per problem on
the problems both sample a right answer on (paired t-test).

Everything is computed from ``RUN/eval/<method>/samples.jsonl`` (``runners.compare.read_trace``), not read from
``metrics.json``: a folder written before ``eval policy`` recorded ``trace_error`` gets its numbers too, worked out
from its prompts and responses. A folder of another dataset (its first row no arith-v1 problem with a response) is
left out; one that cannot be read (a malformed row, a later row of another dataset) or paired gets a sentence saying
why, never a failed report.
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.errors import BadInput
from posttrainlab.eval.compare import p_value, points
from posttrainlab.eval.trace_error import SampledTrace, Trace, paired_sampled_trace, paired_trace, trace_share
from posttrainlab.report.format import pct, with_ci
from posttrainlab.report.paired import seed_folders
from posttrainlab.report.plots import METHODS, method_label, ordered, stat
from posttrainlab.report.render import Block, heading, paragraph, table, to_markdown
from posttrainlab.run_layout import SAMPLES, RunLayout

HEADER = ["method", "greedy trace error [95% CI]", "− SFT, both right (points)", "n", "McNemar p",
          "sampled trace error (pooled)", "− SFT, per problem (points)", "n", "p (paired t)"]  # fmt: skip
EXPLAINED = (
    "Trace error (Uesato et al. 2022): among the answers that are right, the share reached through at least one wrong "
    "step, by arith-v1's exact step labels (a calculation that is not the problem's program, or a wrong result). "
    "Greedy: wrong-step right answers / right answers, with a Wilson interval. Sampled: pooled over the K samples of "
    "every problem. Against SFT: greedy on the problems both answer right, by exact McNemar on the problems only one "
    "side reaches through a wrong step; sampled, the mean per-problem difference on the problems both sample a right "
    "answer on, by a paired t-test. Lower is better; a difference below 0 means fewer wrong steps than SFT."
)


def _greedy_cell(trace: Trace) -> str:
    s = trace_share(sum(v[1] and v[2] for v in trace.values()), sum(v[1] for v in trace.values()))
    return f"{with_ci(stat(s))} ({s['trace_error_count']}/{s['right_answers']})"


def _sampled_cell(sampled: SampledTrace | None) -> str:
    if sampled is None:
        return "–"
    s = trace_share(sum(v[2] for v in sampled.values()), sum(v[1] for v in sampled.values()), interval=False)
    return f"{pct(s['value'])} ({s['trace_error_count']}/{s['right_answers']})"


def trace_rows(run_root: str | Path) -> tuple[list[list[str]], list[str]]:
    """``(rows, reasons)``: one table row per eval folder of arith-v1 problems (``HEADER``), a sentence per one that
    cannot be read or paired. Folders of other datasets (no exact step labels) are left out."""
    from posttrainlab.runners.compare import has_trace, read_trace

    layout = RunLayout(Path(run_root))
    folders = [p.parent.name for p in layout.eval_root.glob(f"*/{SAMPLES}") if p.is_file() and has_trace(p)]
    seeded = seed_folders(folders)
    read: dict[str, tuple[Trace, SampledTrace | None]] = {}
    reasons: list[str] = []
    for m in ordered(set(folders) - set(seeded), METHODS):
        try:
            read[m] = read_trace(layout.eval_dir(m))
        except BadInput as e:
            reasons.append(f"{method_label(m)}: no trace error ({e}).")
    rows = []
    for m, (greedy, sampled) in read.items():
        cells: list[str] = ["–"] * 3
        sampled_cells: list[str] = ["–"] * 3
        if m not in ("base", "sft") and "sft" in read:
            sft_greedy, sft_sampled = read["sft"]
            try:
                g = paired_trace(sft_greedy, greedy, names=("SFT", method_label(m)))["overall"]
                cells = [points(g["diff"], g["ci"]), str(g["n"]), p_value(g["mcnemar_p"])]
                if sampled is not None and sft_sampled is not None:
                    s = paired_sampled_trace(sft_sampled, sampled, names=("SFT", method_label(m)))["overall"]
                    sampled_cells = [points(s["diff"], s["ci"]), str(s["n"]), p_value(s["p"])]
            except BadInput as e:
                reasons.append(f"{method_label(m)} is not paired with SFT on trace error: {e}")
        rows.append([method_label(m), _greedy_cell(greedy), *cells, _sampled_cell(sampled), *sampled_cells])
    return rows, reasons


def blocks(run_root: str | Path) -> list[Block]:
    """The section as report blocks; none when no eval folder holds arith-v1 rows (and none failed to read)."""
    rows, reasons = trace_rows(run_root)
    if not rows and not reasons:
        return []
    out: list[Block] = [heading("Trace error"), paragraph(EXPLAINED)]
    if rows:
        out.append(table(HEADER, rows))
    return out + [paragraph(r) for r in reasons]


def section(run_root: Path) -> str:
    """The section as Markdown (``blocks`` rendered by ``report.render.to_markdown``); ``""`` when there is none."""
    found = blocks(run_root)
    return to_markdown(found) if found else ""


__all__ = ["HEADER", "blocks", "section", "trace_rows"]
