"""The arith-v1 program judge (serve/program_judge.py): exact marks, both prompts, known noise."""

from __future__ import annotations

import random

import pytest

from posttrainlab.data.arith.corrupt import CORRUPTIONS, corrupt
from posttrainlab.data.arith.problems import CATEGORIES, draw
from posttrainlab.data.arith.steps import first_error, parse_question, split_steps
from posttrainlab.data.formats.sharp import span_piece_labels
from posttrainlab.eval.agreement import cohen_kappa
from posttrainlab.generation import SamplingBackend
from posttrainlab.label.annotate import build_messages, solution_text
from posttrainlab.label.repair import annotation_pieces, verify
from posttrainlab.runners.judge_client import build_messages as judge_messages
from posttrainlab.runners.judge_client import parse_hallucination_list
from posttrainlab.serve.program_judge import REFUSAL, ArithProgramJudge

Q = (
    "Finley packs 12 boxes with 23 cookies in each box and has 6 cookies left over. "
    "How many cookies does Finley have in total?"
)


def annotate(judge, question, steps):
    (answer,) = judge.generate([build_messages(question, steps)])[0]
    return answer


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (["12 * 23 = 276", "276 + 6 = 282", "Answer: 282"], "No hallucinations"),
        (
            ["12 * 23 = 276", "276 + 6 = 283", "Answer: 283"],
            "12 * 23 = 276\n\n276 + 6 = <HAL>283</HAL>\n\nAnswer: <HAL>283</HAL>",
        ),
        (["12 + 6 = 18", "Answer: 282"], "<HAL>12 + 6 = 18</HAL>\n\nAnswer: 282"),
        (["12 * 23 = 276", "276 + 6 = 282"], "12 * 23 = 276\n\n<HAL>276 + 6 = 282</HAL>"),  # no answer line
        (["Let me think.", "Answer: 282"], "<HAL>Let me think.</HAL>\n\nAnswer: 282"),
    ],
)
def test_annotation_prompt_marks_minimal_fragments(steps, expected):
    judge = ArithProgramJudge()
    assert isinstance(judge, SamplingBackend)
    answer = annotate(judge, Q, steps)
    assert answer == expected
    assert verify(answer, solution_text(steps)).how in ("exact", "literal")


def test_judge_prompt_lists_wrong_lines_whole():
    judge = ArithProgramJudge()
    (answer,) = judge.generate([judge_messages(Q, ["12 * 23 = 276", "276 + 6 = 283", "Answer: 283"])])[0]
    assert parse_hallucination_list(answer) == ["276 + 6 = 283", "Answer: 283"]
    (answer,) = judge.generate([judge_messages(Q, ["12 * 23 = 276", "276 + 6 = 282", "Answer: 282"])])[0]
    assert parse_hallucination_list(answer) == []


def test_other_prompts_get_a_refusal_that_no_protocol_accepts():
    judge = ArithProgramJudge()
    for prompt in (
        build_messages("What is the capital of France?", ["Paris"]),
        "hello",
        [{"role": "user", "content": "hi"}],
    ):
        (answer,) = judge.generate([prompt], n=1)[0]
        assert answer.startswith(REFUSAL.split("{")[0])
        assert not verify(answer, "Paris").ok
    assert judge.generate([build_messages(Q, ["x"])], n=3)[0] == [annotate(judge, Q, ["x"])] * 3


def _solutions(n_per_category: int = 12, seed: int = 5):
    rng, taken = random.Random(seed), set()
    out = []
    for c in CATEGORIES:
        for _ in range(n_per_category):
            p = draw(c, rng, taken)
            out.append((p, split_steps(p.solution)))
            for kind in CORRUPTIONS:
                out.append((p, split_steps(corrupt(p, kind, rng))))
    return out


def _step_labels(judge, problem, steps):
    """Per-step labels (whole solution) from the judge's annotation, through the span view's rules."""
    answer = annotate(judge, problem.prompt, steps)
    v = verify(answer, solution_text(steps))
    assert v.ok, answer
    row = {"model_answer": steps, "hallucination_annotation": annotation_pieces(steps, v.spans)}
    return span_piece_labels(row)[0]


def test_exact_judge_agrees_with_the_exact_first_error():
    judge = ArithProgramJudge()
    for problem, steps in _solutions(6):
        labels = _step_labels(judge, problem, steps)
        first = labels.index(0) if 0 in labels else -1
        assert first == first_error(problem, steps), steps


def test_noise_is_deterministic_and_kappa_falls_as_it_rises():
    solutions = _solutions()
    exact = ArithProgramJudge()
    truth = [lab for p, s in solutions for lab in _step_labels(exact, p, s)]
    kappas = []
    for noise in (0.0, 0.2, 0.5, 1.0):
        judge = ArithProgramJudge(noise=noise, seed=3)
        got = [lab for p, s in solutions for lab in _step_labels(judge, p, s)]
        again = [lab for p, s in solutions for lab in _step_labels(ArithProgramJudge(noise=noise, seed=3), p, s)]
        assert got == again
        kappas.append(cohen_kappa(truth, got))
    assert kappas[0] == 1.0
    assert kappas[0] > kappas[1] > kappas[2] > kappas[3]
    assert kappas[3] < 0.2


def test_the_same_solution_gets_the_same_noise_in_both_prompts():
    judge = ArithProgramJudge(noise=0.5, seed=1)
    for problem, steps in _solutions(3):
        marked = annotate(judge, problem.prompt, steps)
        (listed,) = judge.generate([judge_messages(problem.prompt, steps)])[0]
        lines_with_tags = {i for i, piece in enumerate(marked.split("\n\n")) if "<HAL>" in piece}
        listed_lines = {steps.index(s) for s in parse_hallucination_list(listed)}
        assert lines_with_tags == listed_lines


def test_parse_question_reads_the_prompt_problem():
    problem = parse_question(Q)
    assert problem is not None and problem.answer == 282
