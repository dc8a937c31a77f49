"""Fixtures for trainer tests: a small arith-v1 build and a tiny (untrained) model, made once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrainlab.models.tiny import TinyModelConfig

SMALL = TinyModelConfig(
    hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2
)


@pytest.fixture(scope="session")
def arith_dir(tmp_path_factory) -> Path:
    from posttrainlab.data.arith.release import prepare

    out = tmp_path_factory.mktemp("data") / "arith-v1"
    prepare(out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from posttrainlab.models.tiny import init_model

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "tiny")
