"""Request fields beyond the OpenAI core: which are implemented, which are refused, and what they do.

Every field of a request either changes what the server does (and then it is implemented, with
vLLM's meaning) or is named in a 400; none is dropped. The sampling fields and the chat-rendering
fields are checked against the tiny model, each against what it must equal (greedy decoding, a
token id cut, the chat template with transformers' own ``continue_final_message``), and ``usage``
against the token ids the sampler generated.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from serve_fakes import EchoBackend

from posttrainlab.serve.app import create_app

CHAT = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}]}
QUESTION = [{"role": "user", "content": "What is 6 * 3 + 4?"}]
WRONG = "6 * 3 = 17\n"  # a known-wrong step: the served model must continue it, not start afresh


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


@pytest.fixture
def echo_client():
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        yield c


@pytest.fixture(scope="module")
def tiny(tiny_backend):
    with TestClient(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as c:
        yield c


# ---- the field policy (any backend) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("guided_json", {"type": "object"}),
        ("guided_regex", "[0-9]+"),
        ("guided_choice", ["a", "b"]),
        ("response_format", {"type": "json_object"}),
        ("logprobs", True),
        ("top_logprobs", 2),
        ("logit_bias", {"17": 5}),
        ("presence_penalty", 0.5),
        ("repetition_penalty", 1.2),
        ("include_stop_str_in_output", True),
        ("skip_special_tokens", False),
        ("chat_template", "{{ messages }}"),
        ("chat_template_kwargs", {"enable_thinking": False}),
        ("add_special_tokens", True),
        ("truncate_prompt_tokens", 8),
        ("use_beam_search", True),
        ("some_new_field", 1),
    ],
)
def test_a_field_that_would_change_the_output_is_refused_by_name(echo_client, field, value):
    r = echo_client.post("/v1/chat/completions", json={**CHAT, field: value})
    assert r.status_code == 400, r.text
    error = error_of(r)
    assert error["message"].startswith(f"{field}: ") and error["param"] == field


@pytest.mark.parametrize(
    "field, value",
    [
        ("user", "alice"),
        ("metadata", {"run": "7"}),
        ("store", False),
        ("logprobs", False),
        ("presence_penalty", 0),
        ("response_format", {"type": "text"}),
        ("skip_special_tokens", True),
        ("stream", False),
        ("top_k", -1),
        ("top_k", 0),
        ("min_p", 0.0),
        ("min_tokens", 0),
        ("ignore_eos", False),
        ("stop_token_ids", []),
        ("add_generation_prompt", True),
        ("continue_final_message", False),
    ],
)
def test_a_field_that_cannot_change_the_output_is_accepted(echo_client, field, value):
    r = echo_client.post("/v1/chat/completions", json={**CHAT, field: value})
    assert r.status_code == 200, r.text


def test_logprobs_zero_on_completions_is_not_taken_for_false(echo_client):
    """``logprobs: 0`` asks completions for the drawn tokens' log-probabilities (which a backend that only
    generates text cannot give: a 400); only false/null means none."""
    r = echo_client.post("/v1/completions", json={"model": "m", "prompt": "x", "logprobs": 0})
    assert r.status_code == 400 and error_of(r)["message"].startswith("logprobs: ")
    assert echo_client.post("/v1/completions", json={"model": "m", "prompt": "x", "logprobs": None}).status_code == 200


@pytest.mark.parametrize("field", ["continue_final_message", "add_generation_prompt", "max_completion_tokens"])
def test_chat_fields_are_refused_on_completions(echo_client, field):
    r = echo_client.post("/v1/completions", json={"model": "m", "prompt": "x", field: True})
    assert r.status_code == 400 and error_of(r)["message"].startswith(f"{field}: ")


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ({"continue_final_message": True, "add_generation_prompt": True}, "continue_final_message"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 1.5}, "min_p"),
        ({"min_tokens": -1}, "min_tokens"),
        ({"min_tokens": 9, "max_tokens": 8}, "min_tokens"),
        ({"stop_token_ids": ["a"]}, "stop_token_ids"),
        ({"ignore_eos": "maybe"}, "ignore_eos"),
        ({"seed": 2**64}, "seed"),  # beyond what a torch.Generator takes: refused before it joins a batch
    ],
)
def test_bad_values_are_400(echo_client, extra, fragment):
    r = echo_client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert r.status_code == 400 and fragment in error_of(r)["message"], r.text


def test_a_message_field_that_would_change_the_rendering_is_refused(echo_client):
    messages = [{"role": "user", "content": "hi", "name": "bob"}]
    r = echo_client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    assert r.status_code == 400 and error_of(r)["message"].startswith("messages.0.name: ")


@pytest.mark.parametrize("role", ["bogus", "developer", "tool", "User", ""])
def test_a_role_other_than_system_user_assistant_is_400_naming_the_message(role):
    echo = EchoBackend()
    messages = [{"role": "system", "content": "be brief"}, {"role": role, "content": "hi"}]
    with TestClient(create_app(echo, "m", batch_wait_ms=0)) as client:
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages})
    error = error_of(r)
    assert r.status_code == 400 and error["message"].startswith(f"messages.1.role: {role!r} is not supported"), r.text
    assert error["param"] == "messages" and "system, user, assistant" in error["message"]
    assert echo.calls == []  # refused before it reached the backend


@pytest.mark.parametrize(
    "extra",
    [
        {"top_k": 5},
        {"min_p": 0.1},
        {"min_tokens": 2},
        {"ignore_eos": True},
        {"stop_token_ids": [7]},
        {"add_generation_prompt": False},
        {"continue_final_message": True, "add_generation_prompt": False},
    ],
)
def test_a_backend_that_only_generates_text_refuses_what_it_cannot_do(echo_client, extra):
    r = echo_client.post("/v1/chat/completions", json={**CHAT, **extra})
    assert r.status_code == 400 and "not supported by this server's backend" in error_of(r)["message"], r.text


# ---- chat rendering: continue_final_message, add_generation_prompt ---------------------------------


def chat(client, messages, **kw) -> dict:
    r = client.post("/v1/chat/completions", json={"model": "tiny", "messages": messages, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def test_continue_final_message_continues_the_assistant_prefix(tiny, tiny_backend):
    messages = [*QUESTION, {"role": "assistant", "content": WRONG}]
    rendered = tiny_backend.tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    assert rendered.endswith("<|im_start|>assistant\n" + WRONG)  # the turn is left open after the prefix
    body = chat(tiny, messages, temperature=0, max_tokens=10, continue_final_message=True, add_generation_prompt=False)
    continued = tiny_backend.generate([rendered], max_new_tokens=10)[0][0]
    assert body["choices"][0]["message"]["content"] == continued
    assert body["usage"]["prompt_tokens"] == len(tiny_backend.tokenizer(rendered)["input_ids"])
    # what the server answered before: a new assistant turn after the closed prefix
    new_turn = tiny_backend.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tiny_backend.generate([new_turn], max_new_tokens=10)[0][0] != continued


def test_continue_final_message_alone_implies_no_generation_prompt(tiny):
    messages = [*QUESTION, {"role": "assistant", "content": WRONG}]
    alone = chat(tiny, messages, temperature=0, max_tokens=8, continue_final_message=True)
    both = chat(tiny, messages, temperature=0, max_tokens=8, continue_final_message=True, add_generation_prompt=False)
    assert alone["choices"] == both["choices"]


def test_add_generation_prompt_false_leaves_the_last_turn_closed(tiny, tiny_backend):
    rendered = tiny_backend.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=False)
    body = chat(tiny, QUESTION, temperature=0, max_tokens=8, add_generation_prompt=False)
    assert body["choices"][0]["message"]["content"] == tiny_backend.generate([rendered], max_new_tokens=8)[0][0]
    assert body["usage"]["prompt_tokens"] == len(tiny_backend.tokenizer(rendered)["input_ids"])


def test_continue_final_message_without_a_chat_template(plain_backend):
    """No template: the plain ``role: content`` prompt, the final message left open (as ``label mc`` renders it)."""
    from posttrainlab.generation.shared_prefix import continuation_text

    messages = [*QUESTION, {"role": "assistant", "content": WRONG}]
    rendered = continuation_text(plain_backend.tokenizer, QUESTION, WRONG)
    assert rendered == "user: What is 6 * 3 + 4?\nassistant:" + WRONG
    with TestClient(create_app(plain_backend, "tiny", batch_wait_ms=0)) as c:
        body = chat(c, messages, temperature=0, max_tokens=8, continue_final_message=True)
    assert body["choices"][0]["message"]["content"] == plain_backend.generate([rendered], max_new_tokens=8)[0][0]


# ---- sampling fields --------------------------------------------------------------------------------


def greedy_tokens(backend, messages, max_tokens: int) -> list[int]:
    from posttrainlab.generation.shared_prefix import PrefixRequest, sample_shared_prefix

    _, tokens = sample_shared_prefix(
        backend.model,
        backend.tokenizer,
        [PrefixRequest(messages)],
        temperature=0.0,
        max_new_tokens=max_tokens,
        eos_ids=backend.eos_ids(),
        return_tokens=True,
    )
    return tokens[0][0]


@pytest.mark.parametrize("extra", [{"top_k": 1}, {"min_p": 1.0}])
def test_top_k_one_and_min_p_one_sample_the_greedy_token(tiny, extra):
    greedy = chat(tiny, QUESTION, temperature=0, max_tokens=10)["choices"][0]["message"]["content"]
    sampled = chat(tiny, QUESTION, temperature=1.0, n=4, seed=3, max_tokens=10, **extra)
    assert [c["message"]["content"] for c in sampled["choices"]] == [greedy] * 4
    unfiltered = chat(tiny, QUESTION, temperature=1.0, n=4, seed=3, max_tokens=10)
    assert [c["message"]["content"] for c in unfiltered["choices"]] != [greedy] * 4  # the filter did it


def test_stop_token_ids_end_the_completion_at_that_token(tiny, tiny_backend):
    tokens = greedy_tokens(tiny_backend, QUESTION, 10)
    stop_id = tokens[2]
    cut = tokens.index(stop_id)
    body = chat(tiny, QUESTION, temperature=0, max_tokens=10, stop_token_ids=[stop_id])
    choice = body["choices"][0]
    assert choice["message"]["content"] == tiny_backend.tokenizer.decode(tokens[:cut], skip_special_tokens=True)
    assert choice["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == cut + 1  # the stop token was generated: it counts


def test_min_tokens_holds_back_the_stop_tokens(tiny, tiny_backend):
    first = greedy_tokens(tiny_backend, QUESTION, 4)[0]
    stopped = chat(tiny, QUESTION, temperature=0, max_tokens=8, stop_token_ids=[first])
    assert stopped["choices"][0]["message"]["content"] == "" and stopped["usage"]["completion_tokens"] == 1
    held = chat(tiny, QUESTION, temperature=0, max_tokens=8, stop_token_ids=[first], min_tokens=3)
    assert held["usage"]["completion_tokens"] >= 3 and held["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def eos_backend():
    """The tiny model with its first greedy token for QUESTION made an eos token (generation config)."""
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from tiny_models import scaled_model

    model, tokenizer = scaled_model()
    backend = TransformersBackend(model, tokenizer, batch_size=4, progress=False)
    free = greedy_tokens(backend, QUESTION, 6)
    assert len(free) == 6  # no eos within 6 tokens yet
    model.generation_config.eos_token_id = free[0]
    return backend, free


def test_eos_counts_in_usage_and_ignore_eos_generates_past_it(eos_backend):
    backend, free = eos_backend
    with TestClient(create_app(backend, "tiny", batch_wait_ms=0)) as c:
        ended = chat(c, QUESTION, temperature=0, max_tokens=6)
        ignored = chat(c, QUESTION, temperature=0, max_tokens=6, ignore_eos=True)
        held = chat(c, QUESTION, temperature=0, max_tokens=6, min_tokens=2)
    assert ended["choices"][0]["message"]["content"] == "" and ended["choices"][0]["finish_reason"] == "stop"
    assert ended["usage"]["completion_tokens"] == 1  # exact: the eos token was generated (re-tokenizing "" says 0)
    choice = ignored["choices"][0]
    assert choice["message"]["content"] == backend.tokenizer.decode(free, skip_special_tokens=True)
    assert choice["finish_reason"] == "length" and ignored["usage"]["completion_tokens"] == 6
    assert held["usage"]["completion_tokens"] >= 2 and held["choices"][0]["message"]["content"]


def test_stop_token_ids_outside_the_vocabulary_are_400(tiny):
    r = tiny.post("/v1/chat/completions", json={"model": "tiny", "messages": QUESTION, "stop_token_ids": [10**6]})
    assert r.status_code == 400 and "stop_token_ids" in error_of(r)["message"]
