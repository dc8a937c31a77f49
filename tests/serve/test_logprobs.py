"""Log-probabilities and ``echo`` (``serve.logprobs``), checked against a full forward pass computed here.

Every reported number is compared with ``log_softmax`` of the tiny model's logits over one unpadded
forward pass of the same ids (tolerance 1e-4); the shapes are OpenAI's (chat ``content`` entries,
legacy completions' parallel lists), and the log-likelihood requests are sent as lm-evaluation-harness's
``local-completions`` sends them and parsed as it parses them.
"""

from __future__ import annotations

from operator import itemgetter

import openai
import pytest
from fastapi.testclient import TestClient
from serve_fakes import EchoBackend, IdEchoBackend

from posttrainlab.serve import logprobs as lp_module
from posttrainlab.serve.app import ServerThread, create_app
from posttrainlab.serve.logprobs import TokenNames, score

QUESTION = [{"role": "user", "content": "What is 12 + 30?"}]
TOL = 1e-4


def reference(model, ids: list[int]):
    """``log_softmax`` rows of one unpadded forward pass: row ``t`` is the distribution of token ``t + 1``."""
    import torch

    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)


def loglik(model, ids: list[int], start: int) -> float:
    """The summed log-probability of ``ids[start:]`` given what precedes each token."""
    ref = reference(model, ids)
    return sum(ref[t - 1, ids[t]].item() for t in range(max(start, 1), len(ids)))


@pytest.fixture(scope="module")
def tiny(tiny_backend):
    with TestClient(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as c:
        yield c


def ok(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def error_of(response, status: int = 400) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


# ---- chat --------------------------------------------------------------------------------------------


def test_chat_logprobs_are_the_models_log_softmax_and_greedy_is_the_top_token(tiny, tiny_backend):
    body = ok(
        tiny.post(
            "/v1/chat/completions",
            json={
                "model": "tiny",
                "messages": QUESTION,
                "temperature": 0,
                "max_tokens": 8,
                "logprobs": True,
                "top_logprobs": 3,
            },
        )  # fmt: skip
    )
    choice = body["choices"][0]
    entries = choice["logprobs"]["content"]
    prompt = tiny_backend.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    prompt_ids = tiny_backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    (sample,) = tiny_backend.sample_ids([prompt_ids], [0], temperature=0.0, max_new_tokens=8)[0]
    generated = list(sample.text_tokens)
    assert len(entries) == len(generated) > 0  # one entry per generated token (the eos/stop token not shown)
    ref = reference(tiny_backend.model, prompt_ids + generated)
    names = TokenNames(tiny_backend.tokenizer)
    for t, (token, entry) in enumerate(zip(generated, entries, strict=True)):
        row = ref[len(prompt_ids) + t - 1]
        assert abs(entry["logprob"] - row[token].item()) < TOL
        tops = entry["top_logprobs"]
        assert len(tops) == 3
        assert [x["logprob"] for x in tops] == sorted((x["logprob"] for x in tops), reverse=True)
        assert tops[0]["token"] == entry["token"] and tops[0]["logprob"] == entry["logprob"]  # greedy: the top token
        assert abs(tops[0]["logprob"] - row.max().item()) < TOL
        assert entry["token"] == names.name(token)[0] and entry["bytes"] == list(names.name(token)[1])
    # the entries' bytes spell the content (a byte-level tokenizer: every token is one byte)
    assert (
        bytes(b for e in entries for b in e["bytes"]).decode("utf-8", errors="replace") == choice["message"]["content"]
    )


def test_sampled_logprobs_are_at_temperature_one_not_the_sampling_temperature(tiny, tiny_backend):
    ask = {"model": "tiny", "messages": QUESTION, "max_tokens": 6, "logprobs": True, "seed": 5, "temperature": 0.5}
    body = ok(tiny.post("/v1/chat/completions", json=ask))
    entries = body["choices"][0]["logprobs"]["content"]
    assert all(e["top_logprobs"] == [] for e in entries)  # no top_logprobs asked: the token's own only
    prompt_ids = chat_ids(tiny_backend)
    (sample,) = tiny_backend.sample_ids([prompt_ids], [5], temperature=0.5, max_new_tokens=6)[0]
    assert sample.text == body["choices"][0]["message"]["content"]  # the same draw as the server's
    generated = list(sample.text_tokens)
    ref = reference(tiny_backend.model, prompt_ids + generated)
    rows = [ref[len(prompt_ids) + t - 1] for t in range(len(generated))]
    assert len(entries) == len(generated) > 0
    for row, token, entry in zip(rows, generated, entries, strict=True):
        assert abs(entry["logprob"] - row[token].item()) < TOL
    tempered = [(row / 0.5).log_softmax(-1)[token].item() for row, token in zip(rows, generated, strict=True)]
    assert any(abs(e["logprob"] - x) > 1e-2 for e, x in zip(entries, tempered, strict=True))


def chat_ids(backend) -> list[int]:
    prompt = backend.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    return backend.tokenizer(prompt, add_special_tokens=False)["input_ids"]


# ---- completions -----------------------------------------------------------------------------------


def test_completion_logprobs_with_top_k_and_offsets(tiny, tiny_backend):
    prompt = "12 + 30 ="
    ask = {"model": "tiny", "prompt": prompt, "temperature": 0, "max_tokens": 5, "logprobs": 2}
    body = ok(tiny.post("/v1/completions", json=ask))
    lp = body["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    ids = tiny_backend.tokenizer(prompt)["input_ids"]
    (sample,) = tiny_backend.sample_ids([ids], [0], temperature=0.0, max_new_tokens=5)[0]
    generated = list(sample.tokens)  # every generated token, an eos included (lm-eval counts on it)
    assert len(lp["tokens"]) == len(generated) == body["usage"]["completion_tokens"]
    names = TokenNames(tiny_backend.tokenizer)
    assert lp["tokens"] == [names.name(t)[0] for t in generated]
    ref = reference(tiny_backend.model, ids + generated)
    for t, (token, value, top) in enumerate(zip(generated, lp["token_logprobs"], lp["top_logprobs"], strict=True)):
        assert abs(value - ref[len(ids) + t - 1, token].item()) < TOL
        assert top[lp["tokens"][t]] == value and len(top) <= 3  # the top 2 and the chosen token
        assert max(top.values()) == value  # greedy: the chosen token is the most likely
        assert list(top.values()) == sorted(top.values(), reverse=True)
    offsets = lp["text_offset"]
    assert offsets[0] == len(prompt) and offsets == sorted(offsets)  # from the prompt's end (OpenAI's rule)
    assert offsets[-1] <= len(prompt) + len(body["choices"][0]["text"])


def test_echo_with_max_tokens_zero_scores_the_prompt(tiny, tiny_backend):
    prompt = "What is 7 * 8? Answer: 56"
    ask = {"model": "tiny", "prompt": prompt, "echo": True, "max_tokens": 0, "logprobs": 1}
    body = ok(tiny.post("/v1/completions", json=ask))
    choice = body["choices"][0]
    ids = tiny_backend.tokenizer(prompt)["input_ids"]
    lp = choice["logprobs"]
    assert choice["text"] == prompt and choice["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 0, "total_tokens": len(ids)}
    assert len(lp["token_logprobs"]) == len(ids) and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert abs(sum(lp["token_logprobs"][1:]) - loglik(tiny_backend.model, ids, 1)) < TOL
    assert "".join(lp["tokens"]) == prompt and lp["text_offset"] == list(range(len(prompt)))


def lm_eval_parse_logprobs(out: dict, ctxlens: list[int]) -> list[tuple[float, bool]]:
    """lm-evaluation-harness's ``LocalCompletionsAPI.parse_logprobs``, as it reads a response."""
    res = []
    for choice, ctxlen in zip(sorted(out["choices"], key=itemgetter("index")), ctxlens, strict=False):
        assert ctxlen > 0
        logprobs = sum(choice["logprobs"]["token_logprobs"][ctxlen:-1])
        tokens_logprobs = choice["logprobs"]["token_logprobs"][ctxlen:-1]
        top_logprobs = choice["logprobs"]["top_logprobs"][ctxlen:-1]
        is_greedy = all(tok == max(top.values()) for tok, top in zip(tokens_logprobs, top_logprobs, strict=False))
        res.append((logprobs, is_greedy))
    return res


def test_lm_eval_loglikelihood_request_on_batched_token_ids(tiny_backend):
    """What ``local-completions`` sends for log-likelihood: token ids, batched, echo, max_tokens 1, logprobs 1."""
    tok, model = tiny_backend.tokenizer, tiny_backend.model
    pairs = [("Question: 2 + 2 =", " 4"), ("Q: 10 - 3 =", " 7"), ("1 + 1 = 2. 2 + 2 =", " 44")]
    contexts = [tok(c, add_special_tokens=False)["input_ids"] for c, _ in pairs]
    continuations = [tok(x, add_special_tokens=False)["input_ids"] for _, x in pairs]
    greedy_ctx = tok("7 + 8 =", add_special_tokens=False)["input_ids"]
    contexts.append(greedy_ctx)
    continuations.append([int(reference(model, greedy_ctx)[-1].argmax())])  # the model's own next token
    inputs = [c + x for c, x in zip(contexts, continuations, strict=True)]
    greedy = []
    for ids, ctx in zip(inputs, contexts, strict=True):
        ref = reference(model, ids)
        greedy.append(all(ref[t - 1].argmax().item() == ids[t] for t in range(len(ctx), len(ids))))
    assert greedy[-1] and not all(greedy)  # both answers of the greediness check are exercised
    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=0)) as server:
        client = openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0)
        out = client.completions.create(
            model="tiny", prompt=inputs, temperature=0, max_tokens=1, logprobs=1, seed=1234, echo=True
        ).model_dump()
    assert [len(c["logprobs"]["tokens"]) for c in out["choices"]] == [len(i) + 1 for i in inputs]  # + the generated
    parsed = lm_eval_parse_logprobs(out, [len(c) for c in contexts])
    for (value, is_greedy), ids, ctx, expected in zip(parsed, inputs, contexts, greedy, strict=True):
        assert abs(value - loglik(model, ids, len(ctx))) < TOL
        assert is_greedy == expected


def test_scoring_in_small_batches_equals_one_row_at_a_time(tiny_backend, monkeypatch):
    """Left-padded rows cut by the position budget score what each row scores alone."""
    tok, model = tiny_backend.tokenizer, tiny_backend.model
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in ["a much longer prompt here", "short", "mid len"]]
    starts = [0, 2, 1]
    alone = [score(model, 0, [r], [0], 2)[0] for r in rows]
    monkeypatch.setattr(lp_module, "POSITION_BUDGET", 40)  # rows of 25 and 7 scored positions cannot share a pass
    assert lp_module._batches([0, 2, 1], [25, 5, 7], [25, 4, 7]) == [[0], [2, 1]]  # the second pass is padded
    together = score(model, 0, rows, starts, 2)
    for a, b, start in zip(alone, together, starts, strict=True):
        a = a[start:]
        assert [p.token for p in a] == [p.token for p in b]
        assert [p.top and [t for t, _ in p.top] for p in a] == [p.top and [t for t, _ in p.top] for p in b]
        assert all(p.logprob is None or abs(p.logprob - q.logprob) < TOL for p, q in zip(a, b, strict=True))
    assert together[0][0].logprob is None and together[1][0].logprob is not None
    short = score(model, 0, [[5], [5, 6]], [0, 2], 1)
    assert [[(p.token, p.logprob) for p in row] for row in short] == [[(5, None)], []]


def test_token_names_for_partial_characters_and_special_tokens(tiny_backend):
    names = TokenNames(tiny_backend.tokenizer)
    tok = tiny_backend.tokenizer
    euro = tok("€", add_special_tokens=False)["input_ids"]
    assert [names.name(i) for i in euro] == [
        ("bytes:\\xe2", b"\xe2"),
        ("bytes:\\x82", b"\x82"),
        ("bytes:\\xac", b"\xac"),
    ]
    assert names.name(tok("a", add_special_tokens=False)["input_ids"][0]) == ("a", b"a")
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    assert names.name(eos) == ("<|im_end|>", b"<|im_end|>") and names.text_bytes(eos) == b""


def test_echo_on_a_text_only_backend_prepends_the_prompt():
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        body = ok(c.post("/v1/completions", json={"model": "m", "prompt": "hi", "echo": True, "temperature": 0}))
        assert body["choices"][0]["text"] == "hi" + "hi|t=0|s=0|0"
        body = ok(c.post("/v1/completions", json={"model": "m", "prompt": ["a", "b"], "echo": True, "max_tokens": 0}))
        assert [ch["text"] for ch in body["choices"]] == ["a", "b"]


# ---- what is refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, extra, field",
    [
        ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/chat/completions", {"echo": True}, "echo"),
        ("/v1/completions", {"logprobs": True}, "logprobs"),
        ("/v1/completions", {"logprobs": 21}, "logprobs"),
        ("/v1/completions", {"logprobs": -1}, "logprobs"),
        ("/v1/completions", {"max_tokens": 0}, "max_tokens"),
        ("/v1/completions", {"prompt": [[]]}, "prompt"),
        ("/v1/completions", {"prompt": ["x", ""]}, "prompt"),  # no token: nothing to condition on
        ("/v1/completions", {"prompt": [5, 10**6]}, "prompt"),
        ("/v1/completions", {"top_logprobs": 2}, "top_logprobs"),
        ("/v1/completions", {"prompt_logprobs": 1}, "prompt_logprobs"),
    ],
)
def test_what_cannot_be_honoured_is_400_naming_the_field(tiny, path, extra, field):
    base = {"model": "tiny", "messages": QUESTION} if "chat" in path else {"model": "tiny", "prompt": "x"}
    error = error_of(tiny.post(path, json={**base, **extra}))
    assert error["message"].startswith(f"{field}") and error["param"] == field, error


def test_a_text_only_backend_refuses_logprobs_and_token_ids():
    from posttrainlab.models.tokenizer import build_tokenizer
    from posttrainlab.serve.app import TokenCounter

    chat = {"model": "m", "messages": QUESTION, "logprobs": True}
    with TestClient(create_app(EchoBackend(), "m", batch_wait_ms=0)) as c:
        for path, body, field in [
            ("/v1/chat/completions", chat, "logprobs"),
            ("/v1/completions", {"model": "m", "prompt": "x", "logprobs": 0}, "logprobs"),
            ("/v1/completions", {"model": "m", "prompt": [1, 2, 3]}, "prompt"),
        ]:
            error = error_of(c.post(path, json=body))
            assert error["message"].startswith(f"{field}: not supported by this server's backend (EchoBackend ")
    # a backend that samples token ids but has no model to score them with: ids taken, log-probabilities refused
    with TestClient(create_app(IdEchoBackend(), "m", batch_wait_ms=0, counter=TokenCounter(build_tokenizer()))) as c:
        assert ok(c.post("/v1/completions", json={"model": "m", "prompt": [1, 2, 3], "temperature": 0}))
        error = error_of(c.post("/v1/chat/completions", json=chat))
        assert (
            error["message"]
            == "logprobs: not supported by this server's backend (IdEchoBackend has no model to score tokens with)"
        )
