"""GRPO rewards from the arith grader: correctness and format as separate, weighted terms; and what every GRPO run
measures exactly about its samples.

TRL calls each reward function with the batch's completions and every dataset column as keyword
arguments (here ``answer``); conversational completions arrive as ``[{"role": "assistant", ...}]``.
A PRM as a reward is ``train.prm_reward``.

**Exact sample metrics** (``exact_sample_metrics``): ``correctness_reward`` also logs, through TRL's ``log_metric``
(averaged over a logging step's generation batches), what arith-v1's exact step labels say about the batch it
grades, so every GRPO run, outcome reward too, shows whether its reward is being hacked (``train.reward_log``):

- ``exact/accuracy``: the share of completions whose final answer is right (the grader);
- ``exact/any_wrong_step``: the share with at least one wrong step: a 0 among the exact every-step labels
  (``data.arith.prm_labels.every_step_labels``, ``missing_answer: explicit``: a solution without an answer line
  gets a ``(no answer)`` step labelled 0); a completion without a line counts as one wrong step. It is the negation
  of ``first_error(...) == -1``, the trace test of ``eval.trace_error.wrong_step`` and RFT's ``filter: process``;
- ``exact/wrong_step_rate``: the share of wrong steps among all the batch's steps (every-step labels: 0 from the
  first wrong line on, an answer line carrying its outcome);
- ``exact/trace_error``: among the completions with a right answer, the share with a wrong step (Uesato et al.
  2022's trace error); not logged for a batch without a right answer.

A prompt that is not an arith-v1 problem (``parse_question`` finds no template) has no exact labels: its batch logs
the accuracy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from posttrainlab.grading.arith import ArithGrader

_GRADER = ArithGrader()


def text_of(message: Any) -> str:
    """The text of a completion or prompt: a conversational one's last message, a plain one as it is."""
    if isinstance(message, list):  # conversational: a list of messages
        return message[-1]["content"] if message else ""
    return str(message)


def correct_answers(texts: Sequence[str], answer: Sequence[Any]) -> list[bool]:
    """Whether each text's final ``Answer:`` line is right (the arith grader)."""
    return [_GRADER.grade(t, a).correct for t, a in zip(texts, answer, strict=True)]


def arith_problems(prompts: Sequence[Any]) -> list | None:
    """Each prompt's arith-v1 problem (``data.arith.steps.parse_question``), or ``None`` when one is no arith-v1
    problem: then the batch has no exact step labels."""
    from posttrainlab.data.arith.steps import parse_question

    problems = [parse_question(text_of(p)) for p in prompts]
    return None if any(p is None for p in problems) else problems


def exact_sample_metrics(prompts: Sequence[Any], texts: Sequence[str], correct: Sequence[bool]) -> dict[str, float]:
    """The module docstring's exact metrics of one batch (``exact/...`` keys); only ``exact/accuracy`` when a prompt
    is not an arith-v1 problem, and no ``exact/trace_error`` without a right answer.

    >>> q = "What is 156 * 7?"
    >>> m = exact_sample_metrics([q, q], ["156 * 7 = 1092\\nAnswer: 1092", "156 * 7 = 1102\\nAnswer: 1092"],
    ...                          [True, True])
    >>> m["exact/any_wrong_step"], m["exact/wrong_step_rate"], m["exact/trace_error"]
    (0.5, 0.25, 0.5)
    """
    from posttrainlab.data.arith.prm_labels import every_step_labels
    from posttrainlab.data.arith.steps import split_steps

    n = len(texts)
    if not n:
        return {}
    out = {"exact/accuracy": sum(map(bool, correct)) / n}
    problems = arith_problems(prompts)
    if problems is None:
        return out
    wrong, steps, any_wrong = 0, 0, []
    for problem, text in zip(problems, texts, strict=True):
        labels = every_step_labels(problem, split_steps(text), "explicit")[1] or [0]  # no line: one wrong step
        wrong += labels.count(0)
        steps += len(labels)
        any_wrong.append(0 in labels)
    out["exact/any_wrong_step"] = sum(any_wrong) / n
    out["exact/wrong_step_rate"] = wrong / steps
    right = [w for w, c in zip(any_wrong, correct, strict=True) if c]
    if right:
        out["exact/trace_error"] = sum(right) / len(right)
    return out


def correctness_reward(completions: list, answer: list, prompts=None, log_metric=None, **_: Any) -> list[float]:
    """1.0 when the final ``Answer:`` line is right, else 0.0; with TRL's ``log_metric`` and ``prompts``, the batch's
    exact metrics are logged too (module docstring).

    >>> correctness_reward([[{"role": "assistant", "content": "2 + 2 = 4\\nAnswer: 4"}]], answer=[4])
    [1.0]
    """
    texts = [text_of(c) for c in completions]
    correct = correct_answers(texts, answer)
    if log_metric is not None and prompts is not None:
        for key, value in exact_sample_metrics(prompts, texts, correct).items():
            log_metric(key, value)
    return [float(c) for c in correct]


def format_reward(completions: list, answer: list, **_: Any) -> list[float]:
    """1.0 when the last line is ``Answer: <integer>``, right or wrong.

    >>> format_reward(["2 + 2 = 5\\nAnswer: 5", "four"], answer=[4, 4])
    [1.0, 0.0]
    """
    return [float(_GRADER.grade(text_of(c), a).well_formatted) for c, a in zip(completions, answer, strict=True)]
