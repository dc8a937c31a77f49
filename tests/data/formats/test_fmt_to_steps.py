"""Each format's step reader (``to_steps``): every labelled step, cut to exactly the format's step view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.formats import FORMATS, STEP_FORMATS, StepRow
from posttrainlab.data.formats.math_shepherd import ms_to_step
from posttrainlab.data.formats.processbench import pb_to_step
from posttrainlab.data.formats.sharp import span_to_step

ASSETS = Path(__file__).parents[2] / "assets" / "formats"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_every_format_but_mc_value_has_a_reader():
    assert STEP_FORMATS == ("step", "span", "math-shepherd", "processbench")
    assert FORMATS["mc-value"].to_steps is None


@pytest.mark.parametrize(
    "fmt, asset, to_step_view",
    [
        ("step", "span_good_step.jsonl", lambda r: r),
        ("span", "span_good.jsonl", span_to_step),
        ("math-shepherd", "ms_list.jsonl", ms_to_step),
        ("math-shepherd", "ms_ki.jsonl", ms_to_step),
        ("processbench", "pb.jsonl", pb_to_step),
        ("processbench", "ratings.jsonl", pb_to_step),
        ("processbench", "prm800k.jsonl", pb_to_step),
    ],
)
def test_cut_at_the_first_error_is_the_step_view(fmt, asset, to_step_view):
    """The reader keeps every labelled step; cutting its row gives what ``data convert`` writes."""
    for row in rows(asset):
        got = FORMATS[fmt].to_steps(row)
        assert isinstance(got, StepRow) and len(got.steps) == len(got.labels) > 0
        assert set(got.labels) <= {0, 1} and all(type(x) is int for x in got.labels)
        cut = got.cut_at_first_error()
        assert {"question": cut.question, "steps": cut.steps, "step_labels": cut.labels} == to_step_view(row)


def test_span_reader_keeps_every_piece_and_where_each_span_sits():
    """Spans are clipped to each piece, as offsets into its text; a tag at a piece's edge marks it but holds no char."""
    span_rows = rows("span_good.jsonl")
    got = FORMATS["span"].to_steps(span_rows[2])  # "12 / 4 = <HAL>4.", "Then 4 + 1 = 5.</HAL>": one span, two pieces
    assert got.steps == span_rows[2]["model_answer"]
    assert (got.labels, got.spans) == ([1, 0, 0, 1], [[], [(9, 11)], [(0, 15)], []])
    got = FORMATS["span"].to_steps(span_rows[3])  # "...of 7.<HAL>", "7 = ... prime.</HAL>": opens at piece 0's end
    assert (got.labels, got.spans) == ([0, 0, 1], [[], [(0, 31)], []])
    got = FORMATS["span"].to_steps(span_rows[0])  # no tag at all
    assert (got.labels, got.spans) == ([1, 1, 1], [[], [], []])


def test_ratings_keep_every_step():
    (first, _) = rows("ratings.jsonl")
    got = FORMATS["processbench"].to_steps(first)
    assert (got.steps, got.labels) == (first["steps"], [1, 1, 0, 1])
    assert got.cut_at_first_error().labels == [1, 1, 0]


@pytest.mark.parametrize(
    "fmt, asset",
    [
        ("step", "step_bad.jsonl"),
        ("span", "span_bad.jsonl"),
        ("math-shepherd", "ms_bad.jsonl"),
        ("processbench", "pb_bad.jsonl"),
    ],
)
def test_a_bad_row_is_a_value_error_with_the_validators_reason(fmt, asset):
    bad = dict(FORMATS[fmt].validate(rows(asset)))
    assert bad
    for index, row in enumerate(rows(asset)):
        if index in bad:
            with pytest.raises(ValueError) as e:
                FORMATS[fmt].to_steps(row)
            assert str(e.value) == bad[index]
        else:
            FORMATS[fmt].to_steps(row)
