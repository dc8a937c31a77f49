"""Shared-prefix sampling on a tiny random model: one prefill per prefix, greedy == generate, seeds, distribution.

Weights are scaled by 3 (as in test_transformers_backend.py) so greedy outputs differ between prompts.
"""

from __future__ import annotations

import pytest

from posttrainlab.generation.shared_prefix import (
    PrefixRequest,
    SamplingStats,
    continuation_text,
    count_forward_tokens,
    derive_seed,
    sample_continuations,
    sample_shared_prefix,
)
from posttrainlab.generation.transformers_backend import TransformersBackend
from tiny_models import one_torch_thread, scaled_model

QUESTION = [{"role": "user", "content": "What is 437 + 309 - 125?"}]
PREFIXES = ["", "437 + 309 = 746\n", "437 + 309 = 746\n746 - 125 = 621\n"]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def backend() -> TransformersBackend:
    model, tokenizer = scaled_model()
    return TransformersBackend(model, tokenizer, batch_size=8, progress=False)


def requests(seed: int = 0) -> list[PrefixRequest]:
    return [PrefixRequest(QUESTION, p, derive_seed(seed, i)) for i, p in enumerate(PREFIXES)]


def test_one_prefill_per_prefix_against_n_with_generate(backend):
    n = 8
    reqs = requests()
    prompt_tokens = sum(
        len(backend.tokenizer(continuation_text(backend.tokenizer, r.prompt, r.prefix))["input_ids"]) for r in reqs
    )
    stats = SamplingStats()
    with count_forward_tokens(backend.model) as shared:
        out = sample_shared_prefix(
            backend.model,
            backend.tokenizer,
            reqs,
            n=n,
            temperature=1.0,
            max_new_tokens=6,
            eos_ids=backend.eos_ids(),
            stats=stats,
        )
    assert [len(o) for o in out] == [n] * len(reqs)
    assert shared.prefill_calls == 1 and shared.prefill_tokens == prompt_tokens  # each prefix once
    assert stats.prefills == len(reqs) and stats.prefill_tokens == prompt_tokens
    assert stats.sequences == n * len(reqs)

    texts = [continuation_text(backend.tokenizer, r.prompt, r.prefix) for r in reqs]
    with count_forward_tokens(backend.model) as baseline:
        backend.share_prefill = False
        try:
            backend.generate(texts, n=n, temperature=1.0, max_new_tokens=6)
        finally:
            backend.share_prefill = True
    assert baseline.prefill_tokens == n * prompt_tokens  # num_return_sequences encodes every prefix n times
    with count_forward_tokens(backend.model) as routed:
        backend.generate(texts, n=n, temperature=1.0, max_new_tokens=6)
    assert routed.prefill_tokens == prompt_tokens  # generate(n > 1) itself shares the prefill by default


def test_greedy_equals_generate_greedy(backend):
    reqs = [PrefixRequest(QUESTION, p) for p in PREFIXES] + [
        PrefixRequest([{"role": "user", "content": q}], "") for q in ("What is 94 * 3?", "Sum 4 and 4.", "Hi")
    ]
    shared = backend.sample_continuations(reqs, n=3, temperature=0.0, max_new_tokens=10)
    texts = [continuation_text(backend.tokenizer, r.prompt, r.prefix) for r in reqs]
    greedy = backend.generate(texts, max_new_tokens=10)
    assert shared == [[g[0]] * 3 for g in greedy]
    assert len({s[0] for s in shared}) > 2


def test_seeded_per_request_and_independent_of_the_batch(backend):
    a = backend.sample_continuations(requests(1), n=4, temperature=1.0, max_new_tokens=8)
    b = backend.sample_continuations(requests(1), n=4, temperature=1.0, max_new_tokens=8)
    c = backend.sample_continuations(requests(2), n=4, temperature=1.0, max_new_tokens=8)
    assert a == b and a != c
    assert len(set(a[0])) > 1  # four different samples from one prefix
    alone = backend.sample_continuations(requests(1)[1:2], n=4, temperature=1.0, max_new_tokens=8)
    assert alone[0] == a[1]  # a request's samples do not depend on the other requests in the call


def test_caller_rng_left_alone(backend):
    import torch

    torch.manual_seed(7)
    expected = torch.rand(2)
    torch.manual_seed(7)
    backend.sample_continuations(requests(), n=2, temperature=1.0, max_new_tokens=3)
    assert torch.equal(torch.rand(2), expected)


def test_sampled_tokens_follow_the_full_forward_logits(backend):
    """The log-probability the sampler records for each token it drew (through the expanded, growing KV
    cache) equals log_softmax of a no-cache forward pass over prompt + every token drawn, at that position."""
    import torch

    from posttrainlab.generation.shared_prefix import encode_request, sample_from_ids

    reqs = requests(3)[:2]
    prompts = [encode_request(backend.tokenizer, r) for r in reqs]
    samples = sample_from_ids(
        backend.model,
        backend.tokenizer,
        prompts,
        [r.seed for r in reqs],
        n=3,
        temperature=1.0,
        max_new_tokens=6,
        eos_ids=backend.eos_ids(),
        logprobs=True,
    )
    checked = 0
    for prompt, rows in zip(prompts, samples, strict=True):
        assert len(rows) == 3
        for sample in rows:
            assert sample.tokens and len(sample.logprobs) == len(sample.tokens)
            ids = torch.tensor([prompt + list(sample.tokens)])
            with torch.no_grad():
                logits = backend.model(input_ids=ids).logits[0].float()
            positions = logits[len(prompt) - 1 : -1]  # the logits that predicted each drawn token
            expected = positions.log_softmax(-1).gather(-1, torch.tensor(sample.tokens)[:, None])[:, 0]
            torch.testing.assert_close(torch.tensor(sample.logprobs), expected, rtol=0, atol=1e-4)
            checked += len(sample.tokens)
    assert checked >= 2 * 3 * 2  # several decode steps per row, so the cached steps are compared too


def test_first_token_distribution_matches_softmax(backend):
    """2000 continuations of one prefix, from one prefill: first-token frequencies match the softmax."""
    import torch

    req = PrefixRequest(QUESTION, PREFIXES[1], 11)
    _, tokens = sample_shared_prefix(
        backend.model, backend.tokenizer, [req], n=2000, temperature=1.0, max_new_tokens=1, return_tokens=True
    )
    from posttrainlab.generation.shared_prefix import encode_request

    ids = torch.tensor([encode_request(backend.tokenizer, req)])
    with torch.no_grad():
        probs = backend.model(input_ids=ids).logits[0, -1].float().softmax(-1)
    eos = min(backend.eos_ids())
    firsts = [row[0] if row else eos for row in tokens[0]]
    n = len(firsts)
    for token in probs.argsort(descending=True)[:5].tolist():  # the five likeliest tokens, within 4 sigma
        p = float(probs[token])
        assert abs(firsts.count(token) / n - p) < 4 * (p * (1 - p) / n) ** 0.5 + 1e-9


def test_top_p_keeps_only_the_nucleus(backend):
    import torch

    req = PrefixRequest(QUESTION, PREFIXES[1], 5)
    _, tokens = sample_shared_prefix(
        backend.model,
        backend.tokenizer,
        [req],
        n=300,
        temperature=1.0,
        top_p=0.3,
        max_new_tokens=1,
        return_tokens=True,
    )
    from posttrainlab.generation.shared_prefix import encode_request

    with torch.no_grad():
        logits = backend.model(input_ids=torch.tensor([encode_request(backend.tokenizer, req)])).logits[0, -1]
    probs = logits.softmax(-1)
    order = probs.argsort(descending=True).tolist()
    nucleus, mass = set(), 0.0
    for t in order:
        nucleus.add(t)
        mass += float(probs[t])
        if mass >= 0.3:
            break
    assert {row[0] for row in tokens[0] if row} <= nucleus


def test_stop_strings_and_generic_fallback(backend):
    reqs = requests(4)
    full = backend.sample_continuations(reqs, n=2, temperature=0.0, max_new_tokens=12)
    stop = full[0][0][3]
    cut = backend.sample_continuations(reqs, n=2, temperature=0.0, max_new_tokens=12, stop=[stop])
    assert cut[0][0] == full[0][0][: full[0][0].index(stop)]

    class GenerateOnly:  # a SamplingBackend without sample_continuations
        tokenizer = backend.tokenizer

        def generate(self, prompts, **kw):
            return backend.generate(prompts, **kw)

    fallback = sample_continuations(GenerateOnly(), reqs, n=2, temperature=0.0, max_new_tokens=12)
    assert fallback == full


def test_min_tokens_and_stop_token_ids(backend):
    """Before ``min_tokens`` tokens no stop token is drawn and no stop string counts; after, both end the row."""
    from posttrainlab.generation.shared_prefix import encode_request, sample_from_ids

    prompt = encode_request(backend.tokenizer, PrefixRequest(QUESTION, PREFIXES[1]))
    tok = backend.tokenizer

    def greedy(**kw):
        return sample_from_ids(backend.model, tok, [prompt], [0], temperature=0.0, eos_ids=backend.eos_ids(), **kw)[0][
            0
        ]

    free = greedy(max_new_tokens=12)
    assert len(free.tokens) == 12 and free.finish_reason == "length" and free.stop_token is None
    first = free.tokens[0]
    ended = greedy(max_new_tokens=12, stop_token_ids=[first])
    assert (ended.text, ended.tokens, ended.stop_token, ended.finish_reason) == ("", (first,), first, "stop")
    held = greedy(max_new_tokens=12, stop_token_ids=[first], min_tokens=4)
    assert held.tokens[0] != first and len(held.tokens) >= 4

    # a stop string inside the first min_tokens tokens does not count; the next occurrence does
    def printable(t: int) -> bool:
        c = tok.decode([t])
        return len(c) == 1 and c.isascii() and c.isprintable()

    repeated = next(t for t in free.tokens if free.tokens.count(t) >= 2 and printable(t))
    i = free.tokens.index(repeated)
    j = free.tokens.index(repeated, i + 1)
    char = tok.decode([repeated])
    assert greedy(max_new_tokens=12, stop=[char]).text == tok.decode(free.tokens[:i])
    cut = greedy(max_new_tokens=12, stop=[char], min_tokens=i + 1)
    assert cut.text == tok.decode(free.tokens[:j]) and cut.finish_reason == "stop" and len(cut.tokens) == j + 1
