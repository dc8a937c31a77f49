"""Trace error (Uesato et al. 2022): among the samples whose final answer is right, the share with a wrong step.

Uesato et al. (2022), "Solving math word problems with process- and outcome-based feedback" (arXiv 2211.14275),
report beside final-answer error the **trace error**: the share of samples with a right final answer whose reasoning
holds at least one wrong step (on GSM8K: 14.0%, the previous best, to 3.4% with process-based feedback; 12.4% after
RL on final-answer correctness alone). They judged the steps by hand; on arith-v1 a program does
(``data.arith.steps``): a response's trace is right when ``first_error(problem, split_steps(response)) == -1``
(every calculation line is the reference program's, in its order, with its result, and the answer line is right),
the same test as RFT's ``filter: process`` (``data.arith.steps.exact_trace``); ``wrong_step`` is its negation. The
problem is read back from the row's question (``data.arith.steps.parse_question``); rows of another dataset have no
exact step labels and get no trace error.

- **greedy**: ``trace_error = #{right answer and a wrong step} / #{right answer}`` over the problems, with a 95%
  Wilson interval (``eval.intervals``; the problems are independent), ``trace_error_count`` the numerator and
  ``right_answers`` the denominator, overall and per category. ``value`` is ``None`` when no answer is right (the
  share is undefined, not 0). A wrong answer counts in neither term.
- **sampled** (``--samples K``): **pooled** over the K samples of every problem: ``Σ_i w_i / Σ_i r_i``, ``r_i``
  the right-answer samples of problem i and ``w_i`` those of them with a wrong step. No interval: the samples of a
  problem are not independent, and a Wilson interval over pooled samples would be too narrow.

Paired (two evaluations of the same problems, B − A):

- ``paired_trace``: over the problems **both** answer right (greedy), the pairs ``(wrong step in A, wrong step in
  B)`` go to ``eval.compare.paired`` (Newcombe's paired interval, exact McNemar on the discordant problems: b = A's
  trace wrong and B's right, c = A's right and B's wrong), overall and per category; ``trace_error_a`` and
  ``trace_error_b`` are the trace errors on those problems. The problems only one side answers right are not
  paired: there the question is accuracy, which ``eval.compare`` tests;
- ``paired_sampled_trace``: over the problems on which both sides sample at least one right answer, the per-problem
  trace errors ``w_i / r_i`` by ``eval.sampled_compare.paired_means`` (mean difference, t interval, paired t-test:
  the problem is the unit, as for pass@1). Its ``diff`` is a per-problem mean, not the pooled difference.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.data.arith.problems import CATEGORIES, Problem
from posttrainlab.data.arith.steps import problem_of
from posttrainlab.eval.compare import paired
from posttrainlab.eval.intervals import wilson_interval
from posttrainlab.eval.policy import ordered_groups
from posttrainlab.eval.sampled_compare import paired_means

#: ``{problem id: (category, right answer, wrong step)}`` of greedy responses
Trace = dict[str, tuple[str, bool, bool]]
#: ``{problem id: (category, right-answer samples, those of them with a wrong step)}``
SampledTrace = dict[str, tuple[str, int, int]]

POOLED = "over all K samples of every problem"


def wrong_step(problem: Problem, response: Any) -> bool:
    """Whether ``response`` holds a wrong step for ``problem``: not ``first_error(...) == -1`` (module docstring).

    A skipped calculation is no false claim (``data.arith.steps``): the last example's trace is right.

    >>> from posttrainlab.data.arith.steps import parse_question
    >>> p = parse_question("What is 11 * 10 - 6?")
    >>> wrong_step(p, "11 * 10 = 110\\n110 - 6 = 104\\nAnswer: 104")
    False
    >>> wrong_step(p, "11 * 10 = 110\\n110 - 6 = 105\\nAnswer: 104"), wrong_step(p, "11 * 10 = 110\\nAnswer: 104")
    (True, False)
    """
    from posttrainlab.data.arith.steps import exact_trace

    return not (isinstance(response, str) and exact_trace(problem, response))


def mark_rows(rows: list[dict]) -> bool:
    """In place, where absent: ``wrong_step`` on each row (its ``response``) and on each of its ``samples``, and
    ``n_trace_errors`` (right-answer samples with a wrong step) on rows with samples. Returns whether it did: not
    when a row is not an arith-v1 problem (nothing is changed then) or there are no rows."""
    problems = []
    for row in rows:
        problems.append(problem_of(row))
        if problems[-1] is None:
            return False
    if not rows:
        return False
    for row, problem in zip(rows, problems, strict=True):
        if "wrong_step" not in row:
            row["wrong_step"] = wrong_step(problem, row.get("response"))
        samples = row.get("samples")
        if isinstance(samples, list):
            for s in samples:
                if "wrong_step" not in s:
                    s["wrong_step"] = wrong_step(problem, s.get("response"))
            row["n_trace_errors"] = sum(bool(s["correct"]) and s["wrong_step"] for s in samples)
    return True


def trace_share(count: int, right: int, interval: bool = True) -> dict[str, Any]:
    """``{"value", "ci95", "trace_error_count", "right_answers"}``: ``count`` of ``right`` right answers have a wrong
    step; ``value`` ``None`` when ``right`` is 0; no ``ci95`` without ``interval``.

    >>> s = trace_share(1, 4)
    >>> s["value"], [round(x, 4) for x in s["ci95"]], trace_share(0, 0)["value"]
    (0.25, [0.0456, 0.6994], None)
    """
    out: dict[str, Any] = {"value": count / right if right else None}
    if interval:
        out["ci95"] = list(wilson_interval(count, right))
    return {**out, "trace_error_count": count, "right_answers": right}


def _grouped(rows: list[dict], categories: list[str], counts, interval: bool) -> dict[str, Any]:
    def share(rs: list[dict]) -> dict[str, Any]:
        count, right = (sum(x) for x in zip(*map(counts, rs), strict=True)) if rs else (0, 0)
        return trace_share(count, right, interval)

    return {**share(rows), "per_category": {c: share([r for r in rows if r["category"] == c]) for c in categories}}


def trace_metrics(rows: list[dict], categories: list[str]) -> dict[str, Any]:
    """Greedy trace error of rows ``mark_rows`` has seen, overall and per category (``categories``' order)."""
    return _grouped(rows, categories, lambda r: (int(bool(r["correct"]) and r["wrong_step"]), int(bool(r["correct"]))),
                    interval=True)  # fmt: skip


def sampled_trace_metrics(rows: list[dict], categories: list[str]) -> dict[str, Any]:
    """Sampled trace error pooled over every sample of rows ``mark_rows`` has seen, overall and per category."""

    def counts(r: dict) -> tuple[int, int]:
        return r["n_trace_errors"], sum(bool(s["correct"]) for s in r["samples"])

    return {**_grouped(rows, categories, counts, interval=False), "pooled": POOLED,
            "samples": sum(len(r["samples"]) for r in rows)}  # fmt: skip


# --- paired -------------------------------------------------------------------------------------------


def _same_problems(a: dict, b: dict, names: tuple[str, str]) -> None:
    """``eval.compare.paired``'s refusal of two sides covering different problems or categories."""
    paired({i: (v[0], True) for i, v in a.items()}, {i: (v[0], True) for i, v in b.items()}, names)


def paired_trace(a: Trace, b: Trace, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """B against A on the problems both answer right (module docstring): ``{"right_a", "right_b", "overall",
    "categories"}``, each group ``eval.compare.pair_stats``'s keys with ``trace_error_a``/``trace_error_b`` for
    ``acc_a``/``acc_b``. ``BadInput`` when the two cover different problems."""
    _same_problems(a, b, names)
    both = [i for i in a if a[i][1] and b[i][1]]
    result = paired({i: (a[i][0], a[i][2]) for i in both}, {i: (b[i][0], b[i][2]) for i in both}, names)

    def renamed(s: dict[str, Any]) -> dict[str, Any]:
        return {{"acc_a": "trace_error_a", "acc_b": "trace_error_b"}.get(k, k): v for k, v in s.items()}

    return {
        "right_a": sum(v[1] for v in a.values()),
        "right_b": sum(v[1] for v in b.values()),
        "overall": renamed(result["overall"]),
        "categories": {c: renamed(s) for c, s in result["categories"].items()},
    }


def paired_sampled_trace(a: SampledTrace, b: SampledTrace, names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """B against A, per-problem sampled trace errors on the problems both sample a right answer on
    (``eval.sampled_compare.paired_means``), overall and per category, with each side's pooled trace error over all
    its problems (``pooled_a``, ``pooled_b``). ``BadInput`` when the two cover different problems."""
    _same_problems(a, b, names)
    common = [i for i in a if a[i][1] and b[i][1]]

    def stats(ids: list[str]) -> dict[str, Any]:
        return paired_means([(a[i][2] / a[i][1], b[i][2] / b[i][1]) for i in ids])

    def pooled(side: SampledTrace) -> float | None:
        return trace_share(sum(v[2] for v in side.values()), sum(v[1] for v in side.values()), False)["value"]

    cats = ordered_groups([a[i][0] for i in common], CATEGORIES)
    return {
        "pooled_a": pooled(a),
        "pooled_b": pooled(b),
        "overall": stats(common),
        "categories": {c: stats([i for i in common if a[i][0] == c]) for c in cats},
    }


__all__ = [
    "POOLED",
    "SampledTrace",
    "Trace",
    "mark_rows",
    "paired_sampled_trace",
    "paired_trace",
    "problem_of",
    "sampled_trace_metrics",
    "trace_metrics",
    "trace_share",
    "wrong_step",
]
