"""``data.step_split``: the one table of step rules behind ``generate --step-split`` and ``label mc --step-split``."""

from __future__ import annotations

import pytest

from posttrainlab.data.step_split import GENERATE_STEP_SPLITS, MC_STEP_SPLITS, STEP_SPLITS, check_step_split, cut_steps
from posttrainlab.errors import BadInput


@pytest.mark.parametrize(
    ("text", "how", "steps", "used"),
    [
        ("a\n\n b \n\nc", "lines", ["a", "b", "c"], "lines"),
        ("a\nb\n \nc\n\n\nd", "blank", ["a\nb", "c", "d"], "blank"),
        ("a\nb\n \nc\n\n\nd", "paragraphs", ["a\nb\n \nc", "d"], "paragraphs"),  # a line of spaces is no break
        ("a\nb", "auto", ["a", "b"], "lines"),
        ("a\nb\n\t\nc", "auto", ["a\nb", "c"], "blank"),
        ("  \n\n", "auto", [], "lines"),
    ],
)
def test_cut_steps(text, how, steps, used):
    assert cut_steps(text, how) == (steps, used)


def test_each_rule_joins_with_its_separator_and_each_verb_takes_its_rules():
    assert STEP_SPLITS == {"auto": None, "blank": "\n\n", "lines": "\n", "paragraphs": "\n\n"}
    assert set(GENERATE_STEP_SPLITS) | set(MC_STEP_SPLITS) == set(STEP_SPLITS)
    for how in MC_STEP_SPLITS:  # label mc rejoins a trace's steps: cutting the joined text gives them back
        steps = ["12 + 3 = 15", "15 * 2 = 30", "Answer: 30"]
        assert cut_steps(STEP_SPLITS[how].join(steps), how)[0] == steps
    check_step_split("paragraphs", MC_STEP_SPLITS)
    with pytest.raises(BadInput, match=r"^--step-split 'paragraphs': choose one of auto, blank, lines$"):
        check_step_split("paragraphs", GENERATE_STEP_SPLITS)
    with pytest.raises(BadInput, match="choose one of auto, blank, lines, paragraphs"):
        cut_steps("x", "words")
