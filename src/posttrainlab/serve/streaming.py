"""``stream: true`` for ``posttrain serve``: server-sent events in the chunks OpenAI and vLLM send.

**Tokens are sent as they are generated** when the backend is the transformers backend and the request
asks for no log-probabilities: the batcher reports each decode step's tokens (``serve.batcher``,
``serve.decode``) and :func:`live_events` turns them into chunks at once, so the first token reaches the
client while the rest is still being generated. Each choice's text goes through a :class:`TextFeed`,
which sends what the tokens so far decode to, holding back a character still incomplete (a token whose
bytes end inside a UTF-8 character), text from a stop string on, and a tail that may be the start of a
stop string; the token that ended a choice (eos, stop token or string, ``max_tokens``) waits for the
choice's final text, whose unsent rest is the choice's last piece. So, joined, the pieces are the
non-streamed answer exactly. Choices are interleaved as their tokens come (``n > 1``, lists of prompts),
each chunk carrying its ``index``; their last chunks come at the end, in index order.

**Otherwise the answer is generated whole, then streamed** in pieces, token by token from its ids
(:func:`events`): log-probabilities come from a scoring pass over the finished answer
(``serve.logprobs``), and a backend that only returns whole answers (the program judge, test doubles)
has nothing to send before it is done.

The wire format (``text/event-stream``):

- one ``data: {json}\\n\\n`` event per chunk and ``data: [DONE]\\n\\n`` at the end;
- chat: ``object: chat.completion.chunk``; per choice a first chunk with ``delta: {role: assistant,
  content: ""}``, then ``delta: {content: piece}`` chunks, then ``delta: {}`` with its ``finish_reason``;
- completions: ``object: text_completion``; per choice ``text`` pieces (an echoed prompt first), then
  ``text: ""`` with its ``finish_reason``;
- with log-probabilities, each chunk carries those of the tokens whose text it brings (the last one
  those of tokens that brought none, e.g. an eos token on completions); joined they are the
  non-streamed ``logprobs``;
- ``n > 1`` or a list of prompts: every chunk carries its choice's ``index`` and shares one ``id`` and
  ``created``;
- ``stream_options: {include_usage: true}``: every chunk has ``usage: null`` and a last chunk before
  ``[DONE]`` has ``choices: []`` and the request's ``usage`` (OpenAI's rule);
- a backend failure after the first chunk (before it, the reply is an ordinary JSON error) is one
  ``data: {"error": {...}}`` event, OpenAI-shaped, then ``[DONE]`` (vLLM's way).

Pieces of a whole answer come from :func:`text_pieces`: a token whose bytes end inside a UTF-8 character
waits for the tokens that complete it, so no piece holds half a character.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from posttrainlab.data.jsonl import strict_json

log = logging.getLogger("posttrainlab.serve")


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
    return f"data: {strict_json(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


# ---- tokens as they are generated --------------------------------------------------------------------


def safe_text(text: str, stop: Sequence[str]) -> str:
    """What of ``text`` (the decoded tokens so far) can be sent: no incomplete character, nothing from a stop string on.

    An incomplete character decodes to U+FFFD, one per byte at most (3 bytes at most: a 4-byte character
    still missing its last): up to 3 trailing U+FFFD are held back; those before them are final.

    >>> safe_text("ab\ufffd", ()), safe_text("a END b", ("END",)), safe_text("a EN", ("END",)), safe_text("a E", ("X",))
    ('ab', 'a ', 'a ', 'a E')
    >>> safe_text("a" + "\ufffd" * 5, ())
    'a\ufffd\ufffd'
    """
    trailing = len(text) - len(text.rstrip("\ufffd"))
    text = text[: len(text) - min(trailing, 3)]
    if not stop:
        return text
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    if found:
        return text[: min(found)]
    hold = 0  # the longest tail that may be the start of a stop string
    for s in stop:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return text[: len(text) - hold]


class TextFeed:
    """One streamed choice's text as its tokens arrive (module docstring).

    ``push(token, ended)`` gives the piece that can be sent now ("" for none); ``rest(text)`` the unsent
    rest of the choice's final ``text``. A stop string that ``min_tokens`` keeps from counting holds the
    text after it back until the end (it is sent then, whole).
    """

    def __init__(self, tokenizer, stop: Sequence[str] = ()):
        self.tokenizer, self.stop = tokenizer, tuple(stop)
        self.tokens: list[int] = []
        self.sent = ""
        self.ended = False

    def push(self, token: int, ended: bool) -> str:
        if self.ended:
            return ""
        if ended:  # an eos or stop token leaves no text, a stop string is cut: the final text decides
            self.ended = True
            return ""
        self.tokens.append(token)
        text = safe_text(self.tokenizer.decode(self.tokens, skip_special_tokens=True), self.stop)
        if len(text) <= len(self.sent) or not text.startswith(self.sent):
            return ""
        piece, self.sent = text[len(self.sent) :], text
        return piece

    def rest(self, text: str) -> str:
        if text.startswith(self.sent):
            return text[len(self.sent) :]
        # a tokenizer whose earlier text changed with later tokens (byte-fallback decoding of invalid UTF-8)
        log.warning("a streamed choice's text changed after it was sent; its stream differs from the answer")
        return ""


@dataclass
class LiveStream:
    """What :func:`live_events` streams: the envelope, the choices' feeds and heads, and how it ends.

    ``feeds``: ``(prompt, sample) -> (choice index, TextFeed)``; ``heads``: ``(choice index, text)`` sent
    first (completions' echoed prompt); ``finish(result)``: ``[(choice index, final text, finish reason)]``
    in index order and the usage; ``error(exc)``: the OpenAI error body of a backend failure.
    """

    envelope: dict[str, Any]
    chat: bool
    include_usage: bool
    feeds: dict[tuple[int, int], tuple[int, TextFeed]]
    finish: Callable[[], tuple[list[tuple[int, str, str]], dict[str, int] | None]]
    error: Callable[[BaseException], dict]
    heads: list[tuple[int, str]] = field(default_factory=list)

    def chunk(self, index: int, piece: str | None, reason: str | None = None) -> str:
        """The event of one piece (``None``: the chat role chunk; ``""`` with a reason: the choice's last chunk)."""
        if self.chat:
            delta = {"role": "assistant", "content": ""} if piece is None else ({"content": piece} if piece else {})
            part = {"index": index, "delta": delta, "logprobs": None, "finish_reason": reason}
        else:
            part = {"index": index, "text": piece or "", "logprobs": None, "finish_reason": reason}
        return _event({**self.envelope, "choices": [part], **({"usage": None} if self.include_usage else {})})


async def live_events(stream: LiveStream, first: Any, next_event: Callable[[], Awaitable[Any]]) -> AsyncIterator[str]:
    """Server-sent events from a job's events (``serve.disconnect.JobEvents``), starting with ``first``.

    An event is a step's ``[(prompt, sample, token, ended), ...]``, ``"done"`` (then ``stream.finish``'s
    last pieces, the usage and ``[DONE]``) or ``"gone"`` (the client left: nothing more is sent).
    """
    from posttrainlab.serve.disconnect import DONE, GONE

    if stream.chat:
        for index in sorted({i for i, _ in stream.feeds.values()}):
            yield stream.chunk(index, None)
    for index, text in stream.heads:
        yield stream.chunk(index, text)
    event = first
    while event != DONE:
        if event == GONE:
            return
        for prompt, sample, token, ended in event:
            index, feed = stream.feeds[(prompt, sample)]
            piece = feed.push(token, ended)
            if piece:
                yield stream.chunk(index, piece)
        event = await next_event()
    try:
        finals, usage = stream.finish()
    except Exception as e:  # the backend failed after the first chunk: an error event, then the end
        yield _event(stream.error(e))
        yield "data: [DONE]\n\n"
        return
    feeds = {index: feed for index, feed in stream.feeds.values()}
    for index, text, reason in finals:
        rest = feeds[index].rest(text)
        if rest:
            yield stream.chunk(index, rest)
        yield stream.chunk(index, "", reason)
    if stream.include_usage:
        yield _event({**stream.envelope, "choices": [], "usage": usage})
    yield "data: [DONE]\n\n"


__all__ = [
    "LiveStream",
    "StreamedChoice",
    "TextFeed",
    "chat_choice_chunks",
    "completion_choice_chunks",
    "events",
    "live_events",
    "safe_text",
    "text_pieces",
]
