"""A program judge for arith-v1: an exact (or deliberately noisy) annotator behind the ``SamplingBackend`` API.

An LLM judge's labels are noisy in unknown ways. For arith-v1 the truth is known (``data.arith.steps``:
every step is a checkable claim), so this judge answers the two judge prompts of posttrainlab exactly,
and ``noise=p`` degrades it by a known amount. Agreement statistics (``eval.agreement``) and PRMs
trained on its labels can then be measured against known label noise.

It reads the problem and the solution out of the prompt (the text after ``Problem:`` and after
``Solution:``, as both prompts lay them out), reads the problem back from the question
(``steps.parse_question``) and checks each non-empty line of the solution (``steps.step_verdicts``):

- **the annotation prompt** (``label.annotate_prompt.build_messages``, recognised by its ``<HAL>`` instruction):
  the solution verbatim with the minimal wrong fragment of every wrong line in ``<HAL>…</HAL>``, or
  ``No hallucinations``. The minimal fragment is the result of a calculation whose operator and
  operands are right (``12 * 4 = <HAL>46</HAL>``), the number of a wrong answer line
  (``Answer: <HAL>46</HAL>``), and the whole line otherwise (other operands, prose, a malformed line).
  A solution whose claims are all true but that lacks the answer line has its last line marked, as
  ``steps.first_error`` labels it;
- **the judge-evaluation prompt** (``runners.judge_client.build_messages``, recognised by its
  ``"hallucination list"`` key): ``{"hallucination list": [...]}`` listing each wrong line whole (a whole
  line is located unambiguously in the response; a bare number might occur earlier).

A prompt of any other kind, or a question that is no arith-v1 problem, gets a one-line refusal that
neither protocol accepts as an answer, so such a row fails instead of being recorded as clean.

**Noise.** With ``noise=p`` each error is, with probability p, missed (no mark) or misplaced (the mark
goes to the nearest correct line, the one before it first), half and half. The draws are a hash of
``(seed, question, the solution's lines, line index)``: the same judge gives the same answer to the
same solution in both prompts and on every call, whatever the batch, thread or request ``seed``.
Sampling arguments (``n`` copies aside) do not change the answer: the judge is deterministic.

Written by hand: no library knows arith-v1's rules; the checks are ``data.arith.steps``'s.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

from posttrainlab.data.arith.steps import ANSWER_LINE, CALC_LINE, parse_question, step_verdicts
from posttrainlab.data.formats.hal import NO_HALLUCINATIONS, Span, insert_hal
from posttrainlab.generation import Prompt
from posttrainlab.label.annotate_prompt import PROMPT_MARKER
from posttrainlab.runners.judge_client import HALLUCINATION_KEY

REFUSAL = "ArithProgramJudge: {why}; no judgement given."
_SECTIONS = re.compile(r"Problem:\n(?P<problem>.*?)\n\nSolution:\n(?P<solution>.*)\Z", re.S)


@dataclass(frozen=True)
class Line:
    """One non-empty line of a solution: its stripped text and where that text sits."""

    start: int
    end: int
    text: str


def solution_lines(solution: str) -> list[Line]:
    """The non-empty lines of ``solution``, stripped, with their offsets (``steps.split_steps`` with positions).

    >>> [(x.start, x.text) for x in solution_lines("1 + 2 = 3\\n\\n  Answer: 3 ")]
    [(0, '1 + 2 = 3'), (13, 'Answer: 3')]
    """
    lines, pos = [], 0
    for raw in solution.splitlines(keepends=True):
        body = raw.rstrip("\r\n")
        stripped = body.strip()
        if stripped:
            start = pos + (len(body) - len(body.lstrip()))
            lines.append(Line(start, start + len(stripped), stripped))
        pos += len(raw)
    return lines


def _unit(*parts: object) -> float:
    """A number in [0, 1) that is a pure function of ``parts``."""
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def minimal_fragment(line: Line, correct_result_only: bool) -> Span:
    """The part of a wrong line to mark: the result or answer number when only it is wrong, else the line."""
    if correct_result_only:
        m = ANSWER_LINE.fullmatch(line.text) or CALC_LINE.fullmatch(line.text)
        if m is not None:
            group = 1 if m.re is ANSWER_LINE else 4
            return line.start + m.start(group), line.start + m.end(group)
    return line.start, line.end


def _result_only_wrong(problem, index: int, text: str) -> bool:
    """True when fixing just the result (or answer) number would make line ``index`` right."""
    if ANSWER_LINE.fullmatch(text):
        return True
    m = CALC_LINE.fullmatch(text)
    if m is None or index >= len(problem.lines()):
        return False
    fixed = f"{m.group(1)} {m.group(2)} {m.group(3)} = {problem.lines()[index].result}"
    return step_verdicts(problem, [""] * index + [fixed])[index]


class ArithProgramJudge:
    """A ``SamplingBackend`` that judges arith-v1 solutions exactly, or with known noise (module docstring)."""

    name = "arith-program-judge"

    def __init__(self, noise: float = 0.0, seed: int = 0):
        if not 0 <= noise <= 1:
            raise ValueError(f"noise={noise}: must be in [0, 1]")
        self.noise = noise
        self.seed = seed

    def generate(
        self,
        prompts: list[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        """``n`` copies of the judgement of each prompt (the judge is deterministic; ``max_new_tokens`` does
        not cut it, since a cut annotation is worthless)."""
        return [[self.answer(p)] * n for p in prompts]

    def answer(self, prompt: Prompt) -> str:
        """The judgement of one prompt (a chat or a string)."""
        text = prompt if isinstance(prompt, str) else "\n".join(m.get("content") or "" for m in prompt)
        if PROMPT_MARKER in text:
            kind = "annotate"
        elif f'"{HALLUCINATION_KEY}"' in text:
            kind = "list"
        else:
            return REFUSAL.format(why="not a posttrainlab annotation or judge prompt")
        m = _SECTIONS.search(text)
        if m is None:
            return REFUSAL.format(why="no 'Problem:' and 'Solution:' sections in the prompt")
        problem = parse_question(m.group("problem"))
        if problem is None:
            return REFUSAL.format(why="the problem is not an arith-v1 question")
        solution = m.group("solution")
        lines = solution_lines(solution)
        marks = self.marks(problem, lines, whole_lines=kind == "list")
        if kind == "list":
            return json.dumps({HALLUCINATION_KEY: [solution[s:e] for s, e in marks]})
        return insert_hal(solution, marks) if marks else NO_HALLUCINATIONS

    def wrong_lines(self, problem, lines: list[Line]) -> list[int]:
        """Indices of the lines the exact judge marks (``steps.step_verdicts``, plus a missing answer line)."""
        texts = [x.text for x in lines]
        verdicts = step_verdicts(problem, texts)
        wrong = [i for i, ok in enumerate(verdicts) if not ok]
        if not wrong and texts and not ANSWER_LINE.fullmatch(texts[-1]):
            wrong = [len(texts) - 1]  # all claims true but no answer line: steps.first_error's last step
        return wrong

    def marks(self, problem, lines: list[Line], *, whole_lines: bool = False) -> list[Span]:
        """The spans to mark in the solution, after noise (sorted, no overlaps)."""
        wrong = self.wrong_lines(problem, lines)
        texts = tuple(x.text for x in lines)
        true_claims = step_verdicts(problem, list(texts))  # True on a wrong line only for a missing answer line
        chosen: dict[int, bool] = {}  # line index -> mark only the minimal fragment
        for i in wrong:
            target = i
            if self.noise and _unit(self.seed, problem.question, texts, i, "noise") < self.noise:
                if _unit(self.seed, problem.question, texts, i, "how") < 0.5:
                    continue  # missed
                target = self._nearest_correct(i, wrong, len(lines))
                if target is None:
                    continue  # nowhere to misplace it: missed
            fragment = not whole_lines and (
                target != i or (not true_claims[i] and _result_only_wrong(problem, i, lines[i].text))
            )
            chosen[target] = chosen.get(target, True) and fragment
        spans = []
        for i in sorted(chosen):
            line = lines[i]
            if whole_lines or not chosen[i]:
                spans.append((line.start, line.end))
            else:
                spans.append(minimal_fragment(line, True))
        return spans

    @staticmethod
    def _nearest_correct(i: int, wrong: list[int], n: int) -> int | None:
        """The nearest line that is not wrong, looking before ``i`` first."""
        bad = set(wrong)
        for d in range(1, n):
            for j in (i - d, i + d):
                if 0 <= j < n and j not in bad:
                    return j
        return None


__all__ = ["ArithProgramJudge", "solution_lines"]
