"""Fixtures for PRM tests: a tiny Qwen2.5-Math-PRM layout, made once per session (tiny_model: tests/conftest.py)."""

from __future__ import annotations

import json

import pytest
import torch

from posttrainlab.models.tokenizer import build_tokenizer

QWEN = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 2, "max_position_embeddings": 512}  # fmt: skip


@pytest.fixture(scope="session")
def qwen_prm(tmp_path_factory):
    """Layout (b): Qwen2.5-Math-PRM's config and state dict (``model.*``, ``score.0``, ``score.2``), by hand."""
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2Model

    out = tmp_path_factory.mktemp("qwen") / "qwen-prm"
    out.mkdir()
    tok = build_tokenizer()
    config = Qwen2Config(vocab_size=len(tok), pad_token_id=tok.pad_token_id, **QWEN)
    torch.manual_seed(2)
    state = {f"model.{k}": v for k, v in Qwen2Model(config).state_dict().items()}
    h = QWEN["hidden_size"]
    state |= {"score.0.weight": torch.randn(h, h) / h**0.5, "score.0.bias": torch.randn(h) * 0.1,
              "score.2.weight": torch.randn(2, h), "score.2.bias": torch.randn(2) * 0.1}  # fmt: skip
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"), metadata={"format": "pt"})
    data = config.to_dict() | {
        "architectures": ["Qwen2ForProcessRewardModel"],
        "auto_map": {"AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel"},  # remote code, never run
    }
    (out / "config.json").write_text(json.dumps(data))
    tok.save_pretrained(out)
    return out, state
