"""The HTTP layer through FastAPI's test client: the OpenAI schema, errors, rendering and token counts."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from serve_fakes import EchoBackend

from posttrainlab.errors import BadInput
from posttrainlab.serve.app import create_app

CHAT = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}


@pytest.fixture
def echo():
    return EchoBackend()


@pytest.fixture
def client(echo):
    with TestClient(create_app(echo, "m", batch_wait_ms=0)) as c:
        yield c


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"])
    return body["error"]


def test_models_and_health(client):
    body = client.get("/v1/models").json()
    assert body["object"] == "list" and [m["id"] for m in body["data"]] == ["m"]
    assert body["data"][0]["object"] == "model"
    assert client.get("/v1/models/m").json()["id"] == "m"
    assert client.get("/v1/models/other").status_code == 404
    assert client.get("/health").json() == {"status": "ok"}


def test_chat_completion_schema_with_n_and_stop(client, echo):
    r = client.post("/v1/chat/completions", json={**CHAT, "n": 2, "temperature": 0.5, "seed": 3, "stop": "|s="})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == "m"
    assert isinstance(body["created"], int) and "usage" not in body  # this backend has no tokenizer
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert all(c["message"] == {"role": "assistant", "content": "What is 2 + 3?|t=0.5"} for c in body["choices"])
    assert all(c["finish_reason"] == "stop" for c in body["choices"])
    # the chat reaches the backend as messages (the backend renders it), with the request's parameters
    call = echo.calls[-1]
    assert call["prompts"] == [CHAT["messages"]]
    assert (call["n"], call["temperature"], call["seed"], call["stop"]) == (2, 0.5, 3, ["|s="])


def test_chat_defaults_and_text_parts(client, echo):
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": parts}]})
    assert r.status_code == 200
    call = echo.calls[-1]
    assert call["prompts"] == [[{"role": "user", "content": "one\ntwo"}]]
    assert (call["n"], call["temperature"], call["top_p"]) == (1, 1.0, 1.0)  # OpenAI's defaults
    r = client.post("/v1/chat/completions", json={**CHAT, "max_completion_tokens": 7})
    assert echo.calls[-1]["max_new_tokens"] == 7


def test_completions_with_prompt_list_n_and_stop_list(client, echo):
    r = client.post(
        "/v1/completions",
        json={"model": "m", "prompt": ["a", "b"], "n": 2, "temperature": 0, "stop": ["|t", "zzz"], "max_tokens": 5},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert [(c["index"], c["text"]) for c in body["choices"]] == [(0, "a"), (1, "a"), (2, "b"), (3, "b")]
    assert echo.calls[-1]["stop"] == ["|t", "zzz"] and echo.calls[-1]["max_new_tokens"] == 5
    client.post("/v1/completions", json={"model": "m", "prompt": "x"})
    assert echo.calls[-1]["max_new_tokens"] == 16  # OpenAI's default for completions


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options: only allowed with stream=true"),
        ({**CHAT, "n": 0}, "n:"),
        ({**CHAT, "temperature": -1}, "temperature:"),
        ({**CHAT, "top_p": 0}, "top_p:"),
        ({**CHAT, "max_tokens": 0}, "max_tokens:"),
        ({**CHAT, "logprobs": True}, "logprobs: not supported"),
        ({**CHAT, "presence_penalty": 0.5}, "presence_penalty: not supported"),
        ({"model": "m", "messages": []}, "messages:"),
        ({"model": "m"}, "messages:"),
        ({"messages": CHAT["messages"]}, "model:"),
        ({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "only text parts"),
    ],
)
def test_bad_chat_requests_are_400_with_an_openai_error(client, body, fragment):
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400
    error = error_of(r)
    assert fragment in error["message"] and error["type"] == "invalid_request_error"


def test_bad_completion_requests_and_bodies(client):
    r = client.post("/v1/completions", json={"model": "m", "prompt": [1, 2, 3]})  # token ids: a text-only backend
    assert r.status_code == 400 and error_of(r)["message"].startswith("prompt: not supported by this server's backend")
    r = client.post("/v1/completions", json={"model": "m", "prompt": "x", "max_tokens": 0})  # 0: only to score (echo)
    assert r.status_code == 400 and error_of(r)["message"].startswith("max_tokens: 0 is only allowed with echo")
    r = client.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in error_of(r)["message"]


def test_unknown_model_is_404_and_unknown_route_too(client):
    r = client.post("/v1/chat/completions", json={**CHAT, "model": "gpt-4"})
    assert r.status_code == 404
    error = error_of(r)
    assert "gpt-4" in error["message"] and error["code"] == "model_not_found"
    assert client.post("/v1/completions", json={"model": "x", "prompt": "a"}).status_code == 404
    r = client.get("/v1/nothing")
    assert r.status_code == 404 and error_of(r)


def test_api_key(echo):
    with TestClient(create_app(echo, "m", api_key="s3cret", batch_wait_ms=0)) as c:
        missing = c.post("/v1/chat/completions", json=CHAT)
        wrong = c.post("/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer nope"})
        assert missing.status_code == wrong.status_code == 401
        assert "missing API key" in error_of(missing)["message"] and error_of(wrong)["code"] == "invalid_api_key"
        assert c.get("/v1/models").status_code == 401
        ok = {"Authorization": "Bearer s3cret"}
        assert c.post("/v1/chat/completions", json=CHAT, headers=ok).status_code == 200
        assert c.get("/v1/models", headers=ok).status_code == 200
        assert c.get("/health").status_code == 200  # no key needed to see that it is up


def test_backend_errors_become_400_or_500():
    with TestClient(create_app(EchoBackend(fail=BadInput("top_p=2: no")), "m", batch_wait_ms=0)) as c:
        r = c.post("/v1/chat/completions", json=CHAT)
        assert r.status_code == 400 and error_of(r)["message"] == "top_p=2: no"
    with TestClient(create_app(EchoBackend(fail=RuntimeError("CUDA out of memory")), "m", batch_wait_ms=0)) as c:
        r = c.post("/v1/chat/completions", json=CHAT)
        assert r.status_code == 500 and "CUDA out of memory" in error_of(r)["message"]
        assert c.get("/v1/models").status_code == 200  # the server lives on


# ---- a real model: rendering, token counts, context -----------------------------------------------

HI = [{"role": "user", "content": "What is 7 + 8?"}]


def chat(client, messages, **kw) -> dict:
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": messages, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_chat_template_rendering_and_usage(tiny_backend):
    rendered = "<|im_start|>user\nWhat is 7 + 8?<|im_end|>\n<|im_start|>assistant\n"
    with TestClient(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as c:
        body = chat(c, HI, temperature=0, max_tokens=6)
    expected = tiny_backend.generate([rendered], max_new_tokens=6)[0][0]
    assert body["choices"][0]["message"]["content"] == expected
    ids = tiny_backend.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert body["usage"]["prompt_tokens"] == len(ids) == 3 + len("user\nWhat is 7 + 8?\nassistant\n")
    (sample,) = tiny_backend.sample_ids([ids], [0], temperature=0.0, max_new_tokens=6)[0]
    assert sample.text == expected
    assert body["usage"]["completion_tokens"] == len(sample.tokens)  # the ids generated, not the text re-tokenized
    assert body["usage"]["total_tokens"] == len(ids) + body["usage"]["completion_tokens"]


def test_no_chat_template_serves_a_plain_role_prompt(plain_backend):
    rendered = "user: What is 7 + 8?\nassistant:"
    with TestClient(create_app(plain_backend, "tiny", batch_wait_ms=0)) as c:
        body = chat(c, HI, temperature=0, max_tokens=6)
    assert body["choices"][0]["message"]["content"] == plain_backend.generate([rendered], max_new_tokens=6)[0][0]
    assert body["usage"]["prompt_tokens"] == len(rendered.encode())


def test_prompt_plus_max_tokens_beyond_the_context_is_400(tiny_backend):
    with TestClient(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as c:
        r = c.post("/v1/chat/completions", json={"model": "tiny", "messages": HI, "max_tokens": 8000})
        error = error_of(r)
        assert r.status_code == 400 and error["code"] == "context_length_exceeded"
        assert "maximum context length is 1024 tokens" in error["message"] and "33 input tokens" in error["message"]
        r = c.post("/v1/completions", json={"model": "tiny", "prompt": "x" * 1100, "max_tokens": 1})
        assert r.status_code == 400 and "the prompt has 1100 tokens" in error_of(r)["message"]


def test_finish_reason_length_when_max_tokens_is_used_up(tiny_backend):
    with TestClient(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as c:
        r = c.post("/v1/completions", json={"model": "tiny", "prompt": "12", "max_tokens": 3, "temperature": 0})
    choice = r.json()["choices"][0]
    full = tiny_backend.generate(["12"], max_new_tokens=3)[0][0]
    assert choice["text"] == full
    ids = tiny_backend.tokenizer("12")["input_ids"]
    (sample,) = tiny_backend.sample_ids([ids], [0], temperature=0.0, max_new_tokens=3)[0]
    assert r.json()["usage"]["completion_tokens"] == len(sample.tokens) <= 3
    assert choice["finish_reason"] == ("stop" if sample.stop_token is not None else "length")


def test_program_judge_plugs_in():
    """Served, the exact judge lists the deliberately wrong step (203 + 56 is 259) and the answer built on it."""
    from posttrainlab.runners.judge_client import build_messages
    from posttrainlab.serve.program_judge import ArithProgramJudge

    judge = ArithProgramJudge(noise=0.0, seed=0)
    with TestClient(create_app(judge, "arith-judge", batch_wait_ms=0)) as c:
        messages = build_messages("What is 351 - 148 + 56?", ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"])
        r = c.post("/v1/chat/completions", json={"model": "arith-judge", "messages": messages, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == '{"hallucination list": ["203 + 56 = 260", "Answer: 260"]}'
