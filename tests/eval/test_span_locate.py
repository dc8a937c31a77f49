"""Locating copied spans: exact, whitespace-changed, slightly edited and absent spans."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.eval.span_locate import (
    FUZZY_MIN_CHARS,
    FUZZY_MIN_RATIO,
    SpanMatch,
    locate_span,
    locate_spans,
    match_ratio,
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


CAR = [
    "Step 1: The car travels 68 miles per hour for 8 hours",
    "Step 2: The car travels 78 miles per hour for 8 hours",
]


def test_fuzzy_returns_the_best_matching_step_of_a_template():
    """The judge copied step 2 without its "78". Without whitespace the span has 40 characters and each
    step 42: all 40 match step 2 (ratio 2*40/82 = 0.976), 39 match step 1, whose "1" is not the span's "2"
    (2*39/82 = 0.951). One global alignment anchors on step 1 (its "milesperhourfor8hours" comes first);
    the best window is step 2."""
    response, span = "\n".join(CAR), "Step 2: The car travels miles per hour for 8 hours"
    assert match_ratio(CAR[0], span) == pytest.approx(78 / 82)
    assert match_ratio(CAR[1], span) == pytest.approx(80 / 82)
    m = locate_span(response, span)
    assert m == SpanMatch(len(CAR[0]) + 1, len(response), "fuzzy")
    assert match_ratio(response[m.start : m.end], span) == pytest.approx(80 / 82)


def test_fuzzy_finds_part_of_a_later_step_sharing_its_words():
    """Steps 1 and 2 begin alike; the judge copied the start of step 2 and dropped its colon. Without
    whitespace the span "Step2Thecartravels55milesperho" has 30 characters; the 31-character window in
    step 2 holds all 30 (2*30/61 = 0.984), the one in step 1 29 (its "1": 2*29/61 = 0.951)."""
    steps = [
        "Step 1: The car travels 55 miles per hour for 9 hours, so it covers 120 miles.",
        "Step 2: The car travels 55 miles per hour for 9 hours, so it covers 377 miles.",
        "Step 3: The car travels 99 miles per hour for 5 hours, so it covers 584 miles.",
    ]
    response, span = "\n".join(steps), "Step 2 The car travels 55 miles per ho"
    m = locate_span(response, span)
    assert m is not None and m.method == "fuzzy"
    assert response[m.start : m.end] == "Step 2: The car travels 55 miles per ho"
    assert match_ratio(response[m.start : m.end], span) == pytest.approx(60 / 61)


NOUNS = ["car", "train", "bus", "boat"]
templated_steps = st.lists(
    st.builds(
        "The {} travels {} miles per hour for {} hours, so it covers {} miles.".format,
        st.sampled_from(NOUNS),
        st.sampled_from([40, 45, 60, 68, 78]),  # few values: steps that differ in one number or none
        st.integers(1, 9),
        st.integers(100, 999),
    ),
    min_size=2,
    max_size=6,
).map(lambda steps: [f"Step {i + 1}: {s}" for i, s in enumerate(steps)])
# Steps are lines (span_metrics joins them with "\n"); other whitespace may sit anywhere in them.
free_steps = st.lists(st.text(alphabet="ab c1 2=+\t\r.", min_size=1, max_size=40), min_size=1, max_size=6)


@st.composite
def steps_and_span(draw):
    """Steps (templated, or free text) and a span: one step, its first or second half, or any piece of
    the response, with a few characters dropped, replaced or inserted; or unrelated text."""
    steps = draw(st.one_of(templated_steps, templated_steps, free_steps))  # templates: where one alignment fails
    response = "\n".join(steps)
    kind = draw(st.sampled_from(["step", "step", "first half", "second half", "piece", "unrelated"]))
    if kind == "unrelated":
        return steps, draw(st.text(alphabet="ab c1 2=+.xyz", min_size=1, max_size=60))
    if kind == "piece":
        start = draw(st.integers(0, len(response) - 1))
        text = response[start : draw(st.integers(start + 1, len(response)))]
    else:
        step = draw(st.sampled_from(steps))
        half = len(step) // 2
        text = {"step": step, "first half": step[: half + 1], "second half": step[half:]}[kind]
    span = list(text)
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(span)))
        edit = draw(st.sampled_from(["drop", "replace", "insert"]))
        if edit == "insert" or i == len(span):
            span.insert(i, draw(st.sampled_from("0123456789xyz")))
        elif edit == "drop":
            del span[i]
        else:
            span[i] = draw(st.sampled_from("0123456789xyz"))
    return steps, "".join(span)


@settings(max_examples=500, deadline=None)
@given(steps_and_span())
def test_a_located_span_matches_at_least_as_well_as_every_step(case):
    """Whatever the locator returns scores at least the ratio of the span against each whole step; when
    it returns nothing, no step would have been accepted; and a span present verbatim is an exact match."""
    steps, span = case
    response = "\n".join(steps)
    m = locate_span(response, span)
    if span.strip() and span in response:
        assert m is not None and m.method == "exact"
    fuzzy_allowed = len("".join(span.split())) >= FUZZY_MIN_CHARS
    best_step = max(match_ratio(step, span) for step in steps)
    if m is None:
        assert not fuzzy_allowed or best_step < FUZZY_MIN_RATIO
    else:
        assert match_ratio(response[m.start : m.end], span) >= best_step - 1e-12
        if m.method == "fuzzy":
            assert match_ratio(response[m.start : m.end], span) >= FUZZY_MIN_RATIO


def test_many_short_lines_and_a_long_span_stay_cheap():
    """500 lines of ~6 characters and a span copying 200 of them with one edit (979 characters): scoring
    every run of lines would align ~40,000 windows of ~1,000 characters (minutes); the line candidates
    are too short to qualify and the anchors find it. A hang check, not a benchmark."""
    lines = [f"x{i % 97}={i % 7}" for i in range(500)]
    response = "\n".join(lines)
    copied = "".join(lines[100:300])
    span = copied[:50] + "Q" + copied[51:]
    start = time.monotonic()
    m = locate_span(response, span)
    assert time.monotonic() - start < 10
    assert m is not None and m.method == "fuzzy"
    assert m.start == response.index(lines[100]) and m.end == response.index(lines[299]) + len(lines[299])
