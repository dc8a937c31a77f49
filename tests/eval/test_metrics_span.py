"""Math-Shepherd-614 span metrics under both rules, against characters counted by hand.

Labels here are Math-Shepherd's: True = correct step, False = wrong step.
"""

from __future__ import annotations

import random

import pytest

from posttrainlab.eval.counts import Confusion
from posttrainlab.eval.span_locate import SpanMatch
from posttrainlab.eval.span_metrics import (
    GOLD_INDEPENDENT,
    LABEL_ALIGNED,
    gold_intervals,
    join_steps,
    predict_span,
    predicted_first_wrong_step,
    snap_gold_independent,
    snap_label_aligned,
    span_case_confusion,
    span_level,
    span_row_confusion,
    step_starts,
)

# The 3-row toy set.
# Row 0: "a=1\nb=2\nc=3" (11 chars, steps start at 0, 4, 8), labels T F F.
#        gold = step 1 with its newline [4, 8) + last step [8, 11) = 7 chars.
#        spans ["c=3"]: located at 8, inside the 2nd of the two wrong steps.
# Row 1: "x=2\ny=x+1=4\nz=y*2=8" (3+1+7+1+7 = 19 chars, starts 0, 4, 12), labels T F F.
#        gold = [4, 12) + [12, 19) = 15 chars.
#        spans ["x=2"]: located at 0, inside the correct step before the first wrong one.
# Row 2: "p=5\nq=6" (7 chars, starts 0, 4), labels T T: no gold character.
#        spans ["=6"]: located at 5, in the middle of step 1.
STEPS = [["a=1", "b=2", "c=3"], ["x=2", "y=x+1=4", "z=y*2=8"], ["p=5", "q=6"]]
LABELS = [[True, False, False], [True, False, False], [True, True]]
SPANS = [["c=3"], ["x=2"], ["=6"]]


def test_response_and_gold_characters():
    """Steps joined by one newline; each wrong step owns its following newline, the last step has none."""
    assert join_steps(STEPS[1]) == "x=2\ny=x+1=4\nz=y*2=8"
    assert step_starts(STEPS[1]) == [0, 4, 12]
    assert gold_intervals(STEPS[0], LABELS[0]) == [(4, 8), (8, 11)]
    assert gold_intervals(STEPS[1], LABELS[1]) == [(4, 12), (12, 19)]
    assert gold_intervals(STEPS[2], LABELS[2]) == []
    # A wrong first step of a one-step solution: no newline to add.
    assert gold_intervals(["only"], [False]) == [(0, 4)]
    response = join_steps(STEPS[0])
    assert [response[s:e] for s, e in gold_intervals(STEPS[0], LABELS[0])] == ["b=2\n", "c=3"]
    with pytest.raises(ValueError):
        gold_intervals(["a"], [True, False])


def test_toy_set_label_aligned_by_hand():
    """label-aligned (reads the gold labels):

    row 0: p = 8; gold-wrong starts 4, 8; latest <= 8 is 8 -> pred [8, 11) = 3 chars, all gold: tp 3.
    row 1: p = 0; no gold-wrong start <= 0 -> the first one, 4 -> pred [4, 19) = 15 chars = the gold: tp 15.
    row 2: no gold-wrong step -> p = 5 kept -> pred [5, 7) = 2 chars, tp 0.
    pooled: gold 7 + 15 + 0 = 22, pred 3 + 15 + 2 = 20, tp 3 + 15 + 0 = 18, all chars 11 + 19 + 7 = 37.
    P = 18/20 = 0.9, R = 18/22 = 9/11, F1 = 2*18 / (20 + 22) = 6/7.
    """
    r = span_level(STEPS, LABELS, SPANS, LABEL_ALIGNED)
    assert r.chars == Confusion(tp=18, fp=2, fn=4, tn=37 - 20 - 22 + 18)
    assert r.precision == pytest.approx(0.9)
    assert r.recall == pytest.approx(9 / 11)
    assert r.f1 == pytest.approx(6 / 7)
    assert r.reads_gold_labels
    assert (r.n_rows, r.n_spans, r.unlocated, r.methods) == (3, 3, (), {"exact": 3})


def test_toy_set_gold_independent_by_hand():
    """gold-independent (start of the step containing p):

    row 0: p = 8 in step 2 (start 8) -> pred [8, 11) = 3 chars, tp 3.
    row 1: p = 0 in step 0 (start 0) -> pred [0, 19) = 19 chars, tp 15.
    row 2: p = 5 in step 1 (start 4) -> pred [4, 7) = 3 chars, tp 0.
    pooled: gold 22, pred 3 + 19 + 3 = 25, tp 18. P = 18/25 = 0.72, R = 9/11, F1 = 36 / 47.
    """
    r = span_level(STEPS, LABELS, SPANS, GOLD_INDEPENDENT)
    assert r.chars == Confusion(tp=18, fp=7, fn=4, tn=37 - 25 - 22 + 18)
    assert r.precision == pytest.approx(0.72)
    assert r.recall == pytest.approx(9 / 11)
    assert r.f1 == pytest.approx(36 / 47)
    assert not r.reads_gold_labels


def test_rules_row_by_row():
    """The three kinds of row of the toy set, one rule against the other (start, snapped step)."""
    la = [predict_span(s, ls, sp, LABEL_ALIGNED) for s, ls, sp in zip(STEPS, LABELS, SPANS, strict=True)]
    gi = [predict_span(s, ls, sp, GOLD_INDEPENDENT) for s, ls, sp in zip(STEPS, LABELS, SPANS, strict=True)]
    # Span inside the 2nd of two wrong steps: both rules snap to that step's start.
    assert (la[0].start, la[0].first_step) == (gi[0].start, gi[0].first_step) == (8, 2)
    # Span inside a correct step before the first wrong step: label-aligned moves forward to it.
    assert (la[1].start, la[1].first_step) == (4, 1)
    assert (gi[1].start, gi[1].first_step) == (0, 0)
    # No gold wrong step but a prediction: label-aligned has nothing to align to and keeps p.
    assert (la[2].start, la[2].first_step) == (5, -1)
    assert (gi[2].start, gi[2].first_step) == (4, 1)
    assert la[0].located == SpanMatch(8, 11, "exact")


def test_rules_differ_for_a_correct_step_after_a_wrong_one():
    """Response "a=1\\nb=2\\nc=3", labels F T T, span "c=3" at p = 8 (a correct step after the wrong step 0).

    gold = [0, 4) = 4 chars.
    label-aligned: latest gold-wrong start <= 8 is 0 -> pred [0, 11) = 11 chars, tp 4, fp 7.
    gold-independent: step 2 -> pred [8, 11) = 3 chars, tp 0, fp 3, fn 4.
    """
    steps, labels = ["a=1", "b=2", "c=3"], [False, True, True]
    la = predict_span(steps, labels, ["c=3"], LABEL_ALIGNED)
    gi = predict_span(steps, labels, ["c=3"], GOLD_INDEPENDENT)
    assert span_row_confusion(steps, labels, la.start) == Confusion(tp=4, fp=7, fn=0, tn=0)
    assert span_row_confusion(steps, labels, gi.start) == Confusion(tp=0, fp=3, fn=4, tn=4)


def test_label_aligned_snaps_down_within_non_adjacent_wrong_steps():
    """Steps "s0".."s4" start at 0, 3, 6, 9, 12; wrong steps 1 and 3. Snap targets by position:

    p 1 (step 0, before any wrong step) -> 3 (first wrong start)
    p 4 (step 1) -> 3;  p 7 (step 2, correct) -> 3 (latest wrong start <= 7);  p 10 (step 3) -> 9
    p 13 (step 4, correct) -> 9.  Gold-independent snaps to 0, 3, 6, 9, 12.
    """
    steps, labels = ["s0", "s1", "s2", "s3", "s4"], [True, False, True, False, True]
    assert [snap_label_aligned(steps, labels, p) for p in (1, 4, 7, 10, 13)] == [
        (3, 1),
        (3, 1),
        (3, 1),
        (9, 3),
        (9, 3),
    ]
    assert [snap_gold_independent(steps, p)[0] for p in (1, 4, 7, 10, 13)] == [0, 3, 6, 9, 12]


def test_separator_newline_belongs_to_the_step_before_it():
    """In "a=1\\nb=2" the newline at offset 3 follows step 0, so a span starting there snaps to step 0."""
    assert snap_gold_independent(["a=1", "b=2"], 3) == (0, 0)
    assert predict_span(["a=1", "b=2"], [True, True], ["\nb=2"], GOLD_INDEPENDENT).start == 0


def test_earliest_located_span_wins_not_the_first_listed():
    """Spans ["z=y*2", "y=x+1"] in row 1: located at 12 and 4; the earliest (4) is used by both rules."""
    for rule in (LABEL_ALIGNED, GOLD_INDEPENDENT):
        p = predict_span(STEPS[1], LABELS[1], ["z=y*2", "y=x+1"], rule)
        assert (p.start, p.first_step) == (4, 1)


def test_empty_list_and_unlocatable_spans():
    """An empty list predicts nothing. A list of unlocatable spans predicts nothing either, but the spans
    are reported (with their row) and the row still counts as flagged at case level."""
    p = predict_span(STEPS[0], LABELS[0], [], LABEL_ALIGNED)
    assert (p.start, p.first_step, p.located, p.unlocated) == (None, -1, None, ())
    assert span_row_confusion(STEPS[0], LABELS[0], None) == Confusion(tp=0, fp=0, fn=7, tn=4)
    r = span_level(STEPS, LABELS, [[], ["not in the response at all"], []], GOLD_INDEPENDENT)
    assert r.chars == Confusion(tp=0, fp=0, fn=22, tn=15)
    assert r.unlocated == ((1, "not in the response at all"),)
    assert (r.precision, r.recall, r.f1) == (0.0, 0.0, 0.0)
    assert span_case_confusion(LABELS, [[], ["not in the response at all"], []]) == Confusion(tp=1, fn=1, tn=1)


def test_partly_located_list_uses_located_spans_and_reports_the_rest():
    """["q", "b=2"] in row 0: "q" is not found (reported), "b=2" is at 4 -> pred [4, 11) under both rules."""
    r = span_level([STEPS[0]], [LABELS[0]], [["q", "b=2"]], GOLD_INDEPENDENT)
    assert r.chars == Confusion(tp=7, fp=0, fn=0, tn=4)
    assert (r.precision, r.recall, r.f1) == (1.0, 1.0, 1.0)
    assert r.unlocated == ((0, "q"),)


def test_whitespace_changed_span_is_located_and_counted():
    """The judge re-spaced "y=x+1=4" as "y = x + 1 = 4": found by the whitespace step at 4."""
    r = span_level([STEPS[1]], [LABELS[1]], [["y = x + 1 = 4"]], GOLD_INDEPENDENT)
    assert r.methods == {"whitespace": 1}
    assert r.chars == Confusion(tp=15, fp=0, fn=0, tn=4)


def test_zero_division_cases():
    """No gold character and no prediction anywhere: 0/0 everywhere -> P = R = F1 = 0.0 by convention.
    Predictions on correct rows only: pred > 0, tp = 0 -> P = 0; gold = 0 -> R = 0 (0/0); F1 = 0."""
    r = span_level([["p=5", "q=6"]], [[True, True]], [[]], LABEL_ALIGNED)
    assert r.chars == Confusion(tn=7)
    assert (r.precision, r.recall, r.f1) == (0.0, 0.0, 0.0)
    r = span_level([["p=5", "q=6"]], [[True, True]], [["q=6"]], GOLD_INDEPENDENT)
    assert r.chars == Confusion(fp=3, tn=4)
    assert (r.precision, r.recall, r.f1) == (0.0, 0.0, 0.0)
    assert span_level([], [], [], LABEL_ALIGNED).chars == Confusion()


def test_case_level_by_hand():
    """Toy set: flawed = rows 0, 1; flagged (non-empty list) = rows 0, 1, 2.
    tp 2, fp 1, fn 0, tn 0: P = 2/3, R = 1, F1 = 4/5, accuracy = 2/3."""
    c = span_case_confusion(LABELS, SPANS)
    assert c == Confusion(tp=2, fp=1, fn=0, tn=0)
    assert c.precision == pytest.approx(2 / 3)
    assert c.recall == 1.0
    assert c.f1 == pytest.approx(0.8)
    assert c.accuracy == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        span_case_confusion(LABELS, SPANS[:2])


def test_predicted_first_wrong_step_is_gold_independent():
    """Row 1 with ["x=2"]: the step containing the earliest span is 0 whatever the labels say; [] -> -1;
    a list of unlocatable spans -> -1."""
    assert predicted_first_wrong_step(STEPS[1], ["z=y*2", "x=2"]) == 0
    assert predicted_first_wrong_step(STEPS[1], ["=x+1"]) == 1
    assert predicted_first_wrong_step(STEPS[1], []) == -1
    assert predicted_first_wrong_step(STEPS[1], ["nowhere to be found"]) == -1


def test_custom_locator_and_bad_input():
    """Any callable (response, span) -> SpanMatch | None can locate; a locator that finds nothing leaves
    every span unlocated. Unknown rules and length mismatches are errors."""
    r = span_level(STEPS, LABELS, SPANS, GOLD_INDEPENDENT, locator=lambda response, span: None)
    assert r.chars.tp + r.chars.fp == 0
    assert len(r.unlocated) == 3
    with pytest.raises(ValueError, match="unknown span rule"):
        predict_span(STEPS[0], LABELS[0], ["c=3"], "nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        span_level(STEPS, LABELS[:2], SPANS, LABEL_ALIGNED)


def _brute_force_row(steps: list[str], labels: list[bool], start: int | None) -> Confusion:
    """Character sets straight from the definition: walk the response, tag each character."""
    gold: set[int] = set()
    pos = 0
    for i, (step, ok) in enumerate(zip(steps, labels, strict=True)):
        width = len(step) + (1 if i < len(steps) - 1 else 0)
        if not ok:
            gold.update(range(pos, pos + width))
        pos += width
    n = len("\n".join(steps))
    pred = set() if start is None else set(range(start, n))
    return Confusion(len(gold & pred), len(pred - gold), len(gold - pred), n - len(gold | pred))


@pytest.mark.parametrize("seed", range(10))
def test_interval_counts_match_character_sets(seed):
    """span_row_confusion's interval arithmetic equals counting character sets, on random rows."""
    rng = random.Random(seed)
    steps = ["".join(rng.choice("ab =1") for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 6))]
    labels = [rng.random() < 0.5 for _ in steps]
    n = len(join_steps(steps))
    for start in [None, *range(n + 1)]:
        assert span_row_confusion(steps, labels, start) == _brute_force_row(steps, labels, start)
