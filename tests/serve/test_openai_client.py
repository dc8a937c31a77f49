"""The server on a real loopback socket, driven by the official ``openai`` client.

Covers what only a real server shows: the client parses every response, concurrent requests from
client threads are batched into one ``generate`` call with each answer routed back to its request,
and the event loop answers while a ``generate`` call is running.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from serve_fakes import Counting, EchoBackend

from posttrainlab.serve.app import ServerThread, TokenCounter, create_app

QUESTIONS = [f"What is {a} + {b}?" for a, b in [(3, 4), (12, 30), (7, 8), (99, 1), (5, 5), (40, 2), (6, 7), (1, 0)]]


def client_for(server: ServerThread, api_key: str = "EMPTY") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=api_key, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def server(tiny_backend):
    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=5)) as s:
        yield s


def test_models_chat_and_completions_with_n_and_stop(server, tiny_backend):
    client = client_for(server)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    full = tiny_backend.generate([messages], max_new_tokens=12)[0][0]
    reply = client.chat.completions.create(model="tiny", messages=messages, n=2, temperature=0, max_tokens=12)
    assert [c.message.content for c in reply.choices] == [full, full]
    assert reply.usage is not None and reply.usage.prompt_tokens > 0
    stop = full[3]
    cut = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=12, stop=[stop])
    assert cut.choices[0].message.content == full[: full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    text = client.completions.create(model="tiny", prompt=["12 + 3 =", "7 * 8 ="], n=2, max_tokens=6, temperature=0.8)
    assert len(text.choices) == 4 and [c.index for c in text.choices] == [0, 1, 2, 3]
    assert all(isinstance(c.text, str) for c in text.choices)


def test_greedy_equals_the_backend_greedy_output(server, tiny_backend):
    client = client_for(server)
    for q in QUESTIONS[:3]:
        messages = [{"role": "user", "content": q}]
        reply = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=10)
        assert reply.choices[0].message.content == tiny_backend.generate([messages], max_new_tokens=10)[0][0]


def test_same_seed_same_text_even_when_requests_overlap(server):
    client = client_for(server)
    ask = dict(model="tiny", messages=[{"role": "user", "content": QUESTIONS[1]}], temperature=1.0, max_tokens=12, n=2)

    def texts(seed: int) -> list[str]:
        return [c.message.content for c in client.chat.completions.create(**ask, seed=seed).choices]

    first = texts(7)
    with ThreadPoolExecutor(4) as pool:  # concurrent requests, some with the same seed
        together = list(pool.map(texts, [7, 8, 7, 8]))
    assert together[0] == together[2] == first
    assert together[1] == together[3] != first
    assert first[0] != first[1]  # n=2 samples differ


def test_eight_concurrent_requests_share_one_generate_call(tiny_backend):
    """8 client threads at once -> one backend call with all 8 prompts; every answer goes to its request."""
    counted = Counting(tiny_backend)
    # a long window that closes as soon as 8 prompts are in: one call, however slowly the threads start
    app = create_app(
        counted, "tiny", max_batch_size=8, batch_wait_ms=5000, counter=TokenCounter.for_backend(tiny_backend)
    )
    chats = [[{"role": "user", "content": q}] for q in QUESTIONS]
    with ServerThread(app) as server:
        client = client_for(server)

        def ask(messages):
            reply = client.chat.completions.create(model="tiny", messages=messages, temperature=0, max_tokens=10)
            return reply.choices[0].message.content

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, chats))
    assert len(counted.calls) == 1 and len(counted.calls[0]) == 8
    assert sorted(map(str, counted.calls[0])) == sorted(map(str, chats))
    expected = [tiny_backend.generate([m], max_new_tokens=10)[0][0] for m in chats]
    assert answers == expected
    assert len(set(expected)) > 3  # different answers, so routing is really checked
    assert app.state.batcher.calls == 1 and app.state.batcher.prompts == 8


def test_max_batch_size_one_makes_one_call_per_request():
    echo = EchoBackend(delay=0.02)
    with ServerThread(create_app(echo, "m", max_batch_size=1, batch_wait_ms=50)) as server:
        client = client_for(server)

        def ask(i):
            return client.completions.create(model="m", prompt=f"p{i}", temperature=0).choices[0].text

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(8)))
    assert answers == [f"p{i}|t=0|s=0|0" for i in range(8)]
    assert len(echo.calls) == 8 and all(len(c["prompts"]) == 1 for c in echo.calls)


def test_the_server_answers_while_the_backend_is_busy():
    gate = threading.Event()
    echo = EchoBackend(gate=gate)
    with ServerThread(create_app(echo, "m", batch_wait_ms=0)) as server:
        client = client_for(server)
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.completions.create, model="m", prompt="slow", temperature=0)
            assert echo.started.wait(30)
            assert [m.id for m in client.models.list().data] == ["m"]  # answered while generate is blocked
            assert not pending.done()
            gate.set()
            assert pending.result().choices[0].text == "slow|t=0|s=0|0"


def test_client_errors(server):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client_for(server).chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="top_logprobs: needs logprobs=true"):
        client_for(server).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], top_logprobs=2
        )
    with ServerThread(create_app(EchoBackend(), "m", api_key="k")) as keyed:
        with pytest.raises(openai.AuthenticationError):
            client_for(keyed, api_key="wrong").models.list()
        assert [m.id for m in client_for(keyed, api_key="k").models.list().data] == ["m"]


def test_twelve_concurrent_seeded_requests_share_a_call_and_keep_their_seeded_output(tiny_backend):
    """A client that always sends a seed still gets batching; each answer equals the same request sent alone."""
    asks = [
        dict(messages=[{"role": "user", "content": QUESTIONS[i % 4]}], seed=100 + i // 2, n=2) for i in range(12)
    ]  # some share a question, some a seed: neither decides another request's samples

    def texts(client: openai.OpenAI, ask: dict) -> list[str]:
        reply = client.chat.completions.create(model="tiny", temperature=1.0, max_tokens=12, **ask)
        return [c.message.content for c in reply.choices]

    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as alone_server:
        client = client_for(alone_server)
        alone = [texts(client, ask) for ask in asks]  # one at a time: one call each
        assert alone_server.app.state.batcher.calls == 12
    app = create_app(tiny_backend, "tiny", max_batch_size=12, batch_wait_ms=5000)
    with ServerThread(app) as server:
        client = client_for(server)
        with ThreadPoolExecutor(12) as pool:
            together = list(pool.map(lambda ask: texts(client, ask), asks))
    assert app.state.batcher.calls < 12
    assert app.state.batcher.calls == 1 and app.state.batcher.prompts == 12
    assert together == alone
    assert len({tuple(t) for t in alone}) == 12 and all(a != b for a, b in alone)  # all differ: routing is checked
