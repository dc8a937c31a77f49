"""Asking an LLM judge behind an OpenAI-compatible endpoint for its "hallucination list".

The Math-Shepherd-614 card (seed 001) asks the model for JSON ``{"hallucination list": [copied spans]}``
about a problem and its solution (the steps joined with one newline), retries a malformed answer up to
three times (temperature 0 first, 0.4 after), and **aborts** on an answer that stays invalid: scoring it
as "no hallucination" would silently credit every broken answer on a correct solution and debit it on
a wrong one. The card does not publish its prompt; :data:`PROMPT_TEMPLATE` is ours, and its version
and hash go into every metric file so runs with different prompts are never averaged unknowingly.

Two kinds of fault, kept apart because they mean different things:

- an **invalid answer** (the request worked, the text does not hold a valid list: prose without JSON,
  a wrong key, an empty message, an empty or non-JSON HTTP body): the model's fault, asked again at
  temperature 0.4 (the project's own retries, the card's rule), then reported in
  :attr:`JudgeAnswer.error` for the caller to abort or record;
- an **endpoint fault** (connection refused, timeout, HTTP 408/409/429/5xx): retried at the same
  temperature by the ``openai`` client (:class:`~posttrainlab.generation.endpoint.Endpoint`: its
  backoff, honouring ``Retry-After``), then :class:`EndpointError`. Any other HTTP status (a wrong
  model name, a prompt beyond the context) is not retried. An endpoint fault never becomes a recorded
  row: an outage would otherwise be scored as hundreds of model failures.

The endpoint is any OpenAI-compatible server (vLLM, ``posttrain serve``, a hosted API). A
:class:`ChatClient` that does not retry by itself (a test double, a custom transport) may raise a
transient ``EndpointError`` with ``retries=0``: :func:`ask_judge` then retries it with the
:class:`RetryPolicy`'s backoff, up to the same ``http_retries`` in all.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from posttrainlab.errors import EndpointError
from posttrainlab.generation.endpoint import Endpoint, MalformedReply

HALLUCINATION_KEY = "hallucination list"
#: the end of every judge prompt (this one, ``label.annotate_prompt``'s): the problem and the solution
PROBLEM_AND_SOLUTION = "\nProblem:\n<<PROBLEM>>\n\nSolution:\n<<SOLUTION>>"
PROMPT_VERSION = "posttrainlab-judge-v1"
PROMPT_TEMPLATE = (
    "You are checking a step-by-step solution to a math problem for errors.\n"
    "Copy, word for word, every part of the solution that is wrong (a wrong calculation, a wrong fact, "
    "a wrong deduction or a wrong final answer). Copy the text exactly as it appears in the solution; "
    "do not rewrite or explain it.\n"
    'Answer with JSON only, in this form: {"hallucination list": ["<copied text>", ...]}\n'
    'If the solution has no error, answer: {"hallucination list": []}\n' + PROBLEM_AND_SOLUTION
)
PROMPT_SHA256 = hashlib.sha256(PROMPT_TEMPLATE.encode()).hexdigest()
# How much of a rejected answer is kept in the run file for diagnosis.
REJECTED_TEXT_CHARS = 1000


class InvalidAnswer(ValueError):
    """The model's text does not hold a valid ``{"hallucination list": [str, ...]}``; the message says why."""


def build_messages(problem: str, steps: Sequence[str]) -> list[dict[str, str]]:
    """The chat request: one user message with the problem and the steps joined by a single newline.

    One user message and no system message, because some chat templates refuse a system role.

    >>> m = build_messages("1+1?", ["Step 1: 1+1=3", "Step 2: The answer is: 3"])
    >>> m[0]["content"].split("Problem:\\n")[1]
    '1+1?\\n\\nSolution:\\nStep 1: 1+1=3\\nStep 2: The answer is: 3'
    """
    return judge_request(PROMPT_TEMPLATE, problem, "\n".join(steps))


def judge_request(template: str, problem: str, solution: str) -> list[dict[str, str]]:
    """``template`` (ending in ``PROBLEM_AND_SOLUTION``) with the problem and the solution filled in, as the one user
    message of a judge request."""
    return [{"role": "user", "content": template.replace("<<PROBLEM>>", problem).replace("<<SOLUTION>>", solution)}]


_THINK = re.compile(r"<think>.*?</think>", re.S)


def _json_objects(text: str) -> list[Any]:
    """Every top-level JSON value that starts at a ``{`` in ``text``, in order (prose and fences skipped)."""
    decoder = json.JSONDecoder()
    found, i = [], text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        found.append(value)
        i = text.find("{", end)
    return found


def parse_hallucination_list(text: str | None) -> list[str]:
    """The span list of a judge's answer, read leniently; :class:`InvalidAnswer` when there is none.

    The JSON object may sit inside prose or a code fence, after a ``<think>…</think>`` block; the key must
    be exactly ``"hallucination list"`` and its value a list of strings. When several objects hold the
    key the last wins (a reasoning model's final answer follows its drafts).

    >>> parse_hallucination_list('Sure.\\n```json\\n{"hallucination list": ["2 * 7 = 12"]}\\n```')
    ['2 * 7 = 12']
    >>> parse_hallucination_list('{"hallucination list": []}')
    []
    >>> parse_hallucination_list('{"hallucination_list": []}')
    Traceback (most recent call last):
    ...
    posttrainlab.runners.judge_client.InvalidAnswer: no "hallucination list" key (found keys: hallucination_list)
    """
    if text is None or not text.strip():
        raise InvalidAnswer("empty answer")
    body = _THINK.sub("", text)
    if "</think>" in body:  # an opening tag the template put in the prompt: keep what follows the close
        body = body.rsplit("</think>", 1)[1]
    objects = _json_objects(body)
    holding = [o for o in objects if isinstance(o, dict) and HALLUCINATION_KEY in o]
    if not holding:
        keys = sorted({k for o in objects if isinstance(o, dict) for k in o})
        if keys:
            raise InvalidAnswer(f'no "{HALLUCINATION_KEY}" key (found keys: {", ".join(keys)[:120]})')
        raise InvalidAnswer("no JSON object in the answer")
    value = holding[-1][HALLUCINATION_KEY]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise InvalidAnswer(f'"{HALLUCINATION_KEY}" is not a list of strings: {json.dumps(value)[:120]}')
    return value


@dataclass(frozen=True)
class Completion:
    """One reply: its text (``None`` when there was none) and why there was none, or how it finished.

    ``retries``: the endpoint faults the client retried by itself before this reply came.
    """

    text: str | None
    finish_reason: str | None = None
    problem: str | None = None  # set when the reply held no text: "HTTP 200 with an empty body", ...
    retries: int = 0


class ChatClient(Protocol):
    """The judge endpoint role: one chat request -> :class:`Completion`.

    Raise ``EndpointError(transient=True)`` for a fault worth retrying, ``EndpointError`` for one that is not;
    a client that retried the fault itself says how often in ``EndpointError.retries``.
    """

    def __call__(self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int) -> Completion: ...


class OpenAIChatClient:
    """:class:`ChatClient` over the ``openai`` client, which retries endpoint faults ``max_retries`` times."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str = "EMPTY", timeout_s: float = 600.0, max_retries: int = 2
    ):
        self.base_url, self.model, self.timeout_s = base_url, model, timeout_s
        self.endpoint = Endpoint(base_url, model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)

    def __call__(self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int) -> Completion:
        try:
            reply, retries = self.endpoint.create(
                "chat", messages=messages, temperature=temperature, max_tokens=max_tokens
            )
        except MalformedReply as e:  # the server answered, but not with a completion: an invalid answer
            return Completion(None, problem=f"HTTP 200 with {e.what}", retries=e.retries)
        choices = getattr(reply, "choices", None)
        if not choices:
            return Completion(None, problem="HTTP 200 with no choices", retries=retries)
        message = choices[0].message
        return Completion(getattr(message, "content", None), choices[0].finish_reason, retries=retries)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. ``answer_retries``: extra requests after an invalid answer (the card's 3, so at
    most 4 answers); ``http_retries``: extra tries of one request after a transient endpoint fault (the
    ``openai`` client's ``max_retries``). ``backoff_s * 2**k`` (at most ``backoff_max_s``, times a random
    0.5-1 so 32 threads do not retry in step) is the wait between the tries :func:`ask_judge` makes for a
    client that does not retry by itself; the ``openai`` client waits by its own rule.
    """

    answer_retries: int = 3
    first_temperature: float = 0.0
    retry_temperature: float = 0.4
    http_retries: int = 4
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0


@dataclass(frozen=True)
class JudgeAnswer:
    """The outcome for one row: an accepted answer (``error is None``) or why none was accepted.

    ``response``: the raw text of the accepted answer; ``attempts``: answers requested;
    ``rejected``: ``{"reason", "text"}`` for each invalid answer; ``http_retries``: retried endpoint faults.
    """

    response: str | None
    hallucination_list: list[str] | None
    attempts: int
    rejected: list[dict[str, str | None]] = field(default_factory=list)
    http_retries: int = 0
    error: str | None = None


def request_with_retries(
    client: ChatClient,
    messages: list[dict[str, str]],
    temperature: float,
    max_tokens: int,
    policy: RetryPolicy,
    sleep: Callable[[float], None],
) -> tuple[Completion, int]:
    """One request: ``(completion, endpoint retries spent)``, at most ``policy.http_retries`` in all.

    The retries the client made by itself (the ``openai`` client's, built with ``max_retries=http_retries``)
    count against the same budget, so the loop here retries only for a client that left budget unspent:
    one that does not retry by itself.
    """
    spent = 0
    while True:
        try:
            completion = client(messages, temperature=temperature, max_tokens=max_tokens)
            return completion, spent + completion.retries
        except EndpointError as e:
            spent += e.retries
            if not e.transient or spent >= policy.http_retries:
                raise EndpointError(e.reason, e.transient, spent) from None
        sleep(min(policy.backoff_max_s, policy.backoff_s * 2**spent) * random.uniform(0.5, 1.0))
        spent += 1


def ask_judge(
    client: ChatClient,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    policy: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
) -> JudgeAnswer:
    """Ask until a valid answer or ``1 + policy.answer_retries`` invalid ones (module docstring).

    Raises :class:`EndpointError` when the endpoint keeps failing; an answer that stays invalid is
    returned with ``error`` set, never as an empty list.
    """
    rejected: list[dict[str, str | None]] = []
    retries = 0
    for attempt in range(policy.answer_retries + 1):
        temperature = policy.first_temperature if attempt == 0 else policy.retry_temperature
        completion, used = request_with_retries(client, messages, temperature, max_tokens, policy, sleep)
        retries += used
        try:
            if completion.problem:
                raise InvalidAnswer(completion.problem)
            spans = parse_hallucination_list(completion.text)
        except InvalidAnswer as e:
            reason = str(e) + (" (cut at --max-tokens)" if completion.finish_reason == "length" else "")
            text = completion.text[:REJECTED_TEXT_CHARS] if completion.text is not None else None
            rejected.append({"reason": reason, "text": text})
            continue
        return JudgeAnswer(completion.text, spans, attempt + 1, rejected, retries)
    n = policy.answer_retries + 1
    error = f"no valid answer in {n} attempt{'s' if n > 1 else ''} (last: {rejected[-1]['reason']})"
    return JudgeAnswer(None, None, n, rejected, retries, error)
