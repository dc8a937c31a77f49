"""``posttrain serve --model`` on the real model: its chat template, ``add_generation_prompt`` and
``continue_final_message`` as transformers' ``apply_chat_template`` defines them, exact ``usage``, and the SHARP
pipeline's ``generate`` → ``annotate`` against it."""

from __future__ import annotations

import json

import openai
import pytest
from test_cli_serve import serving

from cli_capture import cli

QUESTION = "What is 906 + 37? End with a line 'Answer: <integer>'."


@pytest.fixture(scope="module")
def hf(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(smollm2).eval(), AutoTokenizer.from_pretrained(smollm2)


def _hf_continue(hf, messages, max_new_tokens, **template):
    """HF's greedy new tokens after ``apply_chat_template(messages, **template)`` (cut after the eos)."""
    import torch

    model, tokenizer = hf
    ids = tokenizer.apply_chat_template(messages, return_tensors="pt", return_dict=True, **template)
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, top_k=None, top_p=None)
    new = out[0, ids["input_ids"].shape[1] :].tolist()
    if tokenizer.eos_token_id in new:
        new = new[: new.index(tokenizer.eos_token_id) + 1]
    return ids["input_ids"].shape[1], new


def test_chat_and_continued_assistant_turn_match_hf_and_usage_is_exact(smollm2, hf, monkeypatch):
    _, tokenizer = hf
    with serving(monkeypatch, "--model", str(smollm2)) as (url, _app):
        client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        name = client.models.list().data[0].id
        user = [{"role": "user", "content": QUESTION}]
        reply = client.chat.completions.create(model=name, messages=user, max_tokens=24, temperature=0)
        n_prompt, new = _hf_continue(hf, user, 24, add_generation_prompt=True)
        assert reply.choices[0].message.content == tokenizer.decode(new, skip_special_tokens=True)
        assert reply.usage.prompt_tokens == n_prompt and reply.usage.completion_tokens == len(new)

        partial = [*user, {"role": "assistant", "content": "906 + 37 = 9"}]
        extra = {"continue_final_message": True, "add_generation_prompt": False}
        reply = client.chat.completions.create(
            model=name, messages=partial, max_tokens=12, temperature=0, extra_body=extra
        )
        n_prompt, new = _hf_continue(hf, partial, 12, continue_final_message=True)
        assert reply.choices[0].message.content == tokenizer.decode(new, skip_special_tokens=True)
        assert reply.usage.prompt_tokens == n_prompt and reply.usage.completion_tokens == len(new)
        # a new turn is something else: the prefix really was continued
        n_new, restarted = _hf_continue(hf, partial, 12, add_generation_prompt=True)
        assert restarted != new


def test_generate_then_annotate_against_the_served_real_model(smollm2, arith_dir, monkeypatch, tmp_path, capsys):
    gen = tmp_path / "gen"
    code, _, err = cli(
        capsys,
        *("generate", "--model", str(smollm2), "--data", f"{arith_dir}:test", "--out", str(gen)),
        *("--k", "2", "--limit", "2", "--max-new-tokens", "24"),
    )
    assert code == 0, err
    rows = [json.loads(line) for line in (gen / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(isinstance(r["steps"], list) for r in rows)
    with serving(monkeypatch, "--model", str(smollm2)) as (url, _app):
        name = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0).models.list().data[0].id
        out = tmp_path / "annotated"
        code, stdout, err = cli(
            capsys,
            *("annotate", "--model-name", name, "--model-url", url, "--data", str(gen), "--out", str(out)),
            *("--max-attempts", "1", "--max-tokens", "32", "--num-threads", "2"),
        )
    assert code == 0, err
    records = [json.loads(line) for line in (out / "annotations.jsonl").read_text().splitlines()]
    assert len(records) == 4 and "annotated 4 rows now" in stdout
