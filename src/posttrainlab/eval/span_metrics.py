"""Span-level and case-level metrics of the Math-Shepherd-614 protocol (seed card 001, docs/design.md).

Inputs per row, as in Math-Shepherd (``trl-lib/math_shepherd``): ``steps`` (the ``completions``), their
``labels`` (**True = correct**, False = wrong) and the judge's ``spans`` (its parsed "hallucination
list" of copied text). The protocol:

1. response = the steps joined with a single ``"\\n"``;
2. gold characters = each step labelled wrong plus the newline that follows it (none after the last);
3. predicted characters: none for an empty list; otherwise locate every span
   (:mod:`posttrainlab.eval.span_locate`), take the **earliest** located position p, snap it to a step
   start a by one of two rules, and predict the whole suffix ``response[a:]``:

   - ``label-aligned`` (the card's rule; **it reads the gold labels**): a = the latest start of a
     gold-wrong step at or before p; when p lies before every gold-wrong step, the first gold-wrong step's
     start; when the row has no gold-wrong step, p itself (nothing to align to).
   - ``gold-independent``: a = the start of the step that contains p (the separator newline belongs to
     the step before it). Uses only the response.

   A list whose spans are all unlocated predicts no characters; the unlocated spans are reported.
4. Micro precision / recall / F1 over character positions pooled over all rows:
   P = |pred ∩ gold| / |pred|, R = |pred ∩ gold| / |gold|, F1 = 2|pred ∩ gold| / (|pred| + |gold|),
   each 0.0 when its denominator is 0 (see :mod:`posttrainlab.eval.counts`).

Why the label-aligned rule reads as above. The card says: "find the earliest successfully located text
substring in the response. Align this position using the starts of gold incorrect steps, then predict
the entire suffix from that aligned point". Its original implementation is not published, so:
(a) the aligned point is a gold-wrong step start whenever the row has one: that is what aligning "using
the starts of gold incorrect steps" produces, and it is the label dependence the card warns of;
(b) among them, the latest start at or before p: snapping down to a boundary, the same operation as the
gold-independent rule on a different set of starts, so the two rules differ *only* in which starts they
may snap to. It never skips text the judge flagged inside a gold-wrong step (the nearest start might);
(c) before every gold-wrong step there is no start at or before p, and the only start the card allows
is the first gold-wrong one, so the prediction moves forward to it (the judge's false alarm on correct
steps is erased: this is where the rule flatters most);
(d) with no gold-wrong step there is no start to align to, so p is kept as located (no step boundary is
invented). Whenever p lies in a gold-wrong step both rules snap to that step's start and agree; they
differ for p before the first gold-wrong step (c), p in a correct step after a wrong one (b), and rows
with no gold-wrong step (d).

Case level: a row is flawed when any label is False and flagged when the judge's list is non-empty
(whether or not its spans were located: the judge did claim an error). Precision / recall / F1 of the
flawed class and accuracy over rows.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from posttrainlab.eval.counts import Confusion, confusion
from posttrainlab.eval.span_locate import SpanLocator, SpanMatch, locate_span, locate_spans

SpanRule = Literal["label-aligned", "gold-independent"]
LABEL_ALIGNED: SpanRule = "label-aligned"
GOLD_INDEPENDENT: SpanRule = "gold-independent"
SPAN_RULES: tuple[SpanRule, ...] = (LABEL_ALIGNED, GOLD_INDEPENDENT)
SEPARATOR = "\n"


def join_steps(steps: Sequence[str]) -> str:
    """The evaluated response: steps joined with a single newline.

    >>> join_steps(["a=1", "b=2"])
    'a=1\\nb=2'
    """
    return SEPARATOR.join(steps)


def step_starts(steps: Sequence[str]) -> list[int]:
    """Character offset of each step in :func:`join_steps`.

    >>> step_starts(["a=1", "bb=22", "c"])
    [0, 4, 10]
    """
    starts, pos = [], 0
    for step in steps:
        starts.append(pos)
        pos += len(step) + len(SEPARATOR)
    return starts


def _check(steps: Sequence[str], labels: Sequence[bool]) -> None:
    if len(steps) != len(labels):
        raise ValueError(f"{len(steps)} steps but {len(labels)} labels")


def gold_intervals(steps: Sequence[str], labels: Sequence[bool]) -> list[tuple[int, int]]:
    """Gold characters as half-open intervals: each wrong step and its following newline (not the last's).

    Adjacent wrong steps give adjacent intervals; intervals never overlap.

    >>> gold_intervals(["a=1", "bb=22", "c"], [True, False, False])
    [(4, 10), (10, 11)]
    """
    _check(steps, labels)
    last = len(steps) - 1
    return [
        (start, start + len(step) + (0 if i == last else len(SEPARATOR)))
        for i, (start, step, ok) in enumerate(zip(step_starts(steps), steps, labels, strict=True))
        if not ok
    ]


def _containing_step(starts: Sequence[int], pos: int) -> int:
    return max(bisect_right(starts, pos) - 1, 0)


def snap_label_aligned(steps: Sequence[str], labels: Sequence[bool], pos: int) -> tuple[int, int]:
    """The ``label-aligned`` rule (**reads the gold labels**): (aligned offset, step index or -1).

    Latest gold-wrong step start <= pos; the first gold-wrong start when pos precedes them all; pos itself
    (step -1) when no step is labelled wrong. See the module docstring for why.

    >>> steps, labels = ["a=1", "b=2", "c=3"], [True, False, False]   # starts 0, 4, 8
    >>> snap_label_aligned(steps, labels, 9), snap_label_aligned(steps, labels, 1)
    ((8, 2), (4, 1))
    >>> snap_label_aligned(steps, [True, True, True], 5)
    (5, -1)
    """
    _check(steps, labels)
    starts = step_starts(steps)
    wrong = [i for i, ok in enumerate(labels) if not ok]
    if not wrong:
        return pos, -1
    k = bisect_right([starts[i] for i in wrong], pos) - 1
    step = wrong[max(k, 0)]
    return starts[step], step


def snap_gold_independent(steps: Sequence[str], pos: int) -> tuple[int, int]:
    """The ``gold-independent`` rule: (start of the step containing pos, its index).

    A separator newline belongs to the step before it.

    >>> snap_gold_independent(["a=1", "b=2", "c=3"], 3), snap_gold_independent(["a=1", "b=2", "c=3"], 9)
    ((0, 0), (8, 2))
    """
    starts = step_starts(steps)
    step = _containing_step(starts, pos)
    return starts[step], step


@dataclass(frozen=True)
class SpanPrediction:
    """One row's prediction under one rule.

    ``start``: predicted characters are ``response[start:]`` (``None``: no predicted characters).
    ``first_step``: the step index ``start`` was snapped to (-1: none). ``located``: the earliest
    located span. ``unlocated``: the spans that could not be located.
    """

    start: int | None
    first_step: int
    located: SpanMatch | None
    unlocated: tuple[str, ...]
    methods: tuple[str, ...] = ()  # how each located span was found, in list order


def predict_span(
    steps: Sequence[str],
    labels: Sequence[bool],
    spans: Sequence[str],
    rule: SpanRule,
    locator: SpanLocator = locate_span,
) -> SpanPrediction:
    """Turn a judge's span list into predicted characters under ``rule`` (module docstring, step 3).

    ``labels`` are read only by the ``label-aligned`` rule.

    >>> steps, labels = ["x=2", "y=x+1=4", "z=y*2=8"], [True, False, False]   # starts 0, 4, 12
    >>> predict_span(steps, labels, ["z=y*2"], "label-aligned").start
    12
    >>> predict_span(steps, labels, ["x=2"], "label-aligned").start      # moved forward to the gold step
    4
    >>> predict_span(steps, labels, ["x=2"], "gold-independent").start
    0
    >>> predict_span(steps, labels, [], "gold-independent").start is None
    True
    """
    _check(steps, labels)
    if rule not in SPAN_RULES:
        raise ValueError(f"unknown span rule {rule!r}: choose one of {', '.join(SPAN_RULES)}")
    found = locate_spans(join_steps(steps), spans, locator)
    methods = tuple(m.method for m in found.matches if m is not None)
    p = found.earliest
    if p is None:
        return SpanPrediction(None, -1, None, found.unlocated, methods)
    if rule == LABEL_ALIGNED:
        start, step = snap_label_aligned(steps, labels, p.start)
    else:
        start, step = snap_gold_independent(steps, p.start)
    return SpanPrediction(start, step, p, found.unlocated, methods)


def predicted_first_wrong_step(steps: Sequence[str], spans: Sequence[str], locator: SpanLocator = locate_span) -> int:
    """Predicted first wrong step of a span list, gold-independent: the step containing the earliest
    located span, -1 for an empty list or one with no located span. For ProcessBench first-error F1
    (:func:`posttrainlab.eval.step_metrics.first_error_f1`).

    >>> predicted_first_wrong_step(["x=2", "y=5", "z=9"], ["z=9", "y=5"])
    1
    >>> predicted_first_wrong_step(["x=2"], [])
    -1
    """
    return predict_span(steps, [True] * len(steps), spans, GOLD_INDEPENDENT, locator).first_step


def span_row_confusion(steps: Sequence[str], labels: Sequence[bool], start: int | None) -> Confusion:
    """Character counts of one row: tp = |pred ∩ gold|, fp = |pred \\ gold|, fn = |gold \\ pred|, tn = rest.

    ``start`` is the predicted suffix's start (``None``: no predicted characters).

    >>> span_row_confusion(["a=1", "b=2", "c=3"], [True, False, True], 4)   # gold 4..8, pred 4..11
    Confusion(tp=4, fp=3, fn=0, tn=4)
    """
    n = len(join_steps(steps))
    gold = gold_intervals(steps, labels)
    gold_chars = sum(e - s for s, e in gold)
    pred_chars = 0 if start is None else n - start
    tp = 0 if start is None else sum(max(0, e - max(s, start)) for s, e in gold)
    return Confusion(tp, pred_chars - tp, gold_chars - tp, n - pred_chars - gold_chars + tp)


@dataclass(frozen=True)
class SpanLevel:
    """Micro span-level result of one rule over all rows, with what could not be located.

    ``chars``: pooled character counts (precision/recall/F1 are its properties).
    ``unlocated``: (row index, span) for every span that was not located.
    ``methods``: how many spans each locating method found.
    """

    rule: SpanRule
    chars: Confusion
    n_rows: int
    n_spans: int
    unlocated: tuple[tuple[int, str], ...]
    methods: dict[str, int]

    @property
    def precision(self) -> float:
        return self.chars.precision

    @property
    def recall(self) -> float:
        return self.chars.recall

    @property
    def f1(self) -> float:
        return self.chars.f1

    @property
    def reads_gold_labels(self) -> bool:
        """True for the label-aligned rule: report it as label-dependent wherever it is shown."""
        return self.rule == LABEL_ALIGNED


def span_level(
    steps: Sequence[Sequence[str]],
    labels: Sequence[Sequence[bool]],
    spans: Sequence[Sequence[str]],
    rule: SpanRule,
    locator: SpanLocator = locate_span,
) -> SpanLevel:
    """Micro span precision/recall/F1 over all rows under ``rule`` (module docstring, step 4).

    >>> r = span_level([["a=1", "b=2"], ["c=3"]], [[True, False], [True]], [["b=2"], ["c=3", "q"]],
    ...                "gold-independent")
    >>> r.chars, r.precision, r.recall, r.unlocated
    (Confusion(tp=3, fp=3, fn=0, tn=4), 0.5, 1.0, ((1, 'q'),))
    """
    if not len(steps) == len(labels) == len(spans):
        raise ValueError(f"{len(steps)} step lists, {len(labels)} label lists, {len(spans)} span lists")
    total = Confusion()
    unlocated: list[tuple[int, str]] = []
    methods: dict[str, int] = {}
    for i, (row_steps, row_labels, row_spans) in enumerate(zip(steps, labels, spans, strict=True)):
        pred = predict_span(row_steps, row_labels, row_spans, rule, locator)
        total += span_row_confusion(row_steps, row_labels, pred.start)
        unlocated.extend((i, s) for s in pred.unlocated)
        for m in pred.methods:
            methods[m] = methods.get(m, 0) + 1
    return SpanLevel(rule, total, len(steps), sum(len(s) for s in spans), tuple(unlocated), methods)


def span_case_confusion(labels: Sequence[Sequence[bool]], spans: Sequence[Sequence[str]]) -> Confusion:
    """Case level over rows: flawed = any label False, flagged = non-empty span list (positive = flawed).

    >>> span_case_confusion([[True, False], [True], [True]], [["x"], ["y"], []])
    Confusion(tp=1, fp=1, fn=0, tn=1)
    """
    if len(labels) != len(spans):
        raise ValueError(f"{len(labels)} label lists but {len(spans)} span lists")
    return confusion([not all(ls) for ls in labels], [len(s) > 0 for s in spans])
