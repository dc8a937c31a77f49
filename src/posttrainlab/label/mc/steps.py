"""Steps and prefixes of a trace, and their exact labels on arith-v1.

A trace is split into steps by ``data.step_split``'s rules (``MC_STEP_SPLITS``: ``lines``, its non-empty lines,
arith-v1's ``split_steps``; ``paragraphs``, blocks between blank lines). Row ``step_idx = i`` (0-based,
``num_steps`` = number of steps) is the prefix of steps ``0..i``; its exact label on arith-v1 is 1 iff
``first_error == -1 or i < first_error`` (``data.arith.steps``). The policy continues a prefix from the prompt
(chat template, assistant turn opened) followed by the prefix steps joined by the step separator with one
separator after the last, and the graded response is prefix + continuation. Written by hand: these are the
card's conventions, which no library fixes for us.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from posttrainlab.data.step_split import STEP_SPLITS, cut_steps

if TYPE_CHECKING:
    from posttrainlab.label.mc.problems import MCProblem


def split_trace(text: str, how: str = "lines") -> list[str]:
    """The steps of a trace: non-empty stripped lines, or blocks between blank lines.

    >>> split_trace("12 + 3 = 15\\n\\nAnswer: 15\\n"), split_trace("a\\nb\\n\\nc", "paragraphs")
    (['12 + 3 = 15', 'Answer: 15'], ['a\\nb', 'c'])
    """
    return cut_steps(text, how)[0]


def prefix_text(steps: Sequence[str], step_idx: int, how: str = "lines") -> str:
    """What the policy continues from: steps ``0..step_idx`` joined, with one separator after the last.

    >>> prefix_text(["12 + 3 = 15", "Answer: 15"], 0)
    '12 + 3 = 15\\n'
    """
    sep = STEP_SPLITS[how]
    return sep.join(steps[: step_idx + 1]) + sep


def exact_first_error(problem: MCProblem, steps: Sequence[str]) -> int | None:
    """``first_error`` of an arith-v1 trace (-1 when all right), or None when the question is not arith-v1."""
    from posttrainlab.data.arith.steps import first_error, parse_question

    parsed = parse_question(problem.question)
    if parsed is None or str(parsed.answer) != str(problem.answer):
        return None
    return first_error(parsed, list(steps))


def exact_labels(first_error: int, num_steps: int) -> list[int]:
    """Exact label per prefix: 1 while every step so far is right.

    >>> exact_labels(1, 3), exact_labels(-1, 2)
    ([1, 0, 0], [1, 1])
    """
    return [1 if first_error == -1 or i < first_error else 0 for i in range(num_steps)]


__all__ = ["exact_first_error", "exact_labels", "prefix_text", "split_trace"]
