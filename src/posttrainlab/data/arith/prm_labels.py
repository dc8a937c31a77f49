"""arith-prm's labelling options: which steps carry a label, and what a missing answer line becomes.

``step_verdicts`` (``steps.py``) checks each line of a solution on its own. This module turns the verdicts
into step labels in one of two modes (``ArithPRMOptions.labels``):

- ``first-error`` (the default; the step view, SHARP's cut): 1 up to the first wrong line, which gets the
  only 0; the lines after it are dropped. A PRM trained on it never sees a line after an error, so it has
  no reason to score an ``Answer:`` line that follows a wrong step low.
- ``every-step``: every line is labelled: 1 until the first wrong line, 0 from it on, except an answer line
  (``Answer: N`` in the grader's required form), which carries the outcome: 1 when N is the answer, 0
  otherwise, wherever it stands (a right answer reached through a wrong step keeps its 1 there; a wrong
  answer line is itself an error, and the lines after it get 0).

A solution that does not end with an answer line in the required form (``ArithPRMOptions.missing_answer``):

- ``last-step`` (the default): its last line is labelled 0 even when its claim is right. A correct final
  calculation then carries a 0 here and a 1 in a solution that goes on to the answer: identical prefixes
  with both labels.
- ``explicit``: one more step, ``NO_ANSWER_STEP``, is appended and labelled 0; every line keeps its own
  label. A PRM trained on such rows records the step in its ``prm_config.json`` (``no_answer_step``), and
  best-of-N and beam search append it (``with_no_answer_step``) to every finished solution they score that
  does not end with an answer line, so the PRM is asked about the missing answer as it was trained.

``first-error`` labels are the ``every-step`` labels cut after their first 0 (``cut_at_first_error``); with
``last-step`` they equal ``steps.step_labels`` (a test checks it on every solution shape).

Written by hand: the rules are arith-v1's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from posttrainlab.data.arith.problems import Problem
from posttrainlab.data.arith.splits import SPLITS
from posttrainlab.data.arith.steps import ANSWER_LINE, step_verdicts
from posttrainlab.data.formats.step import cut_at_first_error
from posttrainlab.errors import BadInput

LABEL_MODES = ("first-error", "every-step")
MISSING_ANSWER = ("last-step", "explicit")
#: The step that stands for "the solution ended without an answer line" (``missing_answer: explicit``).
NO_ANSWER_STEP = "(no answer)"
#: arith-v1 splits that results are reported or tuned on (config ``eval``) and those derived from them
#: (``preference_test``): hard negatives never come from these.
EVAL_POOLS = tuple(
    s.name for s in SPLITS if s.config == "eval" or any(src in {t.name for t in SPLITS if t.config == "eval"}
                                                         for src in s.sources)
)  # fmt: skip


def ends_with_answer(steps: Sequence[str]) -> bool:
    """Whether the last step is an answer line in the grader's required form.

    >>> ends_with_answer(["2 + 3 = 5", "Answer: 5"]), ends_with_answer(["2 + 3 = 5"]), ends_with_answer([])
    (True, False, False)
    """
    return bool(steps) and ANSWER_LINE.fullmatch(steps[-1]) is not None


def with_no_answer_step(steps: Sequence[str], marker: str = NO_ANSWER_STEP) -> list[str]:
    """``steps``, with ``marker`` appended when they do not end with an answer line (no steps, or ``marker``
    empty: unchanged).

    >>> with_no_answer_step(["2 + 3 = 5"]), with_no_answer_step(["Answer: 5"]), with_no_answer_step(["x"], "")
    (['2 + 3 = 5', '(no answer)'], ['Answer: 5'], ['x'])
    """
    steps = list(steps)
    if marker and steps and not ends_with_answer(steps):
        steps.append(marker)
    return steps


def every_step_labels(
    problem: Problem, steps: Sequence[str], missing_answer: str = "last-step"
) -> tuple[list[str], list[int]]:
    """Every line labelled (module docstring), and ``NO_ANSWER_STEP`` with its 0 under ``explicit``.

    >>> from posttrainlab.data.arith.steps import parse_question
    >>> p = parse_question("What is 351 - 148 + 56?")
    >>> every_step_labels(p, ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"])[1]
    [1, 0, 0]
    >>> every_step_labels(p, ["351 - 148 = 204", "204 + 56 = 260", "Answer: 259"])[1]   # right answer, wrong steps
    [0, 0, 1]
    >>> every_step_labels(p, ["351 - 148 = 203", "203 + 56 = 259"], "explicit")
    (['351 - 148 = 203', '203 + 56 = 259', '(no answer)'], [1, 1, 0])
    """
    return labels_from_verdicts(steps, step_verdicts(problem, steps), missing_answer)


def labels_from_verdicts(
    steps: Sequence[str], ok: Sequence[bool], missing_answer: str = "last-step"
) -> tuple[list[str], list[int]]:
    """The every-step rule on per-line verdicts ``ok`` (the program's, or a judge's: ``study.quality``).

    >>> labels_from_verdicts(["3 + 4 = 8", "8 * 2 = 16", "Answer: 14"], [False, False, True])
    (['3 + 4 = 8', '8 * 2 = 16', 'Answer: 14'], [0, 0, 1])
    >>> labels_from_verdicts(["3 + 4 = 7", "7 * 2 = 14"], [True, True])[1]      # no answer line: its last line 0
    [1, 0]
    """
    if missing_answer not in MISSING_ANSWER:
        raise ValueError(f"missing_answer {missing_answer!r}: choose one of {', '.join(MISSING_ANSWER)}")
    steps = list(steps)
    if len(steps) != len(ok):
        raise ValueError(f"{len(steps)} steps but {len(ok)} verdicts")
    labels: list[int] = []
    wrong = False
    for step, good in zip(steps, ok, strict=True):
        is_answer = ANSWER_LINE.fullmatch(step) is not None
        labels.append(int(good) if is_answer else int(good and not wrong))
        wrong = wrong or not good
    if steps and not ends_with_answer(steps):
        if missing_answer == "explicit":
            steps.append(NO_ANSWER_STEP)
            labels.append(0)
        else:
            labels[-1] = 0
    return steps, labels


def label_steps(
    problem: Problem, steps: Sequence[str], labels: str = "first-error", missing_answer: str = "last-step"
) -> tuple[list[str], list[int]]:
    """The labelled steps of a solution in mode ``labels`` (``first-error`` = ``every-step`` cut after its first 0).

    >>> from posttrainlab.data.arith.steps import parse_question
    >>> p = parse_question("What is 351 - 148 + 56?")
    >>> label_steps(p, ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"])
    (['351 - 148 = 203', '203 + 56 = 260'], [1, 0])
    """
    if labels not in LABEL_MODES:
        raise ValueError(f"labels {labels!r}: choose one of {', '.join(LABEL_MODES)}")
    every = every_step_labels(problem, steps, missing_answer)
    return every if labels == "every-step" else cut_at_first_error(*every)


@dataclass
class ArithPRMOptions:
    """How arith-prm labels its rows and which hard negatives its ``train`` split gets (docs/prm-eval.md).

    The defaults are the original build: first-error labels, a missing answer on the last step, no hard negatives.
    """

    labels: str = "first-error"  # first-error (the step view) | every-step (Math-Shepherd view: every line)
    missing_answer: str = "last-step"  # last-step (0 on the last line) | explicit (a "(no answer)" step, 0)
    # arith-v1 splits whose problems give exact-labelled near-miss negatives (and their reference) to train;
    # never an evaluation pool (test, dev, validation, preference_test) nor a held-out prompt split
    hard_negatives: list[str] = field(default_factory=list)
    hard_negative_limit: int | None = None  # first N records of each hard-negative split
    hard_negatives_per_problem: int = 2  # near-miss solutions per problem (distinct kinds where possible)

    def check(self, heldout_prompts: Sequence[str] = ()) -> ArithPRMOptions:
        """``BadInput`` naming the field for an unknown mode, a count below 1, or a hard-negative split that is an
        evaluation pool (``EVAL_POOLS``) or one of the held-out prompt splits."""
        pools = sorted(set(self.hard_negatives) & {*EVAL_POOLS, *heldout_prompts})
        if pools:
            raise BadInput(
                f"hard_negatives {', '.join(pools)}: an evaluation pool; take hard negatives from problems outside "
                f"every one ({', '.join(EVAL_POOLS)} and the held-out prompts), e.g. sft_extra or rl_extra"
            )
        if self.labels not in LABEL_MODES:
            raise BadInput(f"labels {self.labels!r}: choose one of {', '.join(LABEL_MODES)}")
        if self.missing_answer not in MISSING_ANSWER:
            raise BadInput(f"missing_answer {self.missing_answer!r}: choose one of {', '.join(MISSING_ANSWER)}")
        if self.hard_negative_limit is not None and self.hard_negative_limit < 1:
            raise BadInput(f"hard_negative_limit={self.hard_negative_limit}: must be at least 1")
        if self.hard_negatives_per_problem < 1:
            raise BadInput(f"hard_negatives_per_problem={self.hard_negatives_per_problem}: must be at least 1")
        return self


__all__ = [
    "LABEL_MODES",
    "EVAL_POOLS",
    "MISSING_ANSWER",
    "NO_ANSWER_STEP",
    "ArithPRMOptions",
    "ends_with_answer",
    "every_step_labels",
    "labels_from_verdicts",
    "label_steps",
    "with_no_answer_step",
]
