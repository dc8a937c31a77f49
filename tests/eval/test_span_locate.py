"""Locating copied spans: exact, whitespace-changed, slightly edited and absent spans."""

from __future__ import annotations

import pytest

from posttrainlab.eval.span_locate import (
    FUZZY_MIN_CHARS,
    FUZZY_MIN_RATIO,
    SpanMatch,
    locate_span,
    locate_spans,
)

RESPONSE = "\n".join(
    [
        "Step 1: Janet's ducks lay 16 eggs per day.",
        "Step 2: She eats 3 and bakes with 4, so she uses 3 + 4 = 7 eggs.",
        "Step 3: She has 16 - 7 = 9 eggs left to sell.",
        "Step 4: She makes 9 * 2 = $18 every day. The answer is: 18",
    ]
)
TRAIN = "\n".join(
    [
        "The train travels 60 miles per hour for 3 hours, so it covers 60 * 3 = 180 miles.",
        "Then it travels 40 miles per hour for 2 hours, covering 40 * 2 = 80 miles.",
        "The total distance is 180 + 80 = 260 miles.",
    ]
)


def test_exact_first_occurrence():
    """In "x = 1\\nx = 1" the span "x = 1" occurs at 0 and at 6: the first wins; response[start:end] is it."""
    assert locate_span("x = 1\nx = 1", "x = 1") == SpanMatch(0, 5, "exact")
    m = locate_span(RESPONSE, "She has 16 - 7 = 9 eggs")
    assert m is not None and m.method == "exact"
    assert RESPONSE[m.start : m.end] == "She has 16 - 7 = 9 eggs"


@pytest.mark.parametrize(
    "span",
    ["3+4=7", "3  +  4 = 7", "  3 + 4 = 7\n", "3 +\t4 =\n7"],
)
def test_whitespace_changed(span):
    """In "So 3 + 4 =\\n7 apples" the characters are S0 o1 _2 '3'3 _4 +5 _6 '4'7 _8 =9 \\n10 '7'11:
    whatever the spacing of the span, it maps back to [3, 12), the original text "3 + 4 =\\n7"."""
    assert locate_span("So 3 + 4 =\n7 apples", span) == SpanMatch(3, 12, "whitespace")


def test_whitespace_match_in_a_long_response_maps_back_to_original_offsets():
    """The judge dropped the spaces of "9 * 2 = $18"; the match covers the original spaced text."""
    m = locate_span(RESPONSE, "9*2=$18")
    assert m is not None and m.method == "whitespace"
    assert RESPONSE[m.start : m.end] == "9 * 2 = $18"


def test_slightly_edited_span_is_found_fuzzily():
    """The judge copied step 3 with 9 misread as 8. Without whitespace the span is 27 characters, 26 of them
    match the 27-character window "Shehas16-7=9eggslefttosell.": ratio = 2*26 / 54 = 0.963 >= 0.9."""
    m = locate_span(RESPONSE, "She has 16 - 7 = 8 eggs left to sell.")
    assert m is not None and m.method == "fuzzy"
    assert RESPONSE[m.start : m.end] == "She has 16 - 7 = 9 eggs left to sell."


def test_fuzzy_prefers_the_best_window_over_an_earlier_similar_one():
    """Step 2 of TRAIN copied with a word dropped ("it"): it also resembles step 1 (ratio 0.82), but
    the real step matches better and is chosen, although step 1 comes first."""
    m = locate_span(TRAIN, "Then travels 40 miles per hour for 2 hours, covering 40 * 2 = 80 miles.")
    assert m is not None and m.method == "fuzzy"
    assert TRAIN[m.start : m.end].startswith("Then")
    assert m.start == TRAIN.index("Then")


def test_absent_spans_are_not_located():
    """A span that is nowhere: None. A step absent from the response whose template resembles a present
    step (ratio 0.87 < 0.9) is not located either: reported rather than guessed."""
    assert locate_span(RESPONSE, "The answer is: 42 apples and 3 pears") is None
    without_step_2 = TRAIN.split("\n")[0]
    assert locate_span(without_step_2, "Then it travels 40 miles per hour for 2 hours,") is None


def test_short_or_empty_spans_are_never_fuzzy():
    """Span "x = 6" has 3 non-whitespace characters < FUZZY_MIN_CHARS: it must match exactly or up to
    whitespace. Empty and all-whitespace spans are never located."""
    assert FUZZY_MIN_CHARS > 3
    assert locate_span("x = 5", "x = 6") is None
    assert locate_span("x = 5", "x=5") == SpanMatch(0, 5, "whitespace")
    assert locate_span(RESPONSE, "") is None
    assert locate_span(RESPONSE, " \n ") is None
    assert locate_span("", "something long enough") is None
    assert 0.0 < FUZZY_MIN_RATIO < 1.0


def test_locate_spans_keeps_order_reports_unlocated_and_finds_the_earliest():
    """Three spans, the 2nd absent: unlocated holds it; the earliest match is the 3rd (offset 0), and on
    equal starts the shorter match wins."""
    found = locate_spans(RESPONSE, ["She has 16", "no such text here at all", "Step 1"])
    assert found.unlocated == ("no such text here at all",)
    assert [m is None for m in found.matches] == [False, True, False]
    assert found.earliest == SpanMatch(0, 6, "exact")
    tie = locate_spans(RESPONSE, ["Step 1: Janet", "Step 1"])
    assert tie.earliest == SpanMatch(0, 6, "exact")
    assert locate_spans(RESPONSE, []).earliest is None
