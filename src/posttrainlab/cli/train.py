"""``posttrain train {sft,dpo,grpo,prm} --config FILE.yaml [key=value ...]``."""

from __future__ import annotations

from pathlib import Path

import typer

train_app = typer.Typer(
    help="Post-train a policy with SFT, DPO or GRPO (on TRL), or train a process reward model.", no_args_is_help=True
)

CONFIG = typer.Option(..., "--config", help="Recipe YAML (configs/arith/*.yaml).")
OVERRIDES = typer.Argument(None, help="key=value overrides, e.g. optim.epochs=2 dataset.limit=1000.")


def _run(method: str, config: Path, overrides: list[str] | None) -> None:
    from posttrainlab.config import load_config, save_config
    from posttrainlab.train.recipes import RECIPES

    recipe = load_config(RECIPES[method], config, overrides)
    if method == "sft":
        from posttrainlab.train.sft import train_sft as train
    elif method == "dpo":
        from posttrainlab.train.dpo import train_dpo as train
    else:
        from posttrainlab.train.grpo import train_grpo as train
    Path(recipe.output_dir).mkdir(parents=True, exist_ok=True)
    save_config(recipe, Path(recipe.output_dir) / "recipe.yaml")
    out = train(recipe)
    typer.echo(f"{method}: model saved to {out}")


@train_app.command("sft")
def sft(config: Path = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """Supervised fine-tuning, loss on the completion only."""
    _run("sft", config, overrides)


@train_app.command("dpo")
def dpo(config: Path = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """Direct preference optimisation against a frozen reference."""
    _run("dpo", config, overrides)


@train_app.command("grpo")
def grpo(config: Path = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """GRPO with arith-grader rewards (correctness + weighted format)."""
    _run("grpo", config, overrides)


@train_app.command("prm")
def prm(config: Path = CONFIG, overrides: list[str] = OVERRIDES) -> None:
    """Process reward model on transformers.Trainer (configs/prm/*.yaml; docs/prm.md)."""
    from posttrainlab.config import load_config
    from posttrainlab.train.prm import train_prm
    from posttrainlab.train.prm_recipe import PRMRecipe

    out = train_prm(load_config(PRMRecipe, config, overrides))
    typer.echo(f"prm: model saved to {out}")
