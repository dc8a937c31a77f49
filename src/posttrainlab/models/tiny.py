"""The embedded default model: a small Qwen2- or Llama-style causal LM initialised from a config.

``init_model(config, out)`` writes a Hugging Face folder (``config.json``, ``model.safetensors``,
``tokenizer.json``, chat template, generation config) that ``AutoModelForCausalLM`` and
``AutoTokenizer`` load like any Hub model. The defaults (3 layers, 224 wide) give ~2.0M parameters:
on 2 CPU cores this shape reached the same arith-v1 dev accuracy after pretraining + SFT as the
4-layer, 256-wide 3.4M model at ~56% of its compute (docs/policy-lab.md, "Choosing the base").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

from posttrainlab.errors import BadInput

INIT = "model init output"  # names an earlier output of `posttrain model init` in a refusal


@dataclass
class TinyModelConfig:
    """Shape of the tiny causal LM (configs/models/tiny.yaml)."""

    architecture: str = "qwen2"  # qwen2 | llama
    hidden_size: int = 224
    intermediate_size: int = 640
    num_hidden_layers: int = 3
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = 1024
    rope_theta: float = 10000.0
    seed: int = 0


def hf_config(cfg: TinyModelConfig, tokenizer):
    """The transformers config for ``cfg`` with the tokenizer's vocabulary and special ids."""
    from transformers import LlamaConfig, Qwen2Config

    classes = {"qwen2": Qwen2Config, "llama": LlamaConfig}
    if cfg.architecture not in classes:
        raise BadInput(f"architecture {cfg.architecture!r}: choose one of {', '.join(classes)}")
    shape = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name not in ("architecture", "seed")}
    return classes[cfg.architecture](
        vocab_size=len(tokenizer),
        **shape,  # hidden_size ... rope_theta: the transformers config's own names
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def build_model(cfg: TinyModelConfig):
    """A freshly initialised (seeded) model and its tokenizer, in memory."""
    import torch
    from transformers import AutoModelForCausalLM

    from posttrainlab.models.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(cfg.max_position_embeddings)
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_config(hf_config(cfg, tokenizer), dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.do_sample = False
    return model, tokenizer


def save_pretrained(model, tokenizer, out: str | os.PathLike, *, what: str = INIT, finish=None) -> Path:
    """Save model (safetensors) and tokenizer into ``out`` atomically (staging folder, then rename).

    ``finish(folder)``, when given, adds files to the staged folder (pretrain's metadata). ``out`` is
    replaced only when every file in it is one this save wrote too (an earlier output of ``what``):
    transformers decides the file names, so they are read from the staged folder, not listed here.
    """
    from posttrainlab.data.atomic import check_output_folder, folder_files, staging_dir

    out = Path(out)
    with staging_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if finish is not None:
            finish(tmp)
        check_output_folder(out, set(folder_files(tmp)).__contains__, what=what)
    return out


def init_model(cfg: TinyModelConfig, out: str | os.PathLike) -> Path:
    """Initialise the tiny model from ``cfg`` and save it in Hugging Face format."""
    from posttrainlab.data.atomic import check_output_folder

    earlier = (Path(out) / "config.json").is_file()  # a model folder: the save checks each of its files
    check_output_folder(out, lambda rel: earlier, what=INIT)  # anything else is refused before the model is built
    model, tokenizer = build_model(cfg)
    return save_pretrained(model, tokenizer, out)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())
