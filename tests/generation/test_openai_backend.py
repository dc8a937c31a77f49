"""The OpenAI-compatible backend against a loopback server; the vLLM adapter against a fake ``vllm``; the factory."""

from __future__ import annotations

import sys
import types

import pytest

from label.mc.fake_endpoint import FakeEndpoint
from posttrainlab.errors import BadInput
from posttrainlab.generation import SamplingBackend
from posttrainlab.generation.factory import make_backend
from posttrainlab.generation.openai_backend import EndpointError, OpenAIBackend
from posttrainlab.generation.shared_prefix import PrefixRequest, PrefixSampler

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def echo(body, k):
    """``n`` choices naming the request number and the choice."""
    return [f"r{k}c{i}" for i in range(body.get("n", 1))]


def backend(url: str, **kw) -> OpenAIBackend:
    return OpenAIBackend(url, "policy", **kw)


def test_chat_and_completions_with_n():
    with FakeEndpoint(echo) as server:
        b = backend(server.url, max_workers=1)
        assert isinstance(b, SamplingBackend) and isinstance(b, PrefixSampler)
        out = b.generate([CHAT, "raw prompt"], n=3, temperature=1.0, max_new_tokens=7, seed=5)
    assert out == [["r0c0", "r0c1", "r0c2"], ["r1c0", "r1c1", "r1c2"]]  # choices sorted by index
    chat, raw = server.requests
    assert chat["_path"] == "chat" and chat["messages"] == CHAT and chat["n"] == 3 and chat["max_tokens"] == 7
    assert raw["_path"] == "completions" and raw["prompt"] == "raw prompt"
    assert chat["seed"] != raw["seed"]  # one seed per prompt, derived from the call's seed


def test_greedy_asks_once_and_repeats():
    with FakeEndpoint(echo) as server:
        out = backend(server.url).generate([CHAT], n=4, temperature=0.0)
    assert out == [["r0c0"] * 4] and server.requests[0]["n"] == 1


def test_prefix_is_continued_as_the_final_assistant_message():
    with FakeEndpoint(echo) as server:
        b = backend(server.url, max_workers=1)
        out = b.sample_continuations(
            [PrefixRequest(CHAT, "2 + 3 = 5\n", 11), PrefixRequest(CHAT, "", 12)], n=2, temperature=1.0
        )
    assert out == [["r0c0", "r0c1"], ["r1c0", "r1c1"]]
    first, second = server.requests
    assert first["messages"][-1] == {"role": "assistant", "content": "2 + 3 = 5\n"}
    assert first["continue_final_message"] is True and first["add_generation_prompt"] is False
    assert first["seed"] == 11 and second["seed"] == 12
    assert "continue_final_message" not in second and second["messages"] == CHAT


def test_completions_mode_renders_the_prompt_and_appends_the_prefix():
    with FakeEndpoint(echo) as server:
        backend(server.url, mode="completions").sample_continuations([PrefixRequest(CHAT, "2 + 3 = 5\n", 1)], n=1)
    assert server.requests[0]["prompt"] == "user: What is 2 + 3?\nassistant:2 + 3 = 5\n"  # no tokenizer: plain roles


def test_transient_faults_are_retried_then_give_up():
    script = {0: 503, 1: 429}
    with FakeEndpoint(lambda body, k: script.get(k) or echo(body, k)) as server:
        b = backend(server.url)
        assert b.generate([CHAT]) == [["r2c0"]]
    assert b.retries == 2
    with FakeEndpoint(lambda body, k: 500) as server:
        with pytest.raises(EndpointError, match=r"HTTP 500.*after 3 tries"):
            backend(server.url, http_retries=2).generate([CHAT])
    with FakeEndpoint(lambda body, k: 400) as server:
        b = backend(server.url)
        with pytest.raises(EndpointError, match="HTTP 400") as info:
            b.generate([CHAT])
        assert not info.value.transient and len(server.requests) == 1


def test_a_server_that_ignores_n_is_asked_for_the_rest():
    with FakeEndpoint(lambda body, k: [f"r{k}"]) as server:
        out = backend(server.url).generate([CHAT], n=3, temperature=1.0)
    assert out == [["r0", "r1", "r2"]] and [r["n"] for r in server.requests] == [3, 2, 1]


def test_stop_strings_are_sent_and_applied():
    with FakeEndpoint(lambda body, k: ["12 + 3 = 15\nAnswer: 15\n\nQuestion: next"]) as server:
        out = backend(server.url).generate([CHAT], stop=["\n\nQuestion:"])
    assert out == [["12 + 3 = 15\nAnswer: 15"]] and server.requests[0]["stop"] == ["\n\nQuestion:"]


def test_order_is_kept_with_threads():
    with FakeEndpoint(lambda body, k: [body["messages"][0]["content"]]) as server:
        prompts = [[{"role": "user", "content": str(i)}] for i in range(20)]
        out = backend(server.url, max_workers=8).generate(prompts)
    assert out == [[str(i)] for i in range(20)]


def test_connection_refused_is_an_endpoint_error():
    b = backend("http://127.0.0.1:9/v1", http_retries=1, timeout_s=2)
    with pytest.raises(EndpointError, match="cannot connect"):
        b.generate([CHAT])


def test_factory():
    with pytest.raises(BadInput, match="unknown backend"):
        make_backend("m", backend="tgi")
    with pytest.raises(BadInput, match="needs --base-url"):
        make_backend("m", backend="openai")
    with pytest.raises(BadInput, match="--base-url is for --backend openai"):
        make_backend("m", base_url="http://x/v1")
    b = make_backend("m", backend="openai", base_url="http://127.0.0.1:9/v1", batch_size=4)
    assert isinstance(b, OpenAIBackend) and b.max_workers == 4


def test_vllm_missing_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(BadInput) as info:
        make_backend("m", backend="vllm")
    assert "vllm is not installed" in str(info.value) and "\n" not in str(info.value)


def test_vllm_adapter_maps_arguments(monkeypatch):
    """The adapter against a fake vllm module: prefix caching on, per-request seeds, token-id prompts."""
    from posttrainlab.models.tokenizer import build_tokenizer

    seen = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class LLM:
        def __init__(self, **kw):
            seen["engine"] = kw

        def get_tokenizer(self):
            return build_tokenizer()

        def generate(self, prompts, params, use_tqdm=False):
            seen["prompts"], seen["params"] = prompts, params
            return [
                types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"p{i}s{j}") for j in range(p.n)])
                for i, p in enumerate(params)
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    b = make_backend("some/model", backend="vllm", batch_size=16)
    assert seen["engine"]["enable_prefix_caching"] is True and seen["engine"]["max_num_seqs"] == 16
    out = b.sample_continuations([PrefixRequest(CHAT, "2 + 3", 7), PrefixRequest(CHAT, "", 8)], n=2)
    assert out == [["p0s0", "p0s1"], ["p1s0", "p1s1"]]
    assert [p.seed for p in seen["params"]] == [7, 8] and seen["params"][0].top_k == -1
    ids = seen["prompts"][0]["prompt_token_ids"]
    tok = b.tokenizer
    assert tok.decode(ids).endswith("<|im_start|>assistant\n2 + 3")
    assert b.generate([CHAT], n=3, temperature=0.0) == [["p0s0"] * 3] and seen["params"][0].n == 1
