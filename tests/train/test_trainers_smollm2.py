"""SFT, DPO and GRPO on the real model (SmolLM2-135M-Instruct: BPE, its own chat template, tied embeddings).

A few steps each, full fine-tuning: the loss is finite, the weights move, and SFT's loss covers the assistant's
completion only under the model's own chat template.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cli_capture import cli

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "arith"
PROBE = "model.layers.0.self_attn.q_proj.weight"


def _tensor(folder: Path, name: str):
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        return f.get_tensor(name)


def _train(capsys, method: str, model: Path, out: Path, arith_dir: Path, *extra: str) -> dict:
    code, _, err = cli(
        capsys,
        "train",
        method,
        "--config",
        str(CONFIGS / f"{method}.yaml"),
        f"model={model}",
        f"output_dir={out}",
        f"dataset.path={arith_dir}",
        "optim.max_steps=2",
        "optim.logging_steps=1",
        "optim.save_steps=100",
        *extra,
    )
    assert code == 0, err
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    return {"log": log, "summary": json.loads((out / "train_summary.json").read_text())}


def _moved(before: Path, after: Path) -> float:
    return float((_tensor(after, PROBE) - _tensor(before, PROBE)).abs().max())


def test_sft_loss_covers_only_the_assistant_completion_under_the_chat_template(smollm2, arith_dir, tmp_path):
    from posttrainlab.config import load_config
    from posttrainlab.train.recipes import SFTRecipe
    from posttrainlab.train.sft import build_trainer

    recipe = load_config(
        SFTRecipe,
        CONFIGS / "sft.yaml",
        [f"model={smollm2}", f"output_dir={tmp_path / 'sft'}", f"dataset.path={arith_dir}", "dataset.limit=2"],
    )
    records = [{"prompt": "What is 906 + 37?", "response": "906 + 37 = 943\nAnswer: 943"}]
    trainer, _ = build_trainer(recipe, records)
    tokenizer = trainer.processing_class
    batch = trainer.data_collator([trainer.train_dataset[0]])  # what the loss sees
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    prompt_text = tokenizer.apply_chat_template(
        [{"role": "user", "content": records[0]["prompt"]}], tokenize=False, add_generation_prompt=True
    )
    assert "You are a helpful AI assistant named SmolLM" in prompt_text  # the model's own template
    first = next(i for i, label in enumerate(labels) if label != -100)
    assert tokenizer.decode(ids[:first]) == prompt_text  # every prompt token (system, user, assistant header) masked
    assert labels[first:] == ids[first:]  # the completion is one contiguous run to the end, all in the loss
    assert tokenizer.decode(ids[first:]) == records[0]["response"] + "<|im_end|>\n"


def test_sft_a_few_steps_moves_the_weights(smollm2, arith_dir, tmp_path, capsys):
    out = tmp_path / "sft"
    run = _train(capsys, "sft", smollm2, out, arith_dir, "dataset.limit=4", "optim.batch_size=2", "optim.epochs=1")
    losses = [r["loss"] for r in run["log"] if "loss" in r]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert run["summary"]["global_step"] == 2
    assert _moved(smollm2, out) > 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()


def test_dpo_a_few_steps_moves_the_weights(smollm2, arith_dir, tmp_path, capsys):
    out = tmp_path / "dpo"
    run = _train(capsys, "dpo", smollm2, out, arith_dir, "dataset.limit=4", "optim.batch_size=2")
    losses = [r["loss"] for r in run["log"] if "loss" in r]
    assert losses and all(math.isfinite(v) for v in losses)
    assert _moved(smollm2, out) > 0


@pytest.mark.slow
def test_grpo_a_few_steps_moves_the_weights(smollm2, arith_dir, tmp_path, capsys):
    """Zero-shot the model rarely writes an ``Answer:`` line, so GRPO's advantages (reward minus group mean) are
    mostly 0; prompts it answers right about one time in six give groups with mixed rewards, hence a gradient."""
    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": f"p{i}", "category": "addition", "prompt": 'Write "Answer: 7".', "answer": 7} for i in range(4)]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "grpo"
    run = _train(
        capsys,
        "grpo",
        smollm2,
        out,
        prompts,
        "optim.batch_size=6",
        "num_generations=6",
        "max_completion_length=8",
        "optim.learning_rate=0.0001",
    )
    steps = [r for r in run["log"] if "loss" in r]
    assert len(steps) == 2 and all(math.isfinite(r["loss"]) for r in steps)
    assert any(r["frac_reward_zero_std"] < 1 for r in steps)  # some group had mixed rewards
    assert _moved(smollm2, out) > 0
