"""A LoRA run of SFT, DPO or GRPO leaves a plain model folder (adapter merged), which every later command loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trainers import ROOT, changed, weights

from posttrainlab.config import load_config
from posttrainlab.train.recipes import RECIPES

LORA = ["lora.enabled=true", "lora.r=4", "lora.dropout=0.0", "lora.target_modules=all-linear"]


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_lora_run_saves_a_merged_plain_model(method, arith_dir, tiny_model, tmp_path):
    from posttrainlab.models.loading import load_causal_lm
    from posttrainlab.train.dpo import train_dpo
    from posttrainlab.train.sft import train_sft

    out = tmp_path / method
    recipe = load_config(
        RECIPES[method],
        ROOT / f"configs/arith/{method}.yaml",
        [f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=8",
         "optim.max_steps=2", "optim.batch_size=4", "optim.learning_rate=0.01", *LORA],
    )  # fmt: skip
    (train_sft if method == "sft" else train_dpo)(recipe)
    assert not (out / "adapter_config.json").exists() and not (out / "adapter_model.safetensors").exists()
    assert (out / "config.json").is_file()
    before, after = weights(tiny_model), weights(out)
    assert set(after) == set(before)  # the base's own tensor names: no lora_A / lora_B left
    assert changed(before, after) > 0
    model, _ = load_causal_lm(str(Path(out)))
    assert not hasattr(model, "peft_config")
