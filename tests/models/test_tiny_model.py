"""The tiny model: init from a config, save in HF format, load back with the Auto classes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.models.tiny import TinyModelConfig, count_parameters, init_model
from posttrainlab.models.tokenizer import EOS, PAD, STEP
from tiny_models import SMALL

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return init_model(SMALL, tmp_path_factory.mktemp("m") / "tiny")


def test_saved_in_hf_format_with_safetensors_only(saved):
    names = {p.name for p in saved.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert not any(n.endswith((".bin", ".pt", ".pkl")) for n in names)


def test_auto_classes_load_it_back_with_identical_weights(saved):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from posttrainlab.models.tiny import build_model

    model = AutoModelForCausalLM.from_pretrained(saved)
    fresh, _ = build_model(SMALL)  # same seed, same weights
    for (name, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    tok = AutoTokenizer.from_pretrained(saved)
    assert tok.eos_token == EOS and tok.pad_token == PAD and STEP in tok.get_vocab()
    assert model.config.eos_token_id == tok.eos_token_id


def test_byte_level_tokenizer_round_trips_and_keeps_digits_single(saved):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(saved)
    text = "349 - 209 = 140\nAnswer: 140 é ✓"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok("1234", add_special_tokens=False)["input_ids"] == [ord(c) for c in "1234"]


def test_chat_template(saved):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(saved)
    msgs = [{"role": "user", "content": "What is 2 + 2?"}]
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_default_shape_is_about_2m_parameters():
    from posttrainlab.models.tiny import build_model

    model, _ = build_model(TinyModelConfig())
    assert 1.9e6 < count_parameters(model) < 2.0e6


def test_config_files_state_the_dataclass_defaults():
    from posttrainlab.train.pretrain import PretrainConfig

    assert load_config(TinyModelConfig, ROOT / "configs/models/tiny.yaml") == TinyModelConfig()
    assert load_config(PretrainConfig, ROOT / "configs/models/tiny-base.yaml") == PretrainConfig()


def test_cli_init_and_bad_key(tmp_path):
    cmd = [sys.executable, "-m", "posttrainlab", "model", "init", "--config", str(ROOT / "configs/models/tiny.yaml")]
    ok = subprocess.run([*cmd, "--out", str(tmp_path / "m"), "hidden_size=32", "intermediate_size=64",
                         "num_hidden_layers=1", "num_attention_heads=2", "num_key_value_heads=2"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "parameters" in ok.stdout
    bad = subprocess.run([*cmd, "--out", str(tmp_path / "n"), "hidden_sise=32"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "posttrain: error: override 'hidden_sise=32': Key 'hidden_sise' not in 'TinyModelConfig'."
        " Did you mean: 'hidden_size'?"
    ]
    assert not (tmp_path / "n").exists()
