"""A scripted arith-v1 policy with known error rates: a model-free stand-in for tests and benchmarks.

Monte-Carlo labels can only be checked against the truth with a policy whose mistakes are known, and the
tiny arith policy of the quickstart gets almost every first step wrong (so its MC and exact labels
agree trivially). ``ScriptedArithPolicy`` is a ``SamplingBackend`` and ``PrefixSampler`` that continues
an arith-v1 prefix the way a sloppy solver would, with seeded randomness:

- with probability ``p_recover`` it ignores the prefix and writes the rest of the reference solution
  and the right answer (a wrong prefix can still end right: Math-Shepherd's false positives);
- otherwise it carries on from the prefix's last result (a wrong intermediate result stays wrong),
  computing each remaining step of the problem's program, whose result is off by 1-9 with probability
  ``p_error``, and ends with ``Answer: <last result>``.

A question that is not arith-v1 gets ``Answer: 0``. Each request draws from ``random.Random(seed)``,
so the same request gives the same continuations whatever else is in the call. Written by hand: it
exists to be simple and exactly known, not to be a model.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from posttrainlab.data.arith.problems import OPERATIONS
from posttrainlab.data.arith.steps import CALC_LINE
from posttrainlab.data.problems import prompt_text
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed


class ScriptedArithPolicy:
    """A seeded arith-v1 solver with per-step error rate ``p_error`` and recovery rate ``p_recover``."""

    name = "scripted-arith"

    def __init__(self, p_error: float = 0.2, p_recover: float = 0.05):
        self.p_error, self.p_recover = p_error, p_recover
        self.calls = 0
        self.requests = 0

    def continue_one(self, prompt: Prompt, prefix: str, rng: random.Random) -> str:
        from posttrainlab.data.arith.problems import PREV
        from posttrainlab.data.arith.steps import parse_question, split_steps

        problem = parse_question(prompt_text(prompt) or "")
        if problem is None:
            return "Answer: 0"
        done = split_steps(prefix)
        reference = problem.lines()
        k = len(done)
        if rng.random() < self.p_recover:
            lines = [line.render() for line in reference[k:]]
            return "\n".join([*lines, f"Answer: {problem.answer}"])
        running = None
        for step in done:
            m = CALC_LINE.fullmatch(step)
            if m:
                running = int(m.group(4))
        lines = []
        for j in range(k, len(reference)):
            op, a, b = problem.program[j]
            left = running if a == PREV and running is not None else reference[j].left
            right = running if b == PREV and running is not None else reference[j].right
            result = OPERATIONS[op](left, right)
            if rng.random() < self.p_error:
                result += rng.choice([-1, 1]) * rng.randint(1, 9)
            lines.append(f"{left} {op} {right} = {result}")
            running = result
        if running is None:
            running = reference[-1].result
        return "\n".join([*lines, f"Answer: {running}"])

    def sample_continuations(
        self,
        requests: Sequence[PrefixRequest],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        self.calls += 1
        self.requests += len(requests)
        out = []
        for r in requests:
            rng = random.Random(r.seed)
            first = [truncate_at_stop(self.continue_one(r.prompt, r.prefix, rng), stop)]
            out.append(
                first * n
                if temperature == 0
                else first + [truncate_at_stop(self.continue_one(r.prompt, r.prefix, rng), stop) for _ in range(n - 1)]
            )
        return out

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
        requests = [PrefixRequest(p, "", derive_seed(seed, i)) for i, p in enumerate(prompts)]
        return self.sample_continuations(requests, n=n, temperature=temperature, stop=stop)


__all__ = ["ScriptedArithPolicy"]
