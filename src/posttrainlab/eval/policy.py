"""Policy metrics: what a post-trained model gets right on arith-v1, per category, with intervals.

Pure functions of graded rows (``runners.policy.evaluate_policy`` generates the responses and writes the files):

- ``grade_rows``: one ``samples.jsonl`` row per problem (prompt, answer, response, grade, and the samples);
- ``policy_metrics``: ``accuracy`` overall and ``per_category`` (arith-v1's category order), each
  ``{"value", "ci95", "correct", "n"}`` with a 95% Wilson interval (``eval.intervals``); ``outcomes`` (counts of
  correct / wrong_answer / missing_answer / malformed) and ``outcome_shares``; ``format_rate``: the share of
  responses whose answer is in the required form, right or wrong (``Grade.well_formatted``); ``pass_at_k`` when
  ``k > 1``: the unbiased estimator over each problem's ``n >= k`` samples, averaged over problems, overall and
  per category;
- ``preference_margins`` / ``preference_metrics``: the share of (chosen, rejected) pairs the policy ranks the
  right way round, overall and ``per_corruption``. With a reference model the margin is DPO's implicit reward,
  ``beta * [(log pi(c) - log pi_ref(c)) - (log pi(r) - log pi_ref(r))] > 0`` (Rafailov et al. 2023, eq. 5);
  without one, the raw margin ``log pi(c) - log pi(r) > 0``. A tie (margin exactly 0) counts as a miss. The
  log-probabilities come from a ``Scorer`` (``runners.policy.sequence_logprobs`` for a transformers model).

They take any backend's output, so tests check them with fixed responses and a stub scorer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from posttrainlab.data.arith.corrupt import CORRUPTIONS
from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.eval.intervals import pass_at_k, proportion
from posttrainlab.generation.prompts import as_messages
from posttrainlab.grading import OUTCOMES, Grade

#: ``score(prompts, completions) -> summed log-probabilities``, one per pair of arguments.
Scorer = Callable[[list, list[str]], list[float]]

#: The outcome types always reported (arith's); others (the math grader's ``timeout``) when they occur.
REPORTED_OUTCOMES = OUTCOMES[:4]
UNCATEGORISED = "uncategorised"


def ordered_groups(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """The distinct ``values``: those in ``known`` in that order, then the rest as first seen.

    >>> ordered_groups(["word_problem", "x", "addition", "x"], ("addition", "subtraction", "word_problem"))
    ['addition', 'word_problem', 'x']
    """
    seen = list(dict.fromkeys(values))
    return [v for v in known if v in seen] + [v for v in seen if v not in known]


def _grade_fields(grade: Grade) -> dict[str, Any]:
    return {"correct": grade.correct, "outcome": grade.outcome, "parsed": grade.parsed}


def grade_rows(records: list[dict], responses: list[str], grader, sampled: list[list[str]] | None = None) -> list[dict]:
    """One samples.jsonl row per problem: id, category, prompt, answer, response, grade (and samples)."""
    rows = []
    for i, (record, response) in enumerate(zip(records, responses, strict=True)):
        row = {
            "id": record.get("id", str(i)),
            "category": record.get("category", UNCATEGORISED),
            "prompt": record["prompt"],
            "answer": record["answer"],
            "response": response,
            **_grade_fields(grader.grade(response, record["answer"])),
        }
        if sampled is not None:
            grades = [grader.grade(s, record["answer"]) for s in sampled[i]]
            row["samples"] = [{"response": s, **_grade_fields(g)} for s, g in zip(sampled[i], grades, strict=True)]
            row["n_correct"] = sum(g.correct for g in grades)
        rows.append(row)
    return rows


def policy_metrics(rows: list[dict], k: int = 1) -> dict[str, Any]:
    """Accuracy (overall, per category), outcome counts and shares, format rate, pass@k (``k > 1``)."""
    n = len(rows)
    categories = ordered_groups([r["category"] for r in rows], CATEGORIES)
    by_cat = {c: [r for r in rows if r["category"] == c] for c in categories}
    counts = {o: 0 for o in REPORTED_OUTCOMES}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    formatted = sum(Grade(r["correct"], r["outcome"], r["parsed"]).well_formatted for r in rows)
    metrics: dict[str, Any] = {
        "accuracy": proportion(sum(r["correct"] for r in rows), n),
        "per_category": {c: proportion(sum(r["correct"] for r in rs), len(rs)) for c, rs in by_cat.items()},
        "outcomes": counts,
        "outcome_shares": {o: c / n if n else 0.0 for o, c in counts.items()},
        "format_rate": formatted / n if n else 0.0,
    }
    if k > 1:

        def mean_pass(rs: list[dict]) -> float:
            return sum(pass_at_k(len(r["samples"]), r["n_correct"], k) for r in rs) / len(rs) if rs else 0.0

        metrics["pass_at_k"] = {
            "k": k,
            "n_samples": len(rows[0]["samples"]) if rows else k,
            "value": mean_pass(rows),
            "per_category": {c: mean_pass(rs) for c, rs in by_cat.items()},
        }
    return metrics


def preference_margins(
    pairs: list[dict], score: Scorer, ref_score: Scorer | None = None, beta: float = 0.1
) -> list[float]:
    """Per pair: ``log pi(c) - log pi(r)``, or with a reference DPO's implicit-reward margin (module doc)."""
    prompts = [as_messages(p["prompt"]) for p in pairs] * 2
    completions = [p["chosen"] for p in pairs] + [p["rejected"] for p in pairs]
    m = len(pairs)
    policy = score(prompts, completions)
    margins = [policy[i] - policy[m + i] for i in range(m)]
    if ref_score is None:
        return margins
    ref = ref_score(prompts, completions)
    return [beta * (margins[i] - (ref[i] - ref[m + i])) for i in range(m)]


def preference_metrics(pairs: list[dict], margins: list[float], method: str) -> dict[str, Any]:
    """Share of pairs with margin > 0, overall and per corruption type (arith-v1's order)."""
    kinds = [p.get("corruption", "unknown") for p in pairs]
    wins = [m > 0 for m in margins]

    def share(selected: list[int]) -> dict:
        return proportion(sum(wins[i] for i in selected), len(selected))

    return {
        "method": method,
        "accuracy": share(list(range(len(pairs)))),
        "per_corruption": {
            kind: share([i for i, k in enumerate(kinds) if k == kind]) for kind in ordered_groups(kinds, CORRUPTIONS)
        },
        "mean_margin": sum(margins) / len(margins) if margins else 0.0,
    }
