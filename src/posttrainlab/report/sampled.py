"""The report's sampled-metrics section: pass@1 and maj@K beside greedy accuracy, each method paired against SFT.

Shown when an evaluation holds ``sampled`` metrics (``posttrain eval policy --samples K``; the quickstart's
``eval.samples=K``). The paired tests are computed here from ``RUN/eval/<method>/samples.jsonl`` against
``RUN/eval/sft`` (``eval.sampled_compare``: pass@1 by the paired t-test, maj@K by exact McNemar); a pair that cannot
be compared gets a sentence saying why, never a failed report.
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.errors import BadInput
from posttrainlab.eval.compare import p_value, points
from posttrainlab.report.format import with_ci
from posttrainlab.report.plots import method_label, stat, sub
from posttrainlab.report.render import Block, heading, paragraph, table
from posttrainlab.run_layout import RunLayout


def sampled_section(run_dir: str | Path, metrics: dict[str, dict]) -> list[Block]:
    """Blocks for every evaluation with sampled metrics (none when there is none)."""
    from posttrainlab.runners.compare import sampled_comparison

    sampled = {m: sub(v, "sampled") for m, v in metrics.items() if sub(v, "sampled")}
    if not sampled:
        return []
    rows = []
    for m, s in sampled.items():
        maj = sub(s, "maj_at_k")
        rows.append([method_label(m), with_ci(stat(metrics[m].get("accuracy"))), with_ci(stat(s.get("pass_at_1"))),
                     with_ci(stat(maj)), str(s.get("n_samples", "?")), f"{s.get('temperature', '?')}"])  # fmt: skip
    out = [
        heading("Sampled accuracy"),
        paragraph("Greedy accuracy beside the policy sampled: pass@1 is the mean share of correct samples per problem "
                  "(t interval over problems), maj@K the majority answer of the K samples (Wilson interval)."),
        table(["method", "greedy [95% CI]", "pass@1 [95% CI]", "maj@K [95% CI]", "K", "temperature"], rows),
    ]  # fmt: skip
    if "sft" not in sampled:
        return out
    layout, paired, reasons = RunLayout(Path(run_dir)), [], []
    for m in sampled:
        if m in ("sft", "base"):
            continue
        try:
            c = sampled_comparison(layout.eval_dir("sft"), layout.eval_dir(m))
        except BadInput as e:
            reasons.append(f"{method_label(m)} is not compared with SFT: {e}")
            continue
        p1, maj = c["pass_at_1"]["overall"], c["maj_at_k"]
        majority = ["–", "–"] if maj is None else [points(maj["overall"]["diff"], maj["overall"]["ci"]),
                                                   p_value(maj["overall"]["mcnemar_p"])]  # fmt: skip
        paired.append([method_label(m), points(p1["diff"], p1["ci"]), p_value(p1["p"]), *majority])
    if paired:
        out += [
            heading("Sampled accuracy against SFT", 3),
            table(["method", "pass@1 − SFT (points)", "p (paired t)", "maj@K − SFT (points)", "p (McNemar)"], paired),
        ]
    return out + [paragraph(r) for r in reasons]


__all__ = ["sampled_section"]
