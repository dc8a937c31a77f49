"""Test doubles of the SHARP pipeline tests: a policy with a known mix of errors, judge clients.

``MixedPolicy`` stands in for a policy whose solutions are a realistic mix of right and wrong: for
each sample it returns the reference solution or one of arith-v1's controlled corruptions
(``data.arith.corrupt``), chosen by a hash of (seed, question, sample), so tests know the truth and
need no model. ``ProgramClient`` calls the program judge in-process through the ``ChatClient`` role;
``StubClient`` replays scripted replies per solution.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable

from posttrainlab.data.arith.corrupt import CORRUPTIONS, corrupt
from posttrainlab.data.arith.steps import parse_question
from posttrainlab.runners.judge_client import Completion, EndpointError
from posttrainlab.serve.program_judge import ArithProgramJudge


def _rng(*parts: object) -> random.Random:
    return random.Random(int(hashlib.sha256(repr(parts).encode()).hexdigest()[:16], 16))


class MixedPolicy:
    """A SamplingBackend answering arith-v1 questions: the reference solution with probability ``p_right``."""

    def __init__(self, p_right: float = 0.5, seed: int = 0):
        self.p_right, self.seed = p_right, seed
        self.calls: list[dict] = []

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        self.calls.append({"n": n, "temperature": temperature, "top_p": top_p, "prompts": prompts})
        out = []
        for prompt in prompts:
            question = prompt[-1]["content"] if isinstance(prompt, list) else prompt
            problem = parse_question(question)
            texts = []
            for j in range(n):
                rng = _rng(self.seed, question, j)
                if problem is None:
                    texts.append("I cannot solve this.")
                elif rng.random() < self.p_right:
                    texts.append(problem.solution)
                else:
                    kinds = list(CORRUPTIONS)
                    rng.shuffle(kinds)
                    for kind in kinds:
                        try:
                            texts.append(corrupt(problem, kind, rng))
                            break
                        except ValueError:
                            continue
                    else:
                        texts.append(problem.solution)
            out.append(texts)
        return out


class ProgramClient:
    """The ChatClient role over an in-process ``ArithProgramJudge`` (no HTTP)."""

    def __init__(self, judge: ArithProgramJudge | None = None):
        self.judge = judge or ArithProgramJudge()
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, messages, *, temperature: float, max_tokens: int) -> Completion:
        with self._lock:
            self.calls += 1
        return Completion(self.judge.answer(messages), "stop")


class StubClient:
    """Scripted replies: ``script(solution_text, attempt) -> str | Exception``; thread-safe call counts."""

    def __init__(self, script: Callable[[str, int], object]):
        self.script = script
        self.seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, messages, *, temperature: float, max_tokens: int) -> Completion:
        solution = messages[-1]["content"].split("\n\nSolution:\n", 1)[1]
        with self._lock:
            k = self.seen.get(solution, 0)
            self.seen[solution] = k + 1
        reply = self.script(solution, k)
        if isinstance(reply, EndpointError):
            raise reply
        return Completion(reply, "stop")
