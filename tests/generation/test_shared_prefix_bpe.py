"""The BPE boundary rule of the shared-prefix sampler (``encode_prefix``), on the real model's tokenizer."""

from __future__ import annotations

import pytest

from posttrainlab.data.step_split import MC_STEP_SPLITS, STEP_SPLITS
from posttrainlab.generation.shared_prefix import PrefixRequest, encode_prefix, encode_request
from posttrainlab.generation.transformers_backend import encode_prompt, render_prompt
from posttrainlab.label.mc import prefix_text


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


@pytest.mark.parametrize("split", sorted(MC_STEP_SPLITS))
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


def test_label_mc_runs_on_the_real_model(smollm2, arith_dir, tmp_path, capsys):
    """``posttrain label mc`` end to end on SmolLM2: values in [0, 1], every row measured or inferred, exact labels."""
    import pandas as pd

    from cli_capture import cli

    out = tmp_path / "mc"
    args = ["label", "mc", "--policy", str(smollm2), "--data", f"{arith_dir}:sft_train", "--n", "2", "--out", str(out)]
    code, _, err = cli(capsys, *args, "--limit", "2", "--val-problems", "0", "--max-new-tokens", "16", "--exact-check")
    assert code == 0, err
    rows = pd.read_parquet(out / "train.parquet")
    assert len(rows) > 0 and rows["reward"].between(0, 1).all()
    assert set(rows["value_source"]) <= {"measured", "inferred"}
