"""Verifying and repairing judge annotations (label/repair.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.data.formats.hal import parse_hal_pieces
from posttrainlab.label.repair import MIN_RATIO, align_spans, annotation_pieces, trim_spans, verify

STEPS = [
    "Alex buys 7 boxes of pencils with 12 pencils in each box.",
    "7 * 12 = 84",
    "Alex gives away 15 pencils, so 84 - 15 = 68.",
    "Answer: 68",
]
SOURCE = "\n\n".join(STEPS)
WRONG = SOURCE.index("68")  # the result of step 2


def tagged(text: str, start: int, end: int) -> str:
    return text[:start] + "<HAL>" + text[start:end] + "</HAL>" + text[end:]


def test_exact_literal_and_untagged_copy():
    assert verify(tagged(SOURCE, WRONG, WRONG + 2), SOURCE).spans == [(WRONG, WRONG + 2)]
    assert verify(tagged(SOURCE, WRONG, WRONG + 2), SOURCE).how == "exact"
    for clean in ("No hallucinations", " No hallucinations.\n", SOURCE):
        v = verify(clean, SOURCE)
        assert v.ok and v.spans == []
    assert verify("<think>step 2 is off</think>\n" + tagged(SOURCE, WRONG, WRONG + 2), SOURCE).how == "exact"


def test_whitespace_inside_a_tag_is_trimmed():
    v = verify(tagged(SOURCE, WRONG - 1, WRONG + 3), SOURCE)  # " 68." -> "68."
    assert v.spans == [(WRONG, WRONG + 3)]


@pytest.mark.parametrize(
    "drift",
    [
        lambda s: s.replace("\n\n", "\n", 1),  # a lost blank line
        lambda s: s.replace("pencils with", "pencils  with"),  # doubled space
        lambda s: s.replace("Answer: ", "Answer:"),  # a dropped space
        lambda s: s + ".",  # an added full stop
    ],
)
def test_cosmetic_drift_is_repaired_onto_the_source(drift):
    answer = drift(tagged(SOURCE, WRONG, WRONG + 2))
    v = verify(answer, SOURCE)
    assert v.how == "repaired" and v.spans == [(WRONG, WRONG + 2)] and v.ratio >= MIN_RATIO


def test_changed_text_inside_a_tag_is_rejected():
    answer = tagged(SOURCE, WRONG, WRONG + 2).replace("<HAL>68</HAL>", "<HAL>69</HAL>")
    v = verify(answer, SOURCE)
    assert v.how == "rejected" and "inside tag 1" in v.reason


def test_truncated_or_rewritten_answers_are_rejected():
    cut = SOURCE[: int(len(SOURCE) * 0.8)]  # the last fifth never came back
    early = SOURCE.index("84")
    v = verify(tagged(cut, early, early + 2), SOURCE)
    assert v.how == "rejected" and "ratio" in v.reason
    # a short last step dropped: the ratio passes, the step coverage rule does not
    dropped = "\n\n".join(STEPS[:3])
    assert align_spans(dropped, [], SOURCE)[2] > MIN_RATIO
    v = verify(tagged(dropped, WRONG, WRONG + 2), SOURCE)
    assert v.how == "rejected" and "step 3 is mostly missing" in v.reason


def test_bad_markup_and_empty_answers_are_rejected():
    for answer in ("", None, "<HAL>7 * 12 = 84", "a </HAL> b", "<HAL><HAL>x</HAL></HAL>"):
        assert verify(answer, SOURCE).how == "rejected"


def test_the_threshold_is_a_knob():
    answer = SOURCE.replace("\n\n", "\n")  # every blank line lost: ratio just under 0.98
    assert verify(answer, SOURCE).ok
    assert not verify(answer, SOURCE, min_ratio=0.999).ok


def test_trim_spans_drops_whitespace_only_spans():
    assert trim_spans("a  b", [(1, 3), (0, 2)]) == [(0, 1)]


def test_annotation_pieces_refuses_a_span_edge_in_a_separator():
    with pytest.raises(ValueError):
        annotation_pieces(["a", "b"], [(1, 3)])


_piece = st.text(alphabet="ab =+\n", min_size=1, max_size=12).map(str.strip).filter(bool)


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(_piece, min_size=1, max_size=5).filter(lambda ps: all("\n\n" not in p for p in ps)), data=st.data()
)
def test_annotation_pieces_reads_back_as_the_same_spans(pieces, data):
    text = "\n\n".join(pieces)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6, unique=True)))
    spans = trim_spans(text, list(zip(cuts[::2], cuts[1::2], strict=False)))
    clean, got = parse_hal_pieces(annotation_pieces(pieces, spans))
    assert clean == pieces and got == spans
