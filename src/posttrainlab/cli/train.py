"""``posttrain train {sft,dpo,grpo,prm} --config FILE.yaml [--resume | --overwrite] [--print-config] [key=value ...]``.

A run whose output_dir holds an earlier run resumes from its last checkpoint and says so in one line. When the
earlier run's ``recipe.yaml`` differs in more than its length (``optim.max_steps``, ``optim.epochs``; see
``train.common.RESUMABLE``), the run is refused unless ``--resume`` (continue with the new recipe) or
``--overwrite`` (start afresh) says which is meant (docs/policy-lab.md, "Run folders"). ``--print-config``
prints the recipe as it would run (YAML, then ``key=value`` overrides) and exits.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.errors import BadInput

train_app = typer.Typer(
    help="Post-train a policy with SFT, DPO or GRPO (on TRL), or train a process reward model.", no_args_is_help=True
)

CONFIG = typer.Option(
    ..., "--config", help="Recipe YAML (configs/arith/*.yaml, configs/prm/*.yaml: shipped with the package)."
)
OVERRIDES = typer.Argument(None, help="key=value overrides, e.g. optim.epochs=2 dataset.limit=1000.")
RESUME = typer.Option(
    False,
    "--resume",
    help="Resume the run in output_dir with this recipe even though its recipe.yaml differs (without a flag, only "
    "a run of the same recipe resumes; optim.max_steps, optim.epochs and logging/saving keys may change).",
)
OVERWRITE = typer.Option(
    False,
    "--overwrite",
    help="Start afresh in output_dir: the earlier run's checkpoints, train_log.jsonl and train_summary.json go first.",
)


def existing(resume: bool, overwrite: bool) -> str:
    """The ``existing=`` of the trainers (``train.common.check_run``) for the two flags."""
    if resume and overwrite:
        raise BadInput("--resume and --overwrite: pass one of them, not both")
    return "resume" if resume else "overwrite" if overwrite else "check"


PRINT = typer.Option(
    False, "--print-config", help="Print the resolved recipe as YAML and exit (nothing is loaded or written)."
)


def _run(method: str, config: Path, overrides: list[str] | None, resume: bool, overwrite: bool, show: bool) -> None:
    from posttrainlab.config import load_config, to_yaml

    how = existing(resume, overwrite)
    if method == "prm":
        from posttrainlab.train.prm_recipe import PRMRecipe as recipe_class
    else:
        from posttrainlab.train.recipes import RECIPES

        recipe_class = RECIPES[method]
    recipe = load_config(recipe_class, config, overrides)
    if show:
        typer.echo(to_yaml(recipe), nl=False)
        return
    if method == "sft":
        from posttrainlab.train.sft import train_sft as train
    elif method == "dpo":
        from posttrainlab.train.dpo import train_dpo as train
    elif method == "grpo":
        from posttrainlab.train.grpo import train_grpo as train
    else:
        from posttrainlab.train.prm import train_prm as train
    out = train(recipe, existing=how)  # writes recipe.yaml into output_dir once data and model check out
    typer.echo(f"{method}: model saved to {out}")


@train_app.command("sft")
def sft(config: Path = CONFIG, overrides: list[str] = OVERRIDES, resume: bool = RESUME, overwrite: bool = OVERWRITE,
        print_config: bool = PRINT):  # fmt: skip
    """Supervised fine-tuning, loss on the completion only."""
    _run("sft", config, overrides, resume, overwrite, print_config)


@train_app.command("dpo")
def dpo(config: Path = CONFIG, overrides: list[str] = OVERRIDES, resume: bool = RESUME, overwrite: bool = OVERWRITE,
        print_config: bool = PRINT):  # fmt: skip
    """Direct preference optimisation against a frozen reference."""
    _run("dpo", config, overrides, resume, overwrite, print_config)


@train_app.command("grpo")
def grpo(config: Path = CONFIG, overrides: list[str] = OVERRIDES, resume: bool = RESUME, overwrite: bool = OVERWRITE,
         print_config: bool = PRINT):  # fmt: skip
    """GRPO with arith-grader rewards (correctness + weighted format)."""
    _run("grpo", config, overrides, resume, overwrite, print_config)


@train_app.command("prm")
def prm(config: Path = CONFIG, overrides: list[str] = OVERRIDES, resume: bool = RESUME, overwrite: bool = OVERWRITE,
        print_config: bool = PRINT):  # fmt: skip
    """Process reward model on transformers.Trainer (configs/prm/*.yaml; docs/prm.md)."""
    _run("prm", config, overrides, resume, overwrite, print_config)
