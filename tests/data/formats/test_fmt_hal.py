"""``<HAL>`` markup: parse, insert, validate, pieces; the insert/parse round trip as a property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.data.formats.hal import (
    NO_HALLUCINATIONS,
    HalMarkupError,
    annotation_spans,
    check_hal,
    insert_hal,
    parse_hal,
    parse_hal_pieces,
    piece_bounds,
    strip_hal,
    touched_pieces,
)


@pytest.mark.parametrize(
    ("annotated", "clean", "spans"),
    [
        ("no tags at all", "no tags at all", []),
        ("<HAL>all</HAL>", "all", [(0, 3)]),
        ("x = <HAL>15 * 2 / 3 = 5</HAL> bars", "x = 15 * 2 / 3 = 5 bars", [(4, 18)]),
        ("<HAL>a</HAL><HAL>b</HAL>", "ab", [(0, 1), (1, 2)]),  # touching spans stay two spans
        ("3² = <HAL>6</HAL> — <HAL>x</HAL>", "3² = 6 — x", [(5, 6), (9, 10)]),  # offsets count characters
        ("line\n\n<HAL>two\n\nlines</HAL>", "line\n\ntwo\n\nlines", [(6, 16)]),
        ("<hal>not a tag</hal>", "<hal>not a tag</hal>", []),
    ],
)
def test_parse_hal_known_answers(annotated, clean, spans):
    assert parse_hal(annotated) == (clean, spans)
    assert insert_hal(clean, spans) == annotated


@pytest.mark.parametrize(
    ("annotated", "reason"),
    [
        ("a <HAL>b", "unclosed <HAL> at char 2"),
        ("a</HAL> b", "</HAL> without <HAL> at char 1"),
        ("<HAL>a <HAL>b</HAL></HAL>", "nested <HAL> at char 7 (one is open since char 0)"),
        ("a <HAL></HAL>b", "empty <HAL></HAL> span at char 2"),
        ("<HAL>a</HAL></HAL>", "</HAL> without <HAL> at char 12"),
    ],
)
def test_parse_hal_rejects_bad_markup(annotated, reason):
    with pytest.raises(HalMarkupError) as e:
        parse_hal(annotated)
    assert str(e.value) == reason


@pytest.mark.parametrize(
    ("text", "spans", "reason"),
    [
        ("abc", [(1, 1)], "empty or outside"),
        ("abc", [(2, 4)], "empty or outside"),
        ("abc", [(0, 2), (1, 3)], "overlaps"),
        ("abc", [(1, 2), (0, 1)], "overlaps"),  # unsorted
        ("a<HAL>", [(0, 1)], "already holds"),
    ],
)
def test_insert_hal_rejects_spans_it_cannot_write(text, spans, reason):
    with pytest.raises(HalMarkupError, match=reason):
        insert_hal(text, spans)


@pytest.mark.parametrize(
    ("annotation", "source", "reason"),
    [
        ("2 + 2 = <HAL>5</HAL>", "2 + 2 = 5", None),
        (NO_HALLUCINATIONS, "2 + 2 = 4", None),  # the annotator's literal for a clean solution
        ("No hallucinations.", "2 + 2 = 4", "without tags it differs from the source at char 0"),
        ("2 + 2 = <HAL>4</HAL>", "2 + 2 = 5", "without tags it differs from the source at char 8"),
        ("2 + 2 = 5 extra", "2 + 2 = 5", "without tags it differs from the source at char 9"),
        ("2 + 2 = <HAL>5", "2 + 2 = 5", "unclosed <HAL> at char 8"),
    ],
)
def test_check_hal(annotation, source, reason):
    assert check_hal(annotation, source) == reason


def test_no_hallucinations_literal_has_no_spans():
    assert annotation_spans(NO_HALLUCINATIONS, "anything at all") == []


def test_strip_hal_removes_tags_without_checking():
    assert strip_hal("</HAL>a<HAL>b") == "ab"


def test_pieces_span_across_a_blank_line_boundary():
    clean, spans = parse_hal_pieces(["We compute 12 / 4 first.", "12 / 4 = <HAL>4.", "Then 4 + 1 = 5.</HAL>", "Done."])
    assert clean == ["We compute 12 / 4 first.", "12 / 4 = 4.", "Then 4 + 1 = 5.", "Done."]
    joined = "\n\n".join(clean)
    (start, end) = spans[0]
    assert joined[start:end] == "4.\n\nThen 4 + 1 = 5."
    assert touched_pieces(spans, piece_bounds(clean, "\n\n")) == [False, True, True, False]


@pytest.mark.parametrize(
    ("pieces", "touched"),
    [
        (["a<HAL>", "b</HAL>", "c"], [True, True, False]),  # opening tag at the very end of piece 0
        (["a", "<HAL>b", "</HAL>c"], [False, True, True]),  # closing tag at the very start of piece 2
        (["a<HAL>", "</HAL>b"], [True, True]),  # a span that holds only the separator
        (["<HAL>a", "b", "c</HAL>", "d"], [True, True, True, False]),  # every piece in between
        (["a <HAL>b</HAL>", "c"], [True, False]),
    ],
)
def test_a_span_marks_every_piece_it_touches(pieces, touched):
    clean, spans = parse_hal_pieces(pieces)
    assert touched_pieces(spans, piece_bounds(clean, "\n\n")) == touched


def test_piece_errors_name_the_piece():
    with pytest.raises(HalMarkupError, match="unclosed <HAL> at char 2 of piece 1"):
        parse_hal_pieces(["ok", "a <HAL>b", "c"])
    with pytest.raises(HalMarkupError, match="piece 1 is int"):
        parse_hal_pieces(["ok", 3])


# --- properties -------------------------------------------------------------------------------------

# Text that cannot hold a tag by accident: the alphabet has no '<'.
TEXT = st.text(alphabet=st.characters(blacklist_characters="<", blacklist_categories=("Cs",)), max_size=60)


@st.composite
def text_and_spans(draw):
    """A text and sorted, non-overlapping, non-empty spans into it (touching spans allowed)."""
    text = draw(TEXT)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=8)))
    spans = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        if draw(st.booleans()):
            spans.append((start, end))
    return text, spans


@settings(max_examples=200, deadline=None)
@given(text_and_spans())
def test_insert_then_parse_returns_spans_and_text_unchanged(case):
    text, spans = case
    annotated = insert_hal(text, spans)
    assert parse_hal(annotated) == (text, spans)
    assert strip_hal(annotated) == text
    assert check_hal(annotated, text) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT.filter(lambda s: "\n" not in s), min_size=1, max_size=5), st.data())
def test_pieces_round_trip_and_touch_rule(pieces, data):
    """Tag the joined text, split it into pieces, parse: same spans; touched = overlapped or at an edge."""
    joined = "\n\n".join(pieces)
    inside_sep = {end + 1 for _, end in piece_bounds(pieces, "\n\n")}  # a tag there would split the separator
    positions = st.integers(0, len(joined)).filter(lambda i: i not in inside_sep)
    cuts = sorted(data.draw(st.sets(positions, max_size=6)))
    spans = [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if data.draw(st.booleans())]
    annotated = insert_hal(joined, spans).split("\n\n")
    assert len(annotated) == len(pieces)
    clean, back = parse_hal_pieces(annotated)
    assert (clean, back) == (pieces, spans)
    bounds = piece_bounds(pieces, "\n\n")
    expected = [any(s <= b and e >= a for s, e in spans) for a, b in bounds]
    assert touched_pieces(spans, bounds) == expected
