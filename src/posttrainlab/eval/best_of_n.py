"""Best-of-N selection: which of n samples of a problem each selector picks, and their accuracy at every n.

For every n' in ``ns`` each selector picks one of the **first n'** samples of a problem
(``runners.best_of_n`` samples, grades and scores them, and writes the files):

- ``prm_min`` / ``prm_last`` / ``prm_product`` / ``prm_mean``: the sample with the highest aggregated
  step score (minimum, last step, product, mean of its step scores);
- ``majority``: the most frequent parsed answer (self-consistency; Wang et al. 2023);
- ``prm_vote``: PRM-weighted vote: each answer's weight is the sum of its samples' aggregated scores,
  with the aggregation ``vote_aggregation`` (default ``min``), recorded in ``bon.json``;
- ``orm`` / ``orm_vote`` (when an outcome reward model scored the same samples, ``Candidates.orm_scores``):
  the sample with the highest ORM score (its last step's, the ORM's reading: docs/process-vs-outcome.md), and
  the ORM-weighted vote (weights: the ORM scores). Without a PRM (an ORM given as the PRM) the ``prm_*``
  selectors are absent and ``majority``, ``orm``, ``orm_vote`` remain;
- ``oracle`` (reference, not a selector): pass@n', whether any of the first n' samples is correct.

**Paired at each n'** (``paired_by_n``): every n' reuses the first n' of the same samples, so two selectors are
compared problem by problem at each n' (``eval.compare.pair_stats``: B − A, Newcombe's paired 95% interval,
McNemar's exact test). The pairs (``comparison_pairs``): the PRM against the ORM (``prm_<vote_aggregation>``
against ``orm``, ``prm_vote`` against ``orm_vote``) when both scored, and each model's pick against ``majority``.
The PRM's solution score there is the vote's aggregation (``vote_aggregation``): one knob for how a PRM scores a
solution, chosen before the run, never the best curve after it.

**Tie rules** (every selector is deterministic): a PRM selector takes the lowest sample index among
equal aggregated scores. A vote counts only samples whose answer is in the required form (grader
outcome ``correct`` or ``wrong_answer``); among answers with equal count (or equal summed weight,
compared exactly) it takes the answer that appears first, and the selected sample is that answer's
first sample. When no sample has an answer, sample 0 is selected (and it is wrong). A solution with no
non-empty line has no step: its aggregated score is 0.0, the lowest a probability can be.

A selected sample counts as correct when the arith grader grades it correct; accuracy at each n' is a
share of problems with a 95% Wilson interval (``eval.intervals``).

Written by hand: the selectors are a few lines each, and their tie rules must be exact and documented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.aggregation import AGGREGATIONS, aggregate
from posttrainlab.eval.intervals import proportion
from posttrainlab.eval.within_problem import within_problem, within_problem_by_aggregation

SELECTORS = tuple(f"prm_{a}" for a in AGGREGATIONS) + ("majority", "prm_vote")
#: the selectors of an outcome reward model scoring the same samples (``Candidates.orm_scores``)
ORM_SELECTORS = ("orm", "orm_vote")


def argmax_first(values: Sequence[float]) -> int:
    """Index of the largest value, the lowest index among ties.

    >>> argmax_first([0.2, 0.7, 0.7, 0.1])
    1
    """
    if not values:
        raise ValueError("no values to choose from")
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def vote(answers: Sequence[int | None], weights: Sequence[float] | None = None) -> int | None:
    """Index of the sample a (weighted) vote selects; ``None`` when no sample has an answer.

    Each non-``None`` answer collects 1 (or its sample's weight); the answer with the largest total
    wins, ties going to the answer that appears first; the selected sample is that answer's first one.

    >>> vote([5, 7, 7, 5, None])        # 5 and 7 tie with 2 votes: 5 appears first
    0
    >>> vote([5, 7, 7, 5], [0.1, 0.3, 0.2, 0.1])   # 7 weighs 0.5, 5 weighs 0.2
    1
    >>> vote([None, None]) is None
    True
    """
    if weights is not None and len(weights) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(weights)} weights")
    totals: dict[int, float] = {}
    first: dict[int, int] = {}
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        totals[answer] = totals.get(answer, 0.0) + (1.0 if weights is None else weights[i])
        first.setdefault(answer, i)
    if not totals:
        return None
    winner = max(totals, key=lambda a: (totals[a], -first[a]))
    return first[winner]


@dataclass(frozen=True)
class Candidates:
    """The samples of one problem: graded correct or not, parsed answer (``None``: none in the required
    form), per-step PRM scores (``None``: no PRM scored them) and an ORM's score of each (``None``: no ORM), in
    sample order."""

    correct: Sequence[bool]
    answers: Sequence[int | None]
    step_scores: Sequence[Sequence[float]] | None
    orm_scores: Sequence[float] | None = None

    def __post_init__(self):
        n = len(self.correct)
        if len(self.answers) != n or any(s is not None and len(s) != n for s in (self.step_scores, self.orm_scores)):
            raise ValueError("correct, answers, step_scores and orm_scores must have one entry per sample")

    @property
    def selectors(self) -> tuple[str, ...]:
        """The selectors these samples allow, in report order.

        >>> Candidates([True], [1], [[0.5]], [0.7]).selectors[-3:], Candidates([True], [1], None, [0.7]).selectors
        (('prm_vote', 'orm', 'orm_vote'), ('majority', 'orm', 'orm_vote'))
        """
        prm = SELECTORS if self.step_scores is not None else ("majority",)
        return prm + (ORM_SELECTORS if self.orm_scores is not None else ())


def select(c: Candidates, n: int, selector: str, vote_aggregation: str = "min") -> int:
    """Index (into the first ``n`` samples) of the one ``selector`` picks (tie rules: module docstring).

    >>> c = Candidates([False, True, True], [4, 5, 5], [[0.9, 0.2], [0.6, 0.7], [0.5]])
    >>> [select(c, 3, s) for s in SELECTORS]   # product: 0.5 beats 0.6 * 0.7 = 0.42
    [1, 1, 2, 1, 1, 1]
    >>> select(c, 1, "majority")
    0
    """
    if not 1 <= n <= len(c.correct):
        raise ValueError(f"n={n}: need 1 <= n <= {len(c.correct)} samples")
    if selector not in (*SELECTORS, *ORM_SELECTORS):
        raise ValueError(f"unknown selector {selector!r}; choose one of {', '.join((*SELECTORS, *ORM_SELECTORS))}")
    if selector not in c.selectors:
        raise ValueError(
            f"selector {selector}: no {'ORM' if selector in ORM_SELECTORS else 'PRM'} scored these samples"
        )
    if selector.startswith("prm_") and selector[4:] in AGGREGATIONS:
        return argmax_first([aggregate(s, selector[4:]) for s in c.step_scores[:n]])
    if selector == "orm":
        return argmax_first(list(c.orm_scores[:n]))
    if selector == "majority":
        chosen = vote(c.answers[:n])
    elif selector == "prm_vote":
        chosen = vote(c.answers[:n], [aggregate(s, vote_aggregation) for s in c.step_scores[:n]])
    else:  # orm_vote
        chosen = vote(c.answers[:n], list(c.orm_scores[:n]))
    return 0 if chosen is None else chosen


def selections(c: Candidates, ns: Sequence[int], vote_aggregation: str = "min") -> dict[str, dict[str, int]]:
    """``{selector: {str(n): chosen index}}`` for one problem, every selector it allows (``Candidates.selectors``)."""
    return {s: {str(n): select(c, n, s, vote_aggregation) for n in ns} for s in c.selectors}


def comparison_pairs(selectors: Sequence[str], vote_aggregation: str = "min") -> list[tuple[str, str]]:
    """The ``(A, B)`` selector pairs compared at each n (module docstring), B − A.

    >>> comparison_pairs(SELECTORS + ORM_SELECTORS)
    [('orm', 'prm_min'), ('orm_vote', 'prm_vote'), ('majority', 'prm_min'), ('majority', 'orm')]
    >>> comparison_pairs(("majority", "orm", "orm_vote"))
    [('majority', 'orm'), ('majority', 'orm_vote')]
    """
    prm, has_orm = f"prm_{vote_aggregation}", "orm" in selectors
    if prm in selectors and has_orm:
        return [("orm", prm), ("orm_vote", "prm_vote"), ("majority", prm), ("majority", "orm")]
    if prm in selectors:
        return [("majority", prm), ("majority", "prm_vote")]
    return [("majority", "orm"), ("majority", "orm_vote")] if has_orm else []


def paired_by_n(
    problems: Sequence[Candidates],
    ns: Sequence[int],
    pairs: Sequence[tuple[str, str]],
    vote_aggregation: str = "min",
    picks: Sequence[dict[str, dict[str, int]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """``{"B vs A": {"a", "b", "by_n": {str(n): pair_stats}}}``: at each n, whether A's and B's picks are right,
    problem by problem (``eval.compare.pair_stats``: B − A, its paired 95% interval, McNemar's exact p).

    ``picks``: ``selections`` of each problem when already made.

    >>> a = Candidates([False, True], [4, 5], [[0.9], [0.4]], [0.1, 0.8])
    >>> r = paired_by_n([a], [2], [("orm", "prm_min")])["prm_min vs orm"]["by_n"]["2"]
    >>> r["acc_a"], r["acc_b"], r["b"], r["c"], r["mcnemar_p"]
    (1.0, 0.0, 1, 0, 1.0)
    """
    from posttrainlab.eval.compare import pair_stats

    if picks is None:
        picks = [selections(c, ns, vote_aggregation) for c in problems]
    out: dict[str, dict[str, Any]] = {}
    for a, b in pairs:
        by_n = {}
        for n in ns:
            k = str(n)
            by_n[k] = pair_stats([(bool(c.correct[p[a][k]]), bool(c.correct[p[b][k]]))
                                  for c, p in zip(problems, picks, strict=True)])  # fmt: skip
        out[f"{b} vs {a}"] = {"a": a, "b": b, "by_n": by_n}
    return out


def best_of_n_metrics(
    problems: Sequence[Candidates], ns: Sequence[int], vote_aggregation: str = "min"
) -> dict[str, Any]:
    """Accuracy of every selector and the oracle at every n, each ``{"value", "ci95", "correct", "n"}``.

    >>> a = Candidates([False, True], [4, 5], [[0.9], [0.4]])
    >>> b = Candidates([True, True], [3, 3], [[0.2], [0.8]])
    >>> m = best_of_n_metrics([a, b], [1, 2])
    >>> m["selectors"]["prm_min"]["2"]["value"], m["oracle"]["1"]["value"], m["oracle"]["2"]["value"]
    (0.5, 0.5, 1.0)
    """
    if not problems:
        raise ValueError("no problems")
    names = problems[0].selectors
    if any(c.selectors != names for c in problems):
        raise ValueError("every problem needs the same scorers (PRM, ORM)")
    picks = [selections(c, ns, vote_aggregation) for c in problems]
    out: dict[str, Any] = {"selectors": {}, "oracle": {}}
    for s in names:
        out["selectors"][s] = {
            str(n): proportion(
                sum(bool(c.correct[p[s][str(n)]]) for c, p in zip(problems, picks, strict=True)), len(problems)
            )
            for n in ns
        }
    for n in ns:
        out["oracle"][str(n)] = proportion(sum(any(c.correct[:n]) for c in problems), len(problems))
    n_samples = sum(len(c.correct) for c in problems)
    out["sample_accuracy"] = proportion(sum(sum(map(bool, c.correct)) for c in problems), n_samples)
    groups = [i for i, c in enumerate(problems) for _ in c.correct]
    right = [bool(x) for c in problems for x in c.correct]
    if problems[0].step_scores is not None:  # right vs wrong samples of one problem, all N of them
        out["within_problem"] = within_problem_by_aggregation(
            groups, right, [s for c in problems for s in c.step_scores]
        )
    if problems[0].orm_scores is not None:
        out["orm_within_problem"] = within_problem(groups, right, [s for c in problems for s in c.orm_scores]).as_dict()
    out["paired"] = paired_by_n(problems, ns, comparison_pairs(names, vote_aggregation), vote_aggregation, picks)
    return out


def split_ns(text: str) -> list[int]:
    """The n values of a comma-separated ``--ns`` text.

    >>> split_ns("1,2, 4")
    [1, 2, 4]
    """
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--ns {text}: expected comma-separated integers, e.g. 1,2,4,8,16") from None


def parse_ns(text: str | Sequence[int] | None, n: int) -> list[int]:
    """The n values to report: given (comma-separated or a list), else the powers of 2 up to ``n`` and ``n``.

    >>> parse_ns("1,2,4", 8), parse_ns(None, 12)
    ([1, 2, 4], [1, 2, 4, 8, 12])
    """
    if text is None:
        ns = [2**i for i in range(n.bit_length()) if 2**i <= n] + [n]
    elif isinstance(text, str):
        ns = split_ns(text)
    else:
        ns = [int(x) for x in text]
    ns = sorted(set(ns))
    if not ns or ns[0] < 1 or ns[-1] > n:
        raise BadInput(f"ns={ns}: every n must be between 1 and the number of samples {n}")
    return ns


def vote_answer(sample: dict) -> int | None:
    """The answer a graded sample votes for: its parsed answer when in the required form, else ``None``."""
    return sample["parsed"] if sample["outcome"] in ("correct", "wrong_answer") else None


__all__ = [
    "AGGREGATIONS",
    "ORM_SELECTORS",
    "SELECTORS",
    "Candidates",
    "aggregate",
    "argmax_first",
    "best_of_n_metrics",
    "comparison_pairs",
    "paired_by_n",
    "parse_ns",
    "select",
    "selections",
    "split_ns",
    "vote",
    "vote_answer",
]
