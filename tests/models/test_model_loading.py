"""Loading any HF causal LM: the tiny model's round trip, one-line failures, no unpickling, Hub ids offline.

Nothing here reaches the internet: the "online" Hub is ``tests/fakehub.py`` (which has no models, so
it answers 404), the offline cases set ``HF_HUB_OFFLINE`` or point ``HF_ENDPOINT`` at a closed port.
"""

from __future__ import annotations

import shutil
import socket

import pytest

from posttrainlab.errors import BadInput, HubUnavailable
from posttrainlab.models.loading import load_causal_lm, prepare_tokenizer

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    return init_model(TinyModelConfig(**TINY), tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture()
def hub_env(tmp_path, monkeypatch):
    """A private HF cache, no endpoint/offline/token settings, no telemetry (as tests/data/test_hub.py)."""
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for var in ("HF_ENDPOINT", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_round_trip_matches_the_in_memory_model(tiny):
    import torch

    from posttrainlab.models.tiny import TinyModelConfig, build_model

    model, tok = load_causal_lm(tiny)
    fresh, _ = build_model(TinyModelConfig(**TINY))
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    loaded = dict(model.named_parameters())
    for name, p in fresh.named_parameters():
        assert torch.equal(p, loaded[name]), name
    assert tok.padding_side == "left" and tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>"
    assert model.generation_config.pad_token_id == tok.pad_token_id


def test_dtype(tiny):
    import torch

    model, _ = load_causal_lm(str(tiny), dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(BadInput, match="dtype 'float8'"):
        load_causal_lm(tiny, dtype="float8")


def test_missing_folder_is_one_line(tmp_path):
    for path in [tmp_path / "missing", "no-such-model-here"]:
        with pytest.raises(BadInput, match="no such model folder") as info:
            load_causal_lm(path)
        assert "\n" not in str(info.value)


def test_folder_without_config(tmp_path):
    (tmp_path / "weights.txt").write_text("x")
    with pytest.raises(BadInput, match="no config.json"):
        load_causal_lm(tmp_path)


def test_pickle_weights_are_refused(tiny, tmp_path):
    import torch
    from safetensors.torch import load_file

    folder = tmp_path / "bin-only"
    shutil.copytree(tiny, folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with pytest.raises(BadInput, match="no safetensors weights"):
        load_causal_lm(folder)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(BadInput, match="unreadable safetensors"):
        load_causal_lm(folder)


def test_pad_token_falls_back_to_eos():
    from posttrainlab.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    tok.pad_token = None
    tok.padding_side = "right"
    prepare_tokenizer(tok)
    assert tok.pad_token == tok.eos_token and tok.padding_side == "left"


def test_hub_id_offline_is_one_line(hub_env, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable, match="HF_HUB_OFFLINE is set") as info:
        load_causal_lm("someone/some-model")
    assert "\n" not in str(info.value) and "no such model folder" in str(info.value)


def test_hub_id_unreachable_is_one_line(hub_env, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(HubUnavailable, match="cannot reach the Hugging Face Hub") as info:
        load_causal_lm("someone/some-model")
    assert "\n" not in str(info.value)


def test_hub_id_that_does_not_exist(hub_env, monkeypatch):
    from fakehub import FakeHub

    with FakeHub({}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(BadInput, match="no such model on"):
            load_causal_lm("someone/some-model")
