"""Within-problem ranking: does a verifier score a right solution of a problem above a wrong one of the SAME problem?

Best-of-N asks a verifier to choose among samples of one problem. A pooled AUROC (every step, or every
solution, of every problem in one ranking) also rewards knowing which problems, categories and positions are
hard, which does not help that choice at all. So, over the problems that have both right and wrong
solutions (the others hold no choice to get wrong):

- ``pairwise_accuracy`` (micro): over every pair (r, w) of a right and a wrong solution of the same problem,
  pooled over problems, P(score(r) > score(w)) + ½ P(score(r) = score(w));
- ``per_problem_auroc`` (macro): each problem's own AUROC (the same count over its own pairs), averaged over
  problems with equal weight;
- ``pooled_auroc``: for reference, the AUROC of the same solution scores pooled over all problems
  (right = positive class; ``step_metrics.auroc``), the number the two above are meant to sit beside.

A scorer that cannot rank within a problem gets 0.5 on both within-problem numbers whatever its pooled AUROC.
Solutions are counted with multiplicity (two identical samples are two pairs), as best-of-N draws them.
Values are ``None`` when no problem has both kinds (docs/metrics.md's convention: never NaN).

Pure functions of labels and scores (no torch, no files), with hand-computed tests in
tests/eval/test_within_problem.py. Written by hand: the definitions are short and must be exact.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from posttrainlab.eval.aggregation import AGGREGATIONS, aggregate
from posttrainlab.eval.step_metrics import auroc


@dataclass(frozen=True)
class WithinProblem:
    """Within-problem ranking of solution scores (module docstring)."""

    problems: int  # problems with at least one right and one wrong solution
    pairs: int  # (right, wrong) pairs within those problems
    pairwise_accuracy: float | None
    per_problem_auroc: float | None
    pooled_auroc: float | None
    only_right: int  # problems whose solutions are all right (no pair)
    only_wrong: int  # problems whose solutions are all wrong (no pair)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _wins(right: Sequence[float], wrong: Sequence[float]) -> float:
    """Pairs a right solution wins, ties counting ½."""
    return sum(1.0 if r > w else 0.5 if r == w else 0.0 for r in right for w in wrong)


def within_problem(groups: Sequence[Hashable], correct: Sequence[bool], scores: Sequence[float]) -> WithinProblem:
    """Within-problem ranking of ``scores`` (one per solution), ``groups`` naming each solution's problem.

    ``ValueError`` when the three lengths differ.

    >>> m = within_problem(["a", "a", "a", "b", "b", "c"], [True, False, False, True, False, True],
    ...                    [0.9, 0.2, 0.9, 0.3, 0.6, 0.1])
    >>> m.problems, m.pairs, m.pairwise_accuracy, m.per_problem_auroc, m.only_right, m.only_wrong
    (2, 3, 0.5, 0.375, 1, 0)
    """
    if not len(groups) == len(correct) == len(scores):
        raise ValueError(f"{len(groups)} groups, {len(correct)} labels and {len(scores)} scores: need one each")
    by_group: dict[Hashable, tuple[list[float], list[float]]] = {}
    for g, ok, s in zip(groups, correct, scores, strict=True):
        by_group.setdefault(g, ([], []))[0 if ok else 1].append(float(s))
    wins = pairs = 0.0
    aurocs: list[float] = []
    only_right = only_wrong = 0
    for right, wrong in by_group.values():
        if not wrong:
            only_right += 1
        elif not right:
            only_wrong += 1
        else:
            w, n = _wins(right, wrong), len(right) * len(wrong)
            wins, pairs = wins + w, pairs + n
            aurocs.append(w / n)
    pooled = auroc([int(bool(c)) for c in correct], [float(s) for s in scores])
    return WithinProblem(
        problems=len(aurocs),
        pairs=int(pairs),
        pairwise_accuracy=wins / pairs if pairs else None,
        per_problem_auroc=sum(aurocs) / len(aurocs) if aurocs else None,
        pooled_auroc=pooled,
        only_right=only_right,
        only_wrong=only_wrong,
    )


def within_problem_by_aggregation(
    groups: Sequence[Hashable], correct: Sequence[bool], step_scores: Sequence[Sequence[float]]
) -> dict[str, dict[str, Any]]:
    """``within_problem`` of each solution score best-of-N selects by (``aggregation.AGGREGATIONS``: min, last,
    product, mean of the step scores; 0.0 for a solution without steps), as ``{aggregation: dict}``.

    >>> within_problem_by_aggregation(["a", "a"], [True, False], [[0.9, 0.8], [0.95, 0.1]])["min"]["pairwise_accuracy"]
    1.0
    """
    return {
        how: within_problem(groups, correct, [aggregate(s, how) for s in step_scores]).as_dict() for how in AGGREGATIONS
    }


def by_problem_id(
    ids: Sequence[Hashable | None], labels: Sequence[Sequence[int]], step_scores: Sequence[Sequence[float]]
) -> dict[str, Any] | None:
    """``eval prm``'s ``within_problem``: solutions grouped by their row ``id`` (arith-prm: the arith-v1 problem),
    right = every step labelled 1, each aggregation's ``within_problem``; ``None`` unless every row has an id and
    some id repeats (nothing to group by).

    >>> by_problem_id(["p", "p", "q"], [[1, 1], [1, 0], [1]], [[0.9, 0.8], [0.9, 0.3], [0.5]])["min"]["pairs"]
    1
    >>> by_problem_id(["p", "q"], [[1], [0]], [[0.9], [0.1]]) is None
    True
    """
    if not ids or any(i is None for i in ids) or len(set(ids)) == len(ids):
        return None
    correct = [all(x == 1 for x in row) for row in labels]
    return within_problem_by_aggregation(list(ids), correct, step_scores)


__all__ = ["WithinProblem", "by_problem_id", "within_problem", "within_problem_by_aggregation"]
