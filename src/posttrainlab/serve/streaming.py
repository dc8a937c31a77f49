"""``stream: true`` for ``posttrain serve``: server-sent events in the chunks OpenAI and vLLM send.

**The answer is generated whole, then streamed** in pieces, token by token from its ids: the batcher
runs every request as part of one batched sampling call (``serve.batcher``), which returns when the
batch is done, so true incremental decoding would mean a sampler that yields per step. What a client
sees is the format of a stream (the openai client's ``stream=True``, LangChain, lm-evaluation-harness),
with every piece at once; joined, the pieces are the non-streamed answer exactly.

The wire format (``text/event-stream``):

- one ``data: {json}\\n\\n`` event per chunk and ``data: [DONE]\\n\\n`` at the end;
- chat: ``object: chat.completion.chunk``; per choice a first chunk with ``delta: {role: assistant,
  content: ""}``, then ``delta: {content: piece}`` chunks, then ``delta: {}`` with its ``finish_reason``;
- completions: ``object: text_completion``; per choice ``text`` pieces (an echoed prompt first), then
  ``text: ""`` with its ``finish_reason``;
- with log-probabilities, each chunk carries those of the tokens whose text it brings (the last one
  those of tokens that brought none, e.g. an eos token on completions); joined they are the
  non-streamed ``logprobs``;
- ``n > 1`` or a list of prompts: the choices one after another, each chunk carrying its ``index``;
  every chunk shares one ``id`` and ``created``;
- ``stream_options: {include_usage: true}``: every chunk has ``usage: null`` and a last chunk before
  ``[DONE]`` has ``choices: []`` and the request's ``usage`` (OpenAI's rule).

Pieces come from :func:`text_pieces`: a token whose bytes end inside a UTF-8 character waits for the
tokens that complete it, so no piece holds half a character.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


def text_pieces(tokenizer, tokens: Sequence[int], text: str) -> list[tuple[str, int]]:
    """``text`` cut where its tokens end: ``(piece, tokens read for it)`` pairs whose pieces join to ``text``.

    ``text`` is what the tokens decode to, perhaps cut at a stop string; a token that adds no character
    (a special token, or bytes of a character still incomplete) is counted with the next piece, and
    tokens after the last character are not counted.
    """
    out: list[tuple[str, int]] = []
    done, read = 0, 0
    for k in range(len(tokens)):
        if done >= len(text):
            break
        read += 1
        decoded = tokenizer.decode(list(tokens[: k + 1]), skip_special_tokens=True)
        if decoded.endswith("\ufffd"):
            continue  # a character still incomplete
        end = done
        limit = min(len(decoded), len(text))
        while end < limit and decoded[end] == text[end]:
            end += 1
        if end > done:
            out.append((text[done:end], read))
            done, read = end, 0
    if done < len(text):
        out.append((text[done:], read))
    return out


@dataclass(frozen=True)
class StreamedChoice:
    """One finished choice as it is streamed: its pieces, why it ended, and its log-probabilities.

    ``logprobs``: chat's content entries (a list) or completions' parallel-lists object (a dict),
    whose positions the pieces' token counts walk through; None when not asked for.
    """

    index: int
    pieces: list[tuple[str, int]]
    finish_reason: str
    logprobs: list | dict | None = None


def _take(logprobs: list | dict | None, start: int, stop: int | None, chat: bool):
    if logprobs is None:
        return None
    if chat:
        assert isinstance(logprobs, list)
        return {"content": logprobs[start:stop]}
    assert isinstance(logprobs, dict)
    return {key: value[start:stop] for key, value in logprobs.items()}


def _count(logprobs: list | dict | None) -> int:
    if logprobs is None:
        return 0
    return len(logprobs) if isinstance(logprobs, list) else len(logprobs["tokens"])


def chat_choice_chunks(choice: StreamedChoice) -> Iterator[dict]:
    """The ``choices[0]`` of each chat chunk of one choice (module docstring)."""
    i, lp = choice.index, choice.logprobs
    yield {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    at = 0
    for piece, read in choice.pieces:
        part = _take(lp, at, at + read, True)
        yield {"index": i, "delta": {"content": piece}, "logprobs": part, "finish_reason": None}
        at += read
    rest = _take(lp, at, None, True) if at < _count(lp) else None
    yield {"index": i, "delta": {}, "logprobs": rest, "finish_reason": choice.finish_reason}


def completion_choice_chunks(choice: StreamedChoice) -> Iterator[dict]:
    """The ``choices[0]`` of each completions chunk of one choice (module docstring)."""
    i, lp = choice.index, choice.logprobs
    at = 0
    for piece, read in choice.pieces:
        yield {"index": i, "text": piece, "logprobs": _take(lp, at, at + read, False), "finish_reason": None}
        at += read
    rest = _take(lp, at, None, False) if at < _count(lp) else None
    yield {"index": i, "text": "", "logprobs": rest, "finish_reason": choice.finish_reason}


def events(
    envelope: dict[str, Any],
    choices: Sequence[StreamedChoice],
    *,
    chat: bool,
    usage: dict[str, int] | None,
    include_usage: bool,
) -> Iterator[str]:
    """The server-sent events of one streamed response; ``envelope``: ``id``, ``object``, ``created``, ``model``."""
    per_choice = chat_choice_chunks if chat else completion_choice_chunks
    extra = {"usage": None} if include_usage else {}
    for choice in choices:
        for part in per_choice(choice):
            yield _event({**envelope, "choices": [part], **extra})
    if include_usage:
        yield _event({**envelope, "choices": [], "usage": usage})
    yield "data: [DONE]\n\n"


def _event(chunk: dict) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


__all__ = ["StreamedChoice", "chat_choice_chunks", "completion_choice_chunks", "events", "text_pieces"]
