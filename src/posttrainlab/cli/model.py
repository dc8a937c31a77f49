"""``posttrain model …``: create the tiny model from a config, pretrain the tiny base."""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import OUT, lock_out, out_folder
from posttrainlab.run_layout import PRETRAIN_JSON

model_app = typer.Typer(help="Create and pretrain the tiny model.", no_args_is_help=True)


@model_app.command("init")
def init(
    config: Path = typer.Option(Path("configs/models/tiny.yaml"), help="Model shape (TinyModelConfig YAML)."),
    out: Path = typer.Option(
        ..., *OUT, parser=out_folder, help="Output folder (Hugging Face format): new, empty or an earlier init output."
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. hidden_size=128."),
) -> None:
    """Initialise the tiny causal LM and its byte-level tokenizer from a config; save in HF format."""
    from posttrainlab.config import load_config
    from posttrainlab.models.tiny import TinyModelConfig, count_parameters, init_model

    cfg = load_config(TinyModelConfig, config, overrides)
    with lock_out(out, what="model folder"):
        path = init_model(cfg, out)
    from transformers import AutoModelForCausalLM

    n = count_parameters(AutoModelForCausalLM.from_pretrained(path))
    typer.echo(f"{path}: {cfg.architecture} model, {n:,} parameters")


@model_app.command("pretrain")
def pretrain(
    config: Path = typer.Option(Path("configs/models/tiny-base.yaml"), help="PretrainConfig YAML."),
    out: Path = typer.Option(
        None,
        *OUT,
        parser=out_folder,
        help="Output folder (new, empty or an earlier base); default: the cache, $POSTTRAIN_CACHE/base/<hash>.",
    ),
    overrides: list[str] = typer.Argument(None, help="key=value overrides, e.g. train.epochs=1."),
) -> None:
    """Pretrain the tiny base on a contamination-checked synthetic arithmetic corpus (cached by config hash)."""
    import json

    from posttrainlab.config import load_config
    from posttrainlab.train.pretrain import PretrainConfig, base_cache_path, is_cached
    from posttrainlab.train.pretrain import pretrain as run

    cfg = load_config(PretrainConfig, config, overrides)
    out = out or base_cache_path(cfg)
    with lock_out(out, what="model folder"):
        if is_cached(out, cfg):
            typer.echo(f"{out}: base for this config already built; reusing it")
            return
        run(cfg, out)
    meta = json.loads((out / PRETRAIN_JSON).read_text())
    acc = ", ".join(f"{op} {v:.0%}" for op, v in meta["heldout_accuracy"].items())
    typer.echo(
        f"{out}: {meta['parameters']:,} parameters; held-out equation accuracy {acc}; "
        f"contamination overlap {meta['contamination']['overlap']}"
    )
