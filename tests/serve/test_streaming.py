"""``stream: true`` (``serve.streaming``): the wire format, and streams that join to the non-streamed answer.

The format is checked byte for byte on a hand-built choice; the server's streams are read by the
official ``openai`` client (``stream=True``) and compared with the same request sent without a stream:
greedy decoding, so both are the same completion.
"""

from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient
from serve_fakes import EchoBackend

from posttrainlab.serve.app import ServerThread, create_app
from posttrainlab.serve.streaming import StreamedChoice, events, text_pieces

QUESTIONS = ["What is 12 + 30?", "What is 7 * 8?"]


def test_text_pieces_keep_characters_whole(tiny_backend):
    tok = tiny_backend.tokenizer
    ids = tok("a€b", add_special_tokens=False)["input_ids"]
    assert len(ids) == 5  # a byte-level tokenizer: the euro sign is 3 tokens
    assert text_pieces(tok, ids, "a€b") == [("a", 1), ("€", 3), ("b", 1)]
    assert text_pieces(tok, ids, "a€") == [("a", 1), ("€", 3)]  # cut at a stop string: "b" is not counted
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert text_pieces(tok, [eos, *ids[:1]], "a") == [("a", 2)]  # a special token adds nothing: counted with "a"
    assert text_pieces(tok, [], "") == []


def test_the_wire_format_of_a_chat_stream():
    envelope = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m"}
    lp = [{"token": "he", "logprob": -1.0}, {"token": "y", "logprob": -2.0}, {"token": "!", "logprob": -3.0}]
    choice = StreamedChoice(0, [("he", 1), ("y", 1)], "stop", lp)
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    lines = list(events(envelope, [choice], chat=True, usage=usage, include_usage=True))
    head = '"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m"'
    assert lines == [
        "data: {" + head + ',"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        '"finish_reason":null}],"usage":null}\n\n',
        "data: {" + head + ',"choices":[{"index":0,"delta":{"content":"he"},"logprobs":{"content":[{"token":"he",'
        '"logprob":-1.0}]},"finish_reason":null}],"usage":null}\n\n',
        "data: {" + head + ',"choices":[{"index":0,"delta":{"content":"y"},"logprobs":{"content":[{"token":"y",'
        '"logprob":-2.0}]},"finish_reason":null}],"usage":null}\n\n',
        "data: {" + head + ',"choices":[{"index":0,"delta":{},"logprobs":{"content":[{"token":"!","logprob":-3.0}]},'
        '"finish_reason":"stop"}],"usage":null}\n\n',  # the token that brought no text: on the last chunk
        "data: {" + head + ',"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}\n\n',
        "data: [DONE]\n\n",
    ]


def test_the_wire_format_of_a_completions_stream():
    envelope = {"id": "cmpl-1", "object": "text_completion", "created": 7, "model": "m"}
    lp = {
        "tokens": ["a", "b"],
        "token_logprobs": [None, -1.5],
        "top_logprobs": [None, {"b": -1.5}],
        "text_offset": [0, 1],
    }
    choices = [StreamedChoice(0, [("a", 1), ("b", 1)], "length", lp), StreamedChoice(1, [("x", 0)], "stop")]
    chunks = [
        json.loads(line[len("data: ") :])
        for line in list(events(envelope, choices, chat=False, usage=None, include_usage=False))[:-1]
    ]
    assert all(set(c) == {"id", "object", "created", "model", "choices"} for c in chunks)  # no usage: not asked
    assert [c["choices"][0] for c in chunks] == [
        {"index": 0, "text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": [None], "top_logprobs": [None],
                                               "text_offset": [0]}, "finish_reason": None},
        {"index": 0, "text": "b", "logprobs": {"tokens": ["b"], "token_logprobs": [-1.5],
                                               "top_logprobs": [{"b": -1.5}], "text_offset": [1]},
         "finish_reason": None},
        {"index": 0, "text": "", "logprobs": None, "finish_reason": "length"},
        {"index": 1, "text": "x", "logprobs": None, "finish_reason": None},
        {"index": 1, "text": "", "logprobs": None, "finish_reason": "stop"},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def client(tiny_backend):
    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as server:
        yield openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0, timeout=60)


def by_index(chunks, field) -> dict[int, list]:
    out: dict[int, list] = {}
    for chunk in chunks:
        for c in chunk.choices:
            out.setdefault(c.index, []).append(field(c))
    return out


@pytest.mark.parametrize("question", QUESTIONS)
def test_a_chat_stream_joins_to_the_non_streamed_answer(client, question):
    ask = dict(model="tiny", messages=[{"role": "user", "content": question}], temperature=0, max_tokens=12, n=2)
    whole = client.chat.completions.create(**ask)
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    assert len({c.id for c in chunks}) == 1 and all(c.object == "chat.completion.chunk" for c in chunks)
    deltas = by_index(chunks, lambda c: c.delta)
    assert sorted(deltas) == [0, 1]
    for i, choice in enumerate(whole.choices):
        assert deltas[i][0].role == "assistant" and deltas[i][0].content == ""
        assert "".join(d.content or "" for d in deltas[i]) == choice.message.content
        assert len(deltas[i]) > 3  # token by token, not one piece
    reasons = by_index(chunks, lambda c: c.finish_reason)
    assert all(r[:-1] == [None] * (len(r) - 1) and r[-1] == whole.choices[0].finish_reason for r in reasons.values())
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(c.usage is None for c in chunks[:-1])


def test_a_completions_stream_of_two_prompts_with_echo_and_logprobs(client):
    ask = dict(model="tiny", prompt=["12 + 30 =", "7 * 8 ="], temperature=0, max_tokens=6, logprobs=2, echo=True)
    whole = client.completions.create(**ask)
    chunks = list(client.completions.create(**ask, stream=True))
    texts = by_index(chunks, lambda c: c.text)
    assert sorted(texts) == [0, 1]
    for i, choice in enumerate(whole.choices):
        assert "".join(texts[i]) == choice.text and texts[i][0] == ask["prompt"][i]  # the echoed prompt first
        joined: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for c in chunks:
            if c.choices and c.choices[0].index == i and c.choices[0].logprobs is not None:
                for key in joined:
                    joined[key] += getattr(c.choices[0].logprobs, key)
        assert joined == choice.logprobs.model_dump()


def test_a_chat_stream_with_logprobs_carries_them_piece_by_piece(client):
    ask = dict(model="tiny", messages=[{"role": "user", "content": QUESTIONS[0]}], temperature=0, max_tokens=10)
    whole = client.chat.completions.create(**ask, logprobs=True, top_logprobs=2)
    chunks = list(client.chat.completions.create(**ask, logprobs=True, top_logprobs=2, stream=True))
    streamed = [
        e.model_dump() for c in chunks for e in ((c.choices[0].logprobs and c.choices[0].logprobs.content) or [])
    ]
    assert streamed == [e.model_dump() for e in whole.choices[0].logprobs.content]


def test_a_text_only_backend_streams_its_text_in_one_piece():
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        r = c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                 "temperature": 0, "stream": True})  # fmt: skip
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events_ = r.text.split("\n\n")
    assert events_[-2:] == ["data: [DONE]", ""]
    deltas = [json.loads(e[len("data: ") :])["choices"][0]["delta"] for e in events_[:-2]]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "hi|t=0|s=0|0"}, {}]


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ({"stream_options": {"include_usage": True}}, "stream_options: only allowed with stream=true"),
        ({"stream": True, "stream_options": {"continuous_usage_stats": True}}, "stream_options.continuous_usage_stats"),
    ],
)
def test_stream_options_it_cannot_honour_are_400(extra, fragment):
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        r = c.post("/v1/completions", json={"model": "m", "prompt": "x", **extra})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith(fragment), r.text


def test_a_refused_stream_is_an_ordinary_json_error():
    """A request's checks come before the first event, so a refusal is the usual 400, not a broken stream."""
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        r = c.post("/v1/completions", json={"model": "m", "prompt": "x", "stream": True, "guided_json": {}})
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["param"] == "guided_json"
