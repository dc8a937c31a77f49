"""The study's numbers as pure functions (no torch, no files): labels from a judge's verdicts, label quality against
exact labels, the cost table, a PRM's summary row and best-of-N against majority voting.

**Labels on every step** (``every_step_labels``) are arith-prm's (``data.arith.prm_labels``, mode every-step,
missing answer last-step): 1 until the first wrong line, 0 from it on, except an answer line, which carries its own
verdict; a solution that does not end with an answer line gets 0 on its last line. The exact labels apply these
rules to the program's verdicts; a judge's labels apply the same rules to the judge's verdicts (a line is wrong when
one of its ``<HAL>`` spans touches it: SHARP's step view, extended past its first error by the rules above). Monte-
Carlo labels need no rule: V of the prefix that ends at a line is that line's target (V > 0 its hard label).

**Label quality** (``label_quality``) compares a source's targets with the exact labels of the same steps, after the
Math-Shepherd rule ``hard = target > 0`` (a hard label is its own hard label): step accuracy, Cohen's kappa
(``eval.agreement.cohen_kappa``), mean |target - exact| (a soft target's distance, for hard labels 1 - accuracy),
first-error agreement (the share of solutions whose first hard 0 is the exact one's, "none" included), and where the
errors sit: ``false_wrong`` (a right step labelled wrong) and ``missed`` (a wrong step labelled right) by problem
category and by step position. A solution the source gave no labels (a judge's failed row) is counted, not compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrainlab.data.arith.prm_labels import labels_from_verdicts
from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.data.formats.step import first_error
from posttrainlab.eval.agreement import cohen_kappa
from posttrainlab.eval.compare import pair_stats
from posttrainlab.eval.policy import ordered_groups


def every_step_labels(steps: Sequence[str], ok: Sequence[bool]) -> list[int]:
    """Labels of every line from per-line verdicts ``ok`` (``data.arith.prm_labels.labels_from_verdicts``).

    >>> every_step_labels(["3 + 4 = 8", "8 * 2 = 16", "Answer: 14"], [False, False, True])
    [0, 0, 1]
    >>> every_step_labels(["3 + 4 = 7", "7 * 2 = 14"], [True, True])      # no answer line: its last line 0
    [1, 0]
    """
    return labels_from_verdicts(steps, ok)[1]


def _share(num: float, den: float) -> float | None:
    return num / den if den else None


def _errors(cells: dict[Any, list[int]]) -> dict[str, dict[str, Any]]:
    """``{key: {steps, errors, error_rate, false_wrong, missed}}`` of ``[steps, false_wrong, missed]`` counts."""
    return {str(k): {"steps": n, "errors": fw + mi, "error_rate": _share(fw + mi, n), "false_wrong": fw, "missed": mi}
            for k, (n, fw, mi) in cells.items()}  # fmt: skip


def label_quality(
    exact: Sequence[Sequence[int]], targets: Sequence[Sequence[float] | None], categories: Sequence[str]
) -> dict[str, Any]:
    """A source's labels against the exact ones, solution by solution (module docstring).

    >>> q = label_quality([[1, 0], [1, 1], [0]], [[1.0, 0.25], [0.0, 1.0], None], ["addition"] * 3)
    >>> q["steps"], q["accuracy"], q["false_wrong"], q["missed"], q["first_error_agreement"], q["missing"]
    (4, 0.5, 1, 1, 0.0, 1)
    >>> q["by_position"]["0"]["false_wrong"], q["by_position"]["1"]["missed"], round(q["mean_abs_error"], 4)
    (1, 1, 0.3125)
    """
    if not len(exact) == len(targets) == len(categories):
        raise ValueError(f"{len(exact)} exact rows, {len(targets)} target rows, {len(categories)} categories")
    gold: list[int] = []
    hard: list[int] = []
    distance = 0.0
    same_first = labelled = 0
    by_cat: dict[str, list[int]] = {}
    by_pos: dict[int, list[int]] = {}
    for e_row, t_row, cat in zip(exact, targets, categories, strict=True):
        if t_row is None:
            continue
        if len(e_row) != len(t_row):
            raise ValueError(f"{len(e_row)} exact labels but {len(t_row)} targets in one solution")
        labelled += 1
        h_row = [int(t > 0) for t in t_row]
        same_first += first_error(h_row) == first_error(e_row)
        for pos, (e, t, h) in enumerate(zip(e_row, t_row, h_row, strict=True)):
            gold.append(int(e))
            hard.append(h)
            distance += abs(float(t) - int(e))
            for cells, key in ((by_cat, cat), (by_pos, pos)):
                cell = cells.setdefault(key, [0, 0, 0])
                cell[0] += 1
                cell[1] += int(e == 1 and h == 0)
                cell[2] += int(e == 0 and h == 1)
    n = len(gold)
    false_wrong = sum(1 for e, h in zip(gold, hard, strict=True) if e == 1 and h == 0)
    missed = sum(1 for e, h in zip(gold, hard, strict=True) if e == 0 and h == 1)
    cats = ordered_groups(list(by_cat), CATEGORIES)
    return {
        "solutions": len(exact),
        "labelled": labelled,
        "missing": len(exact) - labelled,
        "steps": n,
        "exact_wrong": gold.count(0),
        "accuracy": _share(n - false_wrong - missed, n),
        "kappa": cohen_kappa(hard, gold),
        "mean_abs_error": _share(distance, n),
        "false_wrong": false_wrong,
        "missed": missed,
        "first_error_agreement": _share(same_first, labelled),
        "by_category": _errors({c: by_cat[c] for c in cats}),
        "by_position": _errors(dict(sorted(by_pos.items()))),
    }


def cost_table(costs: dict[str, dict[str, Any]], solutions: int) -> dict[str, dict[str, Any]]:
    """Per labelling: ``continuations`` generated, ``judge_calls``, ``seconds``, and each per labelled solution.

    ``costs[name]`` is a labelling's ``cost.json`` (missing counts are 0; ``seconds_inferred`` passes through).

    >>> t = cost_table({"mc-4": {"continuations": 800, "seconds": 20.0}, "exact": {"seconds": 0.1}}, 100)
    >>> t["mc-4"]["per_solution"], t["exact"]["judge_calls"]
    ({'continuations': 8.0, 'judge_calls': 0.0, 'seconds': 0.2}, 0)
    """
    if solutions < 1:
        raise ValueError(f"solutions={solutions}: need at least one")
    out = {}
    for name, cost in costs.items():
        row = {k: cost.get(k, 0) for k in ("continuations", "judge_calls", "seconds")}
        row["per_solution"] = {k: v / solutions for k, v in row.items()}
        out[name] = {**row, **{k: v for k, v in cost.items() if k not in row}}
    return out


#: what ``prm_row`` reads from an ``eval prm`` metrics.json, by dotted path
PRM_FIELDS = {
    "auroc": "step.auroc",
    "pairwise_min": "within_problem.min.pairwise_accuracy",
    "pairwise_last": "within_problem.last.pairwise_accuracy",
    "first_error_f1": "first_error.f1",
    "ece": "calibration.ece",
}


def prm_row(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The study's PRM numbers from one ``eval prm`` result (``PRM_FIELDS``; ``None`` where a value is absent).

    >>> prm_row({"step": {"auroc": 0.7}, "within_problem": None, "calibration": {"ece": 0.1}})["pairwise_min"] is None
    True
    """
    out = {}
    for name, dotted in PRM_FIELDS.items():
        value: Any = metrics
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        out[name] = value
    return out


#: the best-of-N selectors the study pairs against majority voting (eval.best_of_n.SELECTORS)
BON_SELECTORS = ("prm_vote", "prm_min", "prm_last")


def bon_row(outcomes: dict[str, dict[str, tuple[str, bool]]], reference: dict[str, tuple[str, bool]] | None) -> dict:
    """Each of ``BON_SELECTORS`` against majority voting on the same problems (``eval.compare.pair_stats``), and the
    vote against ``reference`` (the exact source's vote) when given. ``outcomes``: ``{selector: {id: (category,
    correct)}}`` (``runners.compare.best_of_n_outcomes``).

    >>> o = {"majority": {"a": ("x", True), "b": ("x", False)}, "prm_vote": {"a": ("x", True), "b": ("x", True)},
    ...      "prm_min": {"a": ("x", False), "b": ("x", False)}, "prm_last": {"a": ("x", True), "b": ("x", False)}}
    >>> r = bon_row(o, None)
    >>> r["majority"], r["prm_vote"]["acc_b"], r["prm_vote"]["c"], r["prm_min"]["b"], r["vote_vs_exact"]
    (0.5, 1.0, 1, 1, None)
    """
    majority = outcomes["majority"]
    ids = list(majority)
    out: dict[str, Any] = {"problems": len(ids), "majority": _share(sum(majority[i][1] for i in ids), len(ids))}
    for s in BON_SELECTORS:
        out[s] = pair_stats([(majority[i][1], outcomes[s][i][1]) for i in ids])
    vote = outcomes["prm_vote"]
    out["vote_vs_exact"] = None if reference is None else pair_stats([(reference[i][1], vote[i][1]) for i in ids])
    return out


__all__ = ["BON_SELECTORS", "PRM_FIELDS", "bon_row", "cost_table", "every_step_labels", "label_quality", "prm_row"]
