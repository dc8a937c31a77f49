"""Agreement between two annotations of the same solutions: step-level Cohen's kappa, character-level span F1.

The SHARP card reports "per-step agreement with an independent annotator" as Cohen's kappa (0.689).
``agreement(rows_a, rows_b)`` measures the same between two files of the same rows, both span view
(``question, model_answer, hallucination_annotation``), both step view (``question, steps,
step_labels``), or one of each (the span file is converted to the step view first).

Definitions (pure functions below, hand-computed tests in ``tests/label/sharp/test_agreement.py`` and
``tests/eval/test_agreement_kappa.py``):

- **Cohen's kappa** over paired labels of any number of classes: ``kappa = (p_o - p_e) / (1 - p_e)``
  with ``p_o`` the share of pairs that agree and ``p_e = sum_k p_ak p_bk`` the agreement expected by
  chance from each annotator's own share of each class k (Cohen 1960, eq. 1; for step labels
  ``p_a1 p_b1 + p_a0 p_b0``). Labels are compared by equality (``True == 1``), never by truthiness.
  When ``p_e = 1`` (both annotators gave every item the same single label) kappa is undefined and
  reported as ``None``.
- **Which steps are compared.** Span view: every piece of every solution, labelled 0 when a span
  touches it (``sharp.span_piece_labels``, the card's rule, applied to the whole solution). Step view:
  each row is cut after its first error, so only the steps both annotators labelled are compared (the
  shorter row's steps; the longer row must extend it).
- **Span F1** (character level): the characters each annotation marks, pooled over rows:
  ``F1 = 2 |A ∩ B| / (|A| + |B|)``, symmetric in A and B; precision ``|A ∩ B| / |B|`` and recall
  ``|A ∩ B| / |A|`` read A as the reference. Span view: the characters inside the ``<HAL>`` spans.
  Step view (no spans): the characters of the steps labelled 0 among the compared steps. The three ratios
  are ``eval.counts.Confusion``'s (``tp = |A ∩ B|``, ``fp = |B| - tp``, ``fn = |A| - tp``) with one
  difference: a ratio whose denominator is 0 is ``None`` here, not ``eval.counts``' 0.0 (``F1`` is ``None``
  when neither annotation marks a character: perfect agreement on "nothing", but no ratio to report).
- **Solution level**: kappa of "the solution has an error", and the share of rows whose first error
  (the first 0, ``data.formats.step.first_error``; none for a sound row) is the same step.

Rows must align: the same number of rows, and row i of both files the same question and the same
solution (span view: identical ``model_answer``; step view: one ``steps`` a prefix of the other, the
shorter one ending in its error unless both are complete). Anything else is
:class:`MisalignedRows` (``posttrain data agree`` exits 2 naming the row).

Written by hand: a few lines of arithmetic, kept next to their definitions instead of pulling
scikit-learn into ``eval``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

from posttrainlab.data.formats.hal import Span, piece_bounds
from posttrainlab.data.formats.sharp import STEP_SEP, span_piece_labels, span_to_step
from posttrainlab.data.formats.step import first_error
from posttrainlab.eval.counts import Confusion


class MisalignedRows(ValueError):
    """Row ``index`` of the two files is not the same solution (or one file has more rows)."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"row {index}: {reason}")
        self.index = index
        self.reason = reason


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two paired label sequences over any set of classes; ``None`` when chance agreement is 1.

    With ``n`` pairs, ``agree`` of them equal and ``c_a(k)``, ``c_b(k)`` how often each annotator gave class
    ``k``: ``p_o = agree / n``, ``p_e = sum_k c_a(k) c_b(k) / n^2``, computed in integers as
    ``kappa = (n agree - sum_k c_a(k) c_b(k)) / (n^2 - sum_k c_a(k) c_b(k))``.

    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0])   # p_o = 3/4, p_e = 1/2 * 1/4 + 1/2 * 3/4 = 1/2
    0.5
    >>> cohen_kappa([0, 1, 2, 2, 1], [0, 2, 1, 2, 1])   # p_o = 3/5, p_e = (1*1 + 2*2 + 2*2) / 25 = 9/25
    0.375
    >>> cohen_kappa([1, 1], [1, 1]) is None
    True
    """
    if len(a) != len(b):
        raise ValueError(f"{len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    agree = sum(1 for x, y in zip(a, b, strict=True) if x == y)
    counts_a, counts_b = Counter(a), Counter(b)
    chance = sum(count * counts_b[label] for label, count in counts_a.items())  # n^2 p_e
    if chance == n * n:
        return None
    return (n * agree - chance) / (n * n - chance)


def marked_chars(spans: Sequence[Span]) -> set[int]:
    """The character positions inside ``spans``.

    >>> sorted(marked_chars([(1, 3), (5, 6)]))
    [1, 2, 5]
    """
    return {i for start, end in spans for i in range(start, end)}


def span_overlap(a: Sequence[Sequence[Span]], b: Sequence[Sequence[Span]]) -> dict[str, Any]:
    """Pooled character counts and F1 of two span annotations of the same rows (module docstring).

    >>> span_overlap([[(0, 4)], []], [[(2, 6)], [(0, 1)]])   # |A| = 4, |B| = 5, |A & B| = 2
    {'chars_a': 4, 'chars_b': 5, 'chars_both': 2, 'precision': 0.4, 'recall': 0.5, 'f1': 0.4444444444444444}
    """
    if len(a) != len(b):
        raise ValueError(f"{len(a)} rows against {len(b)}")
    na = nb = both = 0
    for sa, sb in zip(a, b, strict=True):
        ca, cb = marked_chars(sa), marked_chars(sb)
        na, nb, both = na + len(ca), nb + len(cb), both + len(ca & cb)
    counts = Confusion(tp=both, fp=nb - both, fn=na - both)  # A is the reference: B's marks are the predictions
    return {
        "chars_a": na,
        "chars_b": nb,
        "chars_both": both,
        "precision": counts.precision if nb else None,  # None, not eval.counts' 0.0, on a zero denominator
        "recall": counts.recall if na else None,
        "f1": counts.f1 if na + nb else None,
    }


def kind_of(row: dict[str, Any]) -> str:
    """``"span"`` or ``"step"`` by the row's keys (``ValueError`` for neither)."""
    if "hallucination_annotation" in row and "model_answer" in row:
        return "span"
    if "steps" in row and "step_labels" in row:
        return "step"
    raise ValueError("neither a span-view row (model_answer, hallucination_annotation) nor a step-view row")


def _step_pair(i: int, a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[int], list[int]]:
    """The steps both step rows label, and the two label lists over them."""
    sa, sb, la, lb = a["steps"], b["steps"], a["step_labels"], b["step_labels"]
    m = min(len(sa), len(sb))
    if sa[:m] != sb[:m]:
        raise MisalignedRows(i, "the steps differ (not the same solution)")
    if len(sa) != len(sb):
        short_labels = la if len(sa) < len(sb) else lb
        if 0 not in short_labels:
            raise MisalignedRows(i, f"{len(sa)} against {len(sb)} steps and the shorter row has no error")
    return list(sa[:m]), list(la[:m]), list(lb[:m])


def step_spans(steps: Sequence[str], labels: Sequence[int]) -> list[Span]:
    """Step view as spans: each step labelled 0, as offsets into the steps joined by a blank line.

    >>> step_spans(["ab", "c"], [1, 0])
    [(4, 5)]
    """
    return [bounds for bounds, label in zip(piece_bounds(steps, STEP_SEP), labels, strict=True) if not label]


def agreement(rows_a: Sequence[dict[str, Any]], rows_b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Kappa, span F1 and solution-level agreement of two annotations of the same rows (module docstring).

    Raises :class:`MisalignedRows` when the rows are not the same solutions, ``ValueError`` for a row
    that is no annotation.
    """
    if len(rows_a) != len(rows_b):
        shorter = min(len(rows_a), len(rows_b))
        longer = max(len(rows_a), len(rows_b))
        raise MisalignedRows(shorter, f"one file ends here ({shorter} rows), the other has {longer}")
    kinds = {kind_of(r) for r in [*rows_a[:1], *rows_b[:1]]}
    mode = "span" if kinds == {"span"} else "step"
    labels_a: list[int] = []
    labels_b: list[int] = []
    spans_a: list[list[Span]] = []
    spans_b: list[list[Span]] = []
    flawed_a, flawed_b, same_first = [], [], 0
    for i, (a, b) in enumerate(zip(rows_a, rows_b, strict=True)):
        if a.get("question") != b.get("question"):
            raise MisalignedRows(i, "the questions differ")
        try:
            ka, kb = kind_of(a), kind_of(b)
            if mode == "span":
                if ka != "span" or kb != "span":
                    raise ValueError("a step-view row in a span-view file")
                if a["model_answer"] != b["model_answer"]:
                    raise MisalignedRows(i, "model_answer differs (not the same solution)")
                la, sa = span_piece_labels(a)
                lb, sb = span_piece_labels(b)
            else:
                sa_row = span_to_step(a) if ka == "span" else a
                sb_row = span_to_step(b) if kb == "span" else b
                steps, la, lb = _step_pair(i, sa_row, sb_row)
                sa, sb = step_spans(steps, la), step_spans(steps, lb)
        except MisalignedRows:
            raise
        except ValueError as e:
            raise ValueError(f"row {i}: {e}") from None
        labels_a += la
        labels_b += lb
        spans_a.append(list(sa))
        spans_b.append(list(sb))
        flawed_a.append(0 if 0 in la else 1)
        flawed_b.append(0 if 0 in lb else 1)
        same_first += first_error(la) == first_error(lb)
    n_rows = len(rows_a)
    agree = sum(1 for x, y in zip(labels_a, labels_b, strict=True) if x == y)
    return {
        "rows": n_rows,
        "mode": mode if kinds == {mode} else "step (span file converted)",
        "steps_compared": len(labels_a),
        "step_kappa": cohen_kappa(labels_a, labels_b),
        "step_agreement": agree / len(labels_a) if labels_a else None,
        "wrong_steps_a": labels_a.count(0),
        "wrong_steps_b": labels_b.count(0),
        "span": span_overlap(spans_a, spans_b),
        "solution_kappa": cohen_kappa(flawed_a, flawed_b),
        "first_error_match": same_first / n_rows if n_rows else None,
    }


__all__ = ["MisalignedRows", "agreement", "cohen_kappa", "span_overlap", "step_spans"]
