"""An abandoned request is dropped, and a stream sends its tokens as they are generated (issue #25, item 6).

Against a real uvicorn server on a free port (a disconnect is a closed socket), serving the tiny model.
A long request (``max_tokens`` near the context, ``ignore_eos``) is abandoned while it generates; the
next short request must then take about what it takes alone, well under what the abandoned one costs
(both measured here, compared with a generous factor), and the long request's decode steps must stop.
Before this, the abandoned request ran to its end and the next one waited behind it.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import openai
import pytest
from fastapi.testclient import TestClient

from posttrainlab.serve.app import ServerThread, create_app

MESSAGES = [{"role": "user", "content": "Tell me a long story about a dragon."}]
LONG_TOKENS = 900  # the tiny model's context is 1,024 tokens
LONG = {"model": "tiny", "messages": MESSAGES, "temperature": 0, "max_tokens": LONG_TOKENS, "ignore_eos": True}
SHORT = {"model": "tiny", "messages": MESSAGES, "temperature": 0, "max_tokens": 5}


@pytest.fixture(scope="module")
def server(tiny_backend):
    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as running:
        yield running


def timed(server, body: dict) -> tuple[float, dict]:
    """Seconds for one non-streamed chat request, and its reply."""
    request = urllib.request.Request(
        f"{server.url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        reply = json.loads(response.read())
    return time.perf_counter() - start, reply


def send_raw(server, body: dict) -> socket.socket:
    """A socket that has sent a chat request and not read the answer."""
    host, port = server.sock.getsockname()[:2]
    data = json.dumps(body).encode()
    sock = socket.create_connection((host, port))
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return sock


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_a_request_whose_client_disconnects_stops_and_the_next_one_does_not_wait(server, tiny_backend, stream):
    stats = tiny_backend.stats
    alone = min(timed(server, SHORT)[0] for _ in range(3))
    whole, _ = timed(server, LONG)  # what the abandoned request costs when it runs to its end

    before = stats.decode_steps
    sock = send_raw(server, {**LONG, "stream": stream})
    wait_for(lambda: stats.decode_steps - before >= 20)  # generating, well before its end
    if stream:  # the client leaves mid-stream, once tokens are arriving
        sock.settimeout(30)
        received = b""
        while b'"delta":{"content":"' not in received:
            received += sock.recv(65536)
    sock.close()
    after, reply = timed(server, SHORT)
    steps = stats.decode_steps - before

    assert reply["choices"][0]["finish_reason"] == "length"
    assert steps < LONG_TOKENS / 2, f"the abandoned request went on generating ({steps} decode steps)"
    message = f"next request {after:.3f}s after the disconnect; {alone:.3f}s alone; the abandoned one {whole:.3f}s"
    assert after < whole / 4, message
    assert after < alone + whole / 4, message


def test_the_first_chunk_arrives_while_the_answer_is_still_being_generated(server, tiny_backend):
    stats = tiny_backend.stats
    client = openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0, timeout=120)
    _, whole = timed(server, LONG)
    before, at_first, pieces = stats.decode_steps, None, []
    ask = dict(model="tiny", messages=MESSAGES, temperature=0, max_tokens=LONG_TOKENS, extra_body={"ignore_eos": True})
    for chunk in client.chat.completions.create(**ask, stream=True):
        content = chunk.choices[0].delta.content if chunk.choices else None
        if content and at_first is None:
            at_first = stats.decode_steps - before
        pieces.append(content or "")
    total = stats.decode_steps - before
    assert total == LONG_TOKENS - 1  # one forward pass after each token but the last
    assert at_first is not None and at_first < total / 2, f"first piece after {at_first} of {total} decode steps"
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]  # joined: the non-streamed answer
    assert len(pieces) > LONG_TOKENS / 4  # token by token, not one piece


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0, timeout=60)


def test_live_streams_with_stop_strings_n_and_echo_join_to_the_non_streamed_answers(client):
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, max_tokens=30)
    text = plain.choices[0].message.content
    assert len(text) > 12
    for stop in ([text[6:9]], [text[6:7], "no such stop"], ["no such stop"]):
        ask = dict(model="tiny", messages=MESSAGES, temperature=0.8, seed=4, n=2, max_tokens=30, stop=stop)
        whole = client.chat.completions.create(**ask)
        chunks = list(client.chat.completions.create(**ask, stream=True))
        for choice in whole.choices:
            joined = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices[0].index == choice.index)
            assert joined == choice.message.content
            last = [c.choices[0] for c in chunks if c.choices[0].index == choice.index][-1]
            assert last.finish_reason == choice.finish_reason
    ask = dict(model="tiny", prompt=["12 + 30 =", "7 * 8 ="], temperature=0, max_tokens=8, echo=True)
    whole = client.completions.create(**ask)
    chunks = list(client.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    for choice in whole.choices:
        texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].index == choice.index]
        assert "".join(texts) == choice.text and texts[0] == ask["prompt"][choice.index]  # the echoed prompt first
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage


def _failing_after(app, real, steps: int) -> None:
    """Make the app use ``real`` (its step-by-step sampler) failing after ``steps`` steps (0: before the first)."""
    batcher = app.state.batcher

    def stepper(ids, seeds, *, gone, on_step, **options):
        seen = []

        def step(drawn):
            if len(seen) == steps:
                raise RuntimeError("the model broke")
            seen.append(drawn)
            if on_step is not None:
                on_step(drawn)

        return real(ids, seeds, gone=gone, on_step=step, **options)

    batcher._stepper = stepper


def test_a_backend_failure_before_the_first_token_is_a_json_error_and_after_it_an_error_event(tiny_backend):
    body = {"model": "tiny", "messages": MESSAGES, "temperature": 0, "max_tokens": 20, "ignore_eos": True}
    app = create_app(tiny_backend, "tiny", batch_wait_ms=0)
    real = app.state.batcher._stepper
    with TestClient(app) as c:
        _failing_after(app, real, 0)
        r = c.post("/v1/chat/completions", json={**body, "stream": True})
        assert r.status_code == 500 and r.headers["content-type"] == "application/json"
        assert r.json()["error"]["message"].startswith("the backend failed: the model broke"), r.text
        _failing_after(app, real, 3)
        r = c.post("/v1/chat/completions", json={**body, "stream": True})
    assert r.status_code == 200
    events = [e[len("data: ") :] for e in r.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["type"] == "server_error" and "the model broke" in error["message"]
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-2]]
    assert deltas[0] == {"role": "assistant", "content": ""} and len(deltas) > 1  # tokens came before the failure
