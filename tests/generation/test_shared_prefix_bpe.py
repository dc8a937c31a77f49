"""The BPE boundary rule of the shared-prefix sampler (``encode_prefix``), on the real model's tokenizer."""

from __future__ import annotations

import pytest

from posttrainlab.generation.shared_prefix import PrefixRequest, encode_prefix, encode_request
from posttrainlab.generation.transformers_backend import encode_prompt, render_prompt
from posttrainlab.label.mc import STEP_SPLITS, prefix_text


@pytest.fixture(scope="module")
def tokenizer(smollm2):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2)


def test_trailing_whitespace_is_the_trap(tokenizer):
    """Alone, a paragraph break at the end is one token; before the next step it is two."""
    alone = tokenizer("15.\n\n", add_special_tokens=False)["input_ids"]
    joined = tokenizer("15.\n\nStep 2", add_special_tokens=False)["input_ids"]
    assert joined[: len(alone)] != alone
    assert encode_prefix(tokenizer, "15.\n\n") == joined[: len(encode_prefix(tokenizer, "15.\n\n"))]


@pytest.mark.parametrize("split", sorted(STEP_SPLITS))
def test_prefix_tokens_plus_the_rest_are_the_tokens_of_the_joined_text(split, tokenizer, arith_dir):
    from posttrainlab.data.loading import load_split

    sep = STEP_SPLITS[split]
    checked = 0
    for record in load_split(str(arith_dir), "sft_train", limit=60):
        steps = [s for s in record["response"].split("\n") if s.strip()]
        prompt = [{"role": "user", "content": record["prompt"]}]
        whole = render_prompt(tokenizer, prompt)[0] + sep.join(steps)
        expected = tokenizer(whole, add_special_tokens=False)["input_ids"]
        for i in range(len(steps) - 1):
            ids = encode_request(tokenizer, PrefixRequest(prompt, prefix_text(steps, i, split)))
            rest = tokenizer(sep.join(steps[i + 1 :]), add_special_tokens=False)["input_ids"]
            assert ids + rest == expected, (split, record["id"], i)
            checked += 1
    assert checked > 50
    assert encode_prompt(tokenizer, prompt) == expected[: len(encode_prompt(tokenizer, prompt))]
