"""Two evaluations' sampled outcomes paired problem by problem: pass@1 and maj@K, B − A (``eval.sampled``'s formulas).

``sampled_comparison(a, b)`` reads two ``eval policy`` folders run with ``--samples K`` (their ``samples.jsonl``:
``samples``, ``n_correct``, ``maj_correct`` per problem) and returns pass@1's paired difference with its t interval
and paired t-test, and maj@K's with Newcombe's interval and the exact McNemar test (``eval.compare.pair_stats``),
overall and per category. ``posttrain eval compare A B`` adds it when both sides hold samples.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.compare import ALPHA, outcomes_file, paired
from posttrainlab.eval.policy import UNCATEGORISED
from posttrainlab.eval.sampled import add_votes, t_quantile, t_two_sided_p

#: ``{problem id: (category, correct samples, samples, majority vote correct)}``
Sampled = dict[str, tuple[str, int, int, bool]]


def paired_means(pairs: list[tuple[float, float]]) -> dict[str, Any]:
    """``n, mean_a, mean_b, diff, ci, t, p, significant`` of per-problem ``(a, b)`` values (module docstring).

    >>> s = paired_means([(0.0, 0.5), (0.25, 0.25), (0.5, 1.0), (0.25, 0.5)])  # d = .5, 0, .5, .25: s_d = .2394
    >>> s["diff"], round(s["t"], 4), round(s["p"], 4)
    (0.3125, 2.6112, 0.0796)
    """
    n = len(pairs)
    if n == 0:
        return {"n": 0, "mean_a": 0.0, "mean_b": 0.0, "diff": 0.0, "ci": [-1.0, 1.0], "t": None, "p": 1.0,
                "significant": False}  # fmt: skip
    d = [b - a for a, b in pairs]
    diff = sum(d) / n
    out = {"n": n, "mean_a": sum(a for a, _ in pairs) / n, "mean_b": sum(b for _, b in pairs) / n, "diff": diff}
    s = math.sqrt(sum((x - diff) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    if n < 2:
        t, p, ci = None, 1.0, [-1.0, 1.0]
    elif s == 0.0:
        t, p, ci = None, 1.0 if diff == 0 else 0.0, [diff, diff]
    else:
        se = s / math.sqrt(n)
        t, half = diff / se, t_quantile(n - 1) * se
        p, ci = t_two_sided_p(t, n - 1), [max(-1.0, diff - half), min(1.0, diff + half)]
    return {**out, "ci": ci, "t": t, "p": p, "significant": p < ALPHA}


def paired_sampled(a: Sampled, b: Sampled, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """B against A: ``{"pass_at_1": {"overall", "categories"}, "maj_at_k": eval.compare.paired(...) | None}``.

    The problems must be the same (``eval.compare.paired``'s refusal); maj@K is compared only when both drew the
    same K (``None`` otherwise: a majority of 4 and one of 16 are different measures).
    """
    maj = paired({i: (v[0], v[3]) for i, v in a.items()}, {i: (v[0], v[3]) for i, v in b.items()}, names)
    cats = list(maj["categories"])

    def stats(ids: list[str]) -> dict[str, Any]:
        return paired_means([(a[i][1] / a[i][2], b[i][1] / b[i][2]) for i in ids])

    same_k = {v[2] for v in a.values()} == {v[2] for v in b.values()} and len({v[2] for v in a.values()}) == 1
    return {
        "pass_at_1": {
            "overall": stats(list(a)),
            "categories": {c: stats([i for i in a if a[i][0] == c]) for c in cats},
        },
        "maj_at_k": maj if same_k else None,
    }


def read_sampled(path: str | os.PathLike) -> Sampled:
    """Per-problem sampled outcomes from an ``eval policy`` folder's (or file's) ``samples.jsonl`` rows; ``BadInput``
    when a row has no samples (an evaluation run without ``--samples``)."""
    from posttrainlab.data.jsonl import iter_jsonl

    file = outcomes_file(path)
    out: Sampled = {}
    for lineno, row in enumerate(iter_jsonl(file), start=1):
        samples = row.get("samples")
        if not isinstance(samples, list) or not samples or "id" not in row:
            raise BadInput(f"{file}:{lineno}: no id or no samples (evaluate with --samples K to compare sampling)")
        if "maj_correct" not in row:
            add_votes([row])
        category = UNCATEGORISED if row.get("category") is None else str(row["category"])
        out[str(row["id"])] = (category, int(row["n_correct"]), len(samples), bool(row["maj_correct"]))
    if not out:
        raise BadInput(f"{file}: no rows to compare")
    return out


def has_samples(path: str | os.PathLike) -> bool:
    """Whether ``path``'s first outcome row holds samples (``read_sampled`` would read it)."""
    from posttrainlab.data.jsonl import iter_jsonl

    try:
        first = next(iter(iter_jsonl(outcomes_file(path))), None)
    except (BadInput, OSError):
        return False
    return isinstance(first, dict) and isinstance(first.get("samples"), list) and bool(first["samples"])


def sampled_comparison(a: str | os.PathLike, b: str | os.PathLike) -> dict[str, Any]:
    """``paired_sampled`` of two evaluation folders (or files), with each side's sampling temperature when its
    ``metrics.json`` is beside the samples."""
    import json

    temperatures = []
    for side in (a, b):
        try:
            m = json.loads((Path(side) / "metrics.json").read_text(encoding="utf-8"))
            temperatures.append(m.get("sampled", {}).get("temperature"))
        except (OSError, ValueError, AttributeError):
            temperatures.append(None)
    result = paired_sampled(read_sampled(a), read_sampled(b), names=(str(a), str(b)))
    return {"temperature_a": temperatures[0], "temperature_b": temperatures[1], **result}


__all__ = ["Sampled", "has_samples", "paired_means", "paired_sampled", "read_sampled", "sampled_comparison"]
