"""GRPO rewards from the arith grader: correctness and format as separate, weighted terms.

TRL calls each reward function with the batch's completions and every dataset column as keyword
arguments (here ``answer``); conversational completions arrive as ``[{"role": "assistant", ...}]``.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.grading.arith import ArithGrader

_GRADER = ArithGrader()


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: a list of messages
        return completion[-1]["content"] if completion else ""
    return str(completion)


def correctness_reward(completions: list, answer: list, **_: Any) -> list[float]:
    """1.0 when the final ``Answer:`` line is right, else 0.0.

    >>> correctness_reward([[{"role": "assistant", "content": "2 + 2 = 4\\nAnswer: 4"}]], answer=[4])
    [1.0]
    """
    return [float(_GRADER.grade(_text(c), a).correct) for c, a in zip(completions, answer, strict=True)]


def format_reward(completions: list, answer: list, **_: Any) -> list[float]:
    """1.0 when the last line is ``Answer: <integer>``, right or wrong.

    >>> format_reward(["2 + 2 = 5\\nAnswer: 5", "four"], answer=[4, 4])
    [1.0, 0.0]
    """
    return [float(_GRADER.grade(_text(c), a).well_formatted) for c, a in zip(completions, answer, strict=True)]
