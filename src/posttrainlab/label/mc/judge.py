"""LLM-judge relabel pass for Monte-Carlo labelling: a second opinion on each continuation's correctness.

The Polaris MC card grades continuations with math_verify and then relabels them with an LLM judge;
V comes from the relabelled grades. A rule-based grader misses answers written in an unexpected form
(``missing_answer``/``malformed``/``timeout``), which a judge can still read. Written by hand: the
prompt is ours (the card does not publish one), so its version and hash go into the run's config and
summary, and runs with different prompts are never mixed in one work folder.

How it runs (:class:`Relabeler`):

- the judge is any ``SamplingBackend`` (in practice ``OpenAIBackend`` on an OpenAI-compatible endpoint,
  whose retries handle transient HTTP faults); each *distinct* response of a problem is asked once;
- ``mode="all"`` asks about every response; ``mode="unparsed"`` only about those the grader could not
  read (outcome ``missing_answer``, ``malformed`` or ``timeout``), keeping the grader's verdict elsewhere;
- the verdict is the last standalone ``yes``/``no`` of the answer after any ``<think>…</think>``; an
  answer without one is asked again (temperature 0.4, new seed) up to ``retries`` times, and if it
  stays invalid the raw grade stands and the item is counted in ``invalid`` (never silently "no");
- an endpoint that keeps failing raises ``EndpointError``: the problem is not recorded, and a resumed
  run asks again.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from posttrainlab.grading import Grade

VERSION = "posttrainlab-mc-relabel-v1"
TEMPLATE = (
    "You are grading the final answer of a solution to a math problem.\n"
    "\n"
    "Problem:\n"
    "<<QUESTION>>\n"
    "\n"
    "Reference answer: <<ANSWER>>\n"
    "\n"
    "Solution:\n"
    "<<RESPONSE>>\n"
    "\n"
    "Does the solution end with a final answer equal to the reference answer? Answer with one word: yes or no."
)
SHA256 = hashlib.sha256(TEMPLATE.encode()).hexdigest()
MODES = ("all", "unparsed")
UNPARSED = frozenset({"missing_answer", "malformed", "timeout"})

_THINK = re.compile(r"<think>.*?</think>", re.S)
_VERDICT = re.compile(r"\b(yes|no)\b", re.I)


def judge_messages(question: str, answer: object, response: str) -> list[dict[str, str]]:
    """The judge request: one user message (no system message: some chat templates refuse one)."""
    text = TEMPLATE.replace("<<QUESTION>>", question).replace("<<ANSWER>>", str(answer))
    return [{"role": "user", "content": text.replace("<<RESPONSE>>", response)}]


def parse_verdict(text: str | None) -> bool | None:
    """True for yes, False for no, None when the answer holds neither (the last one wins).

    >>> parse_verdict("Yes."), parse_verdict("<think>yes? no...</think>\\nNo"), parse_verdict("maybe")
    (True, False, None)
    """
    if not text:
        return None
    body = _THINK.sub("", text)
    if "</think>" in body:
        body = body.rsplit("</think>", 1)[1]
    found = _VERDICT.findall(body)
    return found[-1].lower() == "yes" if found else None


@dataclass
class RelabelStats:
    """Requests sent, items judged, answers without a verdict (raw grade kept), verdicts that differ from the grader."""

    requests: int = 0
    judged: int = 0
    invalid: int = 0
    flipped: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.requests, "judged": self.judged, "invalid": self.invalid, "flipped": self.flipped}


class Relabeler:
    """Ask a judge backend whether each response's final answer is right (module docstring)."""

    def __init__(self, backend, *, mode: str = "all", max_tokens: int = 16, retries: int = 3, seed: int = 0):
        from posttrainlab.errors import BadInput

        if mode not in MODES:
            raise BadInput(f"relabel mode {mode!r}: choose one of {', '.join(MODES)}")
        self.backend, self.mode, self.max_tokens, self.retries, self.seed = backend, mode, max_tokens, retries, seed
        self.stats = RelabelStats()

    def config(self) -> dict[str, object]:
        """What decides the verdicts (goes into the run's config, so a resumed run uses the same judge)."""
        model = getattr(self.backend, "model", None)
        return {
            "model": model if isinstance(model, str) else type(self.backend).__name__,
            "mode": self.mode,
            "prompt_version": VERSION,
            "prompt_sha256": SHA256,
            "max_tokens": self.max_tokens,
        }

    def wanted(self, grade: Grade) -> bool:
        return self.mode == "all" or grade.outcome in UNPARSED

    def relabel(self, question: str, answer: object, responses: Sequence[str], grades: Sequence[Grade]) -> list[bool]:
        """Final correctness per response: the judge's verdict where asked and valid, else the grade's."""
        todo = sorted({r for r, g in zip(responses, grades, strict=True) if self.wanted(g)})
        verdicts: dict[str, bool | None] = dict.fromkeys(todo)
        pending = list(todo)
        for attempt in range(self.retries + 1):
            if not pending:
                break
            temperature = 0.0 if attempt == 0 else 0.4
            answers = self.backend.generate(
                [judge_messages(question, answer, r) for r in pending],
                n=1,
                temperature=temperature,
                max_new_tokens=self.max_tokens,
                seed=self.seed + attempt,
            )
            self.stats.requests += len(pending)
            for response, out in zip(pending, answers, strict=True):
                verdicts[response] = parse_verdict(out[0] if out else None)
            pending = [r for r in pending if verdicts[r] is None]
        self.stats.judged += len(todo)
        self.stats.invalid += len(pending)
        final = []
        for response, grade in zip(responses, grades, strict=True):
            verdict = verdicts.get(response)
            if verdict is None:
                final.append(grade.correct)
                continue
            final.append(verdict)
        self.stats.flipped += sum(
            verdicts[r] is not None and verdicts[r] != g.correct
            for r, g in zip(responses, grades, strict=True)
            if r in verdicts
        )
        return final


__all__ = ["MODES", "Relabeler", "RelabelStats", "SHA256", "VERSION", "judge_messages", "parse_verdict"]
