"""The transformers sampling backend on a tiny random model: batching, order, seeds, stops, prompt rendering.

The model's weights are scaled by 3 so that its greedy outputs differ from prompt to prompt (at the
default init scale a random model answers every prompt with the same newline), which makes
"batched == one at a time" a real check.
"""

from __future__ import annotations

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.generation import SamplingBackend
from posttrainlab.generation.transformers_backend import TransformersBackend, plain_chat, render_prompt
from tiny_models import one_torch_thread, scaled_model

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}

PROMPTS = [
    [{"role": "user", "content": text}]
    for text in [
        "What is 375 - 260?",
        "What is 94 * 3?",
        "Maria has 12 apples and buys 30 more. How many apples does she have?",
        "What is 7 + 8?",
        "What is (16 + 21) * 7?",
        "Compute 1000 - 1.",
        "What is 135 * 8?",
        "Sum 4 and 4.",
        "What is 437 + 309 - 125? Show your work.",
    ]
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: a 64-wide model gains nothing from more (and a shared CPU makes more slower)."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def backend() -> TransformersBackend:
    from posttrainlab.models.tiny import TinyModelConfig

    model, tokenizer = scaled_model(TinyModelConfig(**TINY))
    return TransformersBackend(model, tokenizer, batch_size=4, progress=False)


def test_is_a_sampling_backend(backend):
    assert isinstance(backend, SamplingBackend)
    assert backend.tokenizer.padding_side == "left" and backend.tokenizer.pad_token is not None


def test_batched_greedy_equals_one_at_a_time(backend):
    batched = backend.generate(PROMPTS, max_new_tokens=10)
    backend.batch_size = 1
    try:
        single = backend.generate(PROMPTS, max_new_tokens=10)
    finally:
        backend.batch_size = 4
    assert batched == single
    assert len({out[0] for out in batched}) > 3  # the outputs differ, so the check means something


def test_results_come_back_in_prompt_order(backend):
    forward = backend.generate(PROMPTS, max_new_tokens=6)
    backward = backend.generate(PROMPTS[::-1], max_new_tokens=6)
    assert backward == forward[::-1]
    assert all(len(out) == 1 for out in forward)


def test_sampling_is_seeded_and_leaves_the_global_rng_alone(backend):
    import torch

    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    a = backend.generate(PROMPTS[:3], n=3, temperature=1.0, seed=5, max_new_tokens=8)
    assert torch.equal(torch.rand(3), expected_next)
    b = backend.generate(PROMPTS[:3], n=3, temperature=1.0, seed=5, max_new_tokens=8)
    c = backend.generate(PROMPTS[:3], n=3, temperature=1.0, seed=6, max_new_tokens=8)
    assert a == b
    assert a != c
    assert [len(out) for out in a] == [3, 3, 3]
    assert len(set(a[0])) > 1  # three different samples for one prompt


def test_greedy_with_n_repeats_the_greedy_completion(backend):
    out = backend.generate(PROMPTS[:2], n=2, max_new_tokens=5)
    single = backend.generate(PROMPTS[:2], max_new_tokens=5)
    assert out == [[s[0], s[0]] for s in single]


def test_stop_strings_cut_the_text(backend):
    full = backend.generate(PROMPTS[:1], max_new_tokens=12)[0][0]
    stop = full[4]
    cut = backend.generate(PROMPTS[:1], max_new_tokens=12, stop=[stop])[0][0]
    assert cut == full[: full.index(stop)]


def test_decode_stops_at_eos(backend):
    import torch

    tok = backend.tokenizer
    a, b = tok("AB", add_special_tokens=False)["input_ids"]
    rows = torch.tensor([[a, b, tok.eos_token_id, a, tok.pad_token_id], [b, b, b, b, b]])
    assert backend.decode(rows, backend.eos_ids()) == ["AB", "BBBBB"]


def test_prompt_rendering(backend):
    text, templated = render_prompt(backend.tokenizer, PROMPTS[3])
    assert templated and text == "<|im_start|>user\nWhat is 7 + 8?<|im_end|>\n<|im_start|>assistant\n"
    assert render_prompt(backend.tokenizer, "raw text") == ("raw text", False)


def test_no_chat_template_falls_back_to_plain_roles():
    from posttrainlab.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    tok.chat_template = None
    text, templated = render_prompt(tok, PROMPTS[3])
    assert not templated and text == plain_chat(PROMPTS[3]) == "user: What is 7 + 8?\nassistant:"


def test_raw_string_prompts(backend):
    out = backend.generate(["What is 2 + 2?", "Answer:"], max_new_tokens=4)
    assert [len(o) for o in out] == [1, 1] and all(isinstance(o[0], str) for o in out)


@pytest.mark.parametrize(
    "kwargs",
    [{"n": 0}, {"temperature": -0.5}, {"top_p": 0.0}, {"top_p": 1.5}, {"max_new_tokens": 0}],
)
def test_bad_sampling_arguments(backend, kwargs):
    with pytest.raises(BadInput):
        backend.generate(PROMPTS[:1], **kwargs)


def test_bad_batch_size(backend):
    with pytest.raises(BadInput, match="batch_size=0"):
        TransformersBackend(backend.model, backend.tokenizer, batch_size=0)
