"""``posttrain eval policy`` on the real model: its chat template, greedy outputs as ``model.generate``, eos, bf16."""

from __future__ import annotations

import json

import pytest

from cli_capture import cli

PROMPTS = [
    ("p0", "Say hello in one word.", 1),
    ("p1", 'Solve the following problem. Give the result as "Answer: <integer>".\n\nWhat is 906 + 37?', 943),
    ("p2", "What is 12 * 3?", 36),
]


@pytest.fixture(scope="module")
def split_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("real") / "prompts.jsonl"
    rows = [{"id": i, "category": "addition", "prompt": p, "answer": a} for i, p, a in PROMPTS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _hf_greedy(folder, prompts, max_new_tokens, dtype="float32"):
    """Reference: one prompt at a time, no padding, the chat template with the assistant turn opened."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    texts, ended = [], []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, top_k=None, top_p=None)
        new = out[0, ids["input_ids"].shape[1] :].tolist()
        ended.append(tokenizer.eos_token_id in new)
        if tokenizer.eos_token_id in new:
            new = new[: new.index(tokenizer.eos_token_id)]
        texts.append(tokenizer.decode(new, skip_special_tokens=True))
    return texts, ended


def test_greedy_responses_equal_model_generate_under_the_chat_template(smollm2, split_file, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["eval", "policy", "--model", str(smollm2), "--data", str(split_file), "--out", str(out)]
    code, _, err = cli(capsys, *args, "--max-new-tokens", "40", "--preference-split", "none", "--no-progress")
    assert code == 0, err
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    expected, ended = _hf_greedy(smollm2, [p for _, p, _ in PROMPTS], 40)
    assert [s["response"] for s in samples] == expected
    assert ended[0], "the one-word reply should end with the model's eos (<|im_end|>) well inside 40 tokens"
    assert "<|im_end|>" not in samples[0]["response"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["accuracy"]["n"] == 3


def test_bfloat16_runs_on_cpu_and_matches_bf16_generate(smollm2, split_file, tmp_path, capsys):
    """One prompt a batch: in bfloat16, left padding changes the rounding (fp32 batches match, test above)."""
    out = tmp_path / "bf16"
    args = ["eval", "policy", "--model", str(smollm2), "--data", str(split_file), "--out", str(out), "--limit", "2"]
    args += ["--preference-split", "none"]
    code, _, err = cli(capsys, *args, "--dtype", "bfloat16", "--max-new-tokens", "16", "--batch-size", "1")
    assert code == 0, err
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    expected, _ = _hf_greedy(smollm2, [p for _, p, _ in PROMPTS[:2]], 16, dtype="bfloat16")
    assert [s["response"] for s in samples] == expected
