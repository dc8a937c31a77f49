"""``posttrain train {sft,dpo,grpo,rft,prm,orm} --config FILE.yaml [--resume | --overwrite] [--print-config] [k=v]``.

``train orm`` is ``train prm`` (a ``kind: prm`` recipe, the PRM trainer) that refuses a recipe whose ``supervision``
is not an outcome reward model's (``outcome`` | ``outcome-last``; configs/prm/orm.yaml).

A run whose output_dir holds an earlier run resumes from its last checkpoint and says so in one line. When the
earlier run's ``recipe.yaml`` differs in more than its length (``optim.max_steps``, ``optim.epochs``; see
``train.common.RESUMABLE``), the run is refused unless ``--resume`` (continue with the new recipe) or
``--overwrite`` (start afresh) says which is meant (docs/policy-lab.md, "Run folders"). ``--print-config``
prints the recipe as it would run (YAML, then ``key=value`` overrides) and exits.

A recipe file records its kind (``kind: sft`` ...; ``config.load_config``): ``train dpo --config
configs/arith/sft.yaml`` is refused in one line, as every SFT key is also a DPO field. Everything the trainers check
without torch (the run folder, choices, model folders, data) is checked before the trainer module is imported
(``preflight``), so a bad flag, key, path or kind is refused in well under a second.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from posttrainlab.cli.options import choice
from posttrainlab.errors import BadInput
from posttrainlab.generation.factory import POLICY_BACKENDS
from posttrainlab.train.prm_recipe import FORMATS, HEADS, OUTCOME_SUPERVISION, SUPERVISION

train_app = typer.Typer(
    help="Post-train a policy with SFT, DPO, GRPO or RFT (on TRL), or train a process reward model.",
    no_args_is_help=True,
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
SEEDS = typer.Option(
    1,
    "--seeds",
    min=1,
    help="Train K times: output_dir, then output_dir-s1 ... with optim.seed + 1 ... (train.recipes.seeded).",
)
#: the methods that sample from their starting model before training (``--backend``)
SAMPLING_METHODS = ("dpo", "grpo")
PAIRS_BACKEND = typer.Option(
    "transformers",
    "--backend",
    help="What samples DPO's on-policy pairs (preference.source=policy) and GRPO's prompt filter: transformers, "
    "vllm, or vllm-server (a vLLM server from `make vllm`'s venv, stopped once they are sampled; docs/vllm.md).",
)
VERBOSE = typer.Option(
    False, "--verbose", help="Show the libraries' progress bars and notes too (datasets, transformers, TRL)."
)


def preflight(method: str, recipe, how: str) -> None:
    """The trainers' own checks that need no torch, run before the trainer module imports it: the recipe's values
    and the run folder (``train.common.check_run``, which writes nothing), the model folders, the data.

    A typo in a path or a choice is refused in a fraction of a second instead of after the ~2-8 s import of
    torch/TRL. The trainer repeats the checks; reading arith-v1's split twice costs milliseconds. The arith-v1 split
    is read with ``train.common.load_records`` itself, so a missing default ``data/arith-v1`` is built here, as the
    trainer would build it, and a missing folder anywhere else is refused with the trainer's message; a PRM's data
    file (read by a torch module) is only checked to exist; Hub paths are left to the trainer.
    """
    from posttrainlab.cli.options import check_data
    from posttrainlab.train.common import check_model, check_run, load_records

    check_run(recipe, how)  # the recipe's values (config.check_settings), then the run folder
    if recipe.trainer_args:  # checking the keys needs the trainer's config class (TRL: torch); paid only when set
        check_trainer_args(method, recipe)
    check_model(recipe.model)
    check_model(getattr(recipe, "ref_model", None))
    if recipe.dataset.path.startswith("hf://"):
        return
    if method == "prm":
        check_data(recipe.dataset.path, "dataset.path")
    else:
        load_records(recipe.dataset)


def check_trainer_args(method: str, recipe) -> None:
    """``trainer_args`` keys the config class lacks, or that a recipe field sets: one line (``trainer_kwargs``).

    The config class is the trainer module's own (``posttrainlab.train.<method>.config_class``)."""
    from posttrainlab.train.common import trainer_kwargs

    trainer = importlib.import_module(f"posttrainlab.train.{method}")
    trainer_kwargs(trainer.config_class(), recipe, {})


def _run(method: str, config: Path, overrides: list[str] | None, resume: bool, overwrite: bool, show: bool,
         verbose: bool = False, seeds: int = 1, backend: str = "transformers") -> None:  # fmt: skip
    from contextlib import ExitStack

    from posttrainlab.config import load_config, to_yaml
    from posttrainlab.writer_lock import writer_lock

    how = existing(resume, overwrite)
    if backend != "transformers" and method not in SAMPLING_METHODS:
        raise BadInput(f"--backend {backend}: train {method} samples nothing (it is for {', '.join(SAMPLING_METHODS)})")
    verb, method = method, TRAINER.get(method, method)  # train orm: the PRM trainer and its recipe
    if method == "prm":
        from posttrainlab.train.prm_recipe import PRMRecipe as recipe_class
    else:
        from posttrainlab.train.recipes import RECIPES

        recipe_class = RECIPES[method]
    recipe = load_config(recipe_class, config, overrides, kind=method)
    if verb == "orm" and recipe.supervision not in OUTCOME_SUPERVISION:
        raise BadInput(f"train orm: supervision {recipe.supervision} trains a PRM; an ORM needs supervision "
                       f"{' or '.join(OUTCOME_SUPERVISION)} (configs/prm/orm.yaml or supervision=outcome)")  # fmt: skip
    if show:
        typer.echo(f"kind: {method}\n" + to_yaml(recipe), nl=False)
        return
    from posttrainlab.train.recipes import seeded

    runs = [seeded(recipe, k) for k in range(seeds)]
    with ExitStack() as locks:  # one writer per run folder (issue #42): a second `train` on it is refused at once
        for run in runs:
            locks.enter_context(writer_lock(run.output_dir, what="training run folder"))
        _train(method, verb, recipe, runs, how, verbose, seeds, backend)


def _train(method: str, verb: str, recipe, runs: list, how: str, verbose: bool, seeds: int, backend: str) -> None:
    """Check each run, then train them in order (the writer locks held)."""
    from posttrainlab.progress import quiet_libraries

    for run in runs:
        preflight(method, run, how)
    quiet_libraries(verbose)
    train = getattr(importlib.import_module(f"posttrainlab.train.{method}"), f"train_{method}")
    from posttrainlab.generation.factory import policy_backend
    from posttrainlab.train.common import resolve_model

    # what --backend samples: DPO's on-policy pairs, GRPO's prompt filter (each from the recipe's starting model)
    sampling = getattr(recipe, "preference", None) or getattr(recipe, "prompt_filter", None)
    policy = resolve_model(recipe.model) if backend != "transformers" else recipe.model
    with policy_backend(policy, backend, batch_size=getattr(sampling, "batch_size", 32),
                        trust_remote_code=recipe.trust_remote_code) as sampler:  # fmt: skip
        for k, run in enumerate(runs):
            out = train(run, existing=how, **({} if sampler is None else {"backend": sampler}))  # writes recipe.yaml
            typer.echo(f"{verb}: model saved to {out}" + (f" (seed {k + 1}/{seeds}, optim.seed {run.optim.seed})"
                                                            if seeds > 1 else ""))  # fmt: skip
            if method == "grpo":  # reward_log.jsonl (and the probe's) read for hacking, as the report does
                from posttrainlab.report.hacking import findings

                for line in findings(out):
                    typer.echo(f"{verb}: reward hacking: {line}")


PRM_HELP = (
    "Process reward model on transformers.Trainer (configs/prm/*.yaml; docs/prm.md). Recipe choices: "
    f"head {' | '.join(HEADS)}; supervision {' | '.join(SUPERVISION)}; dataset.format {' | '.join(FORMATS)}."
)
#: each verb's help; ``posttrain train sft`` runs ``posttrainlab.train.sft.train_sft``, and so for each method
VERBS = {
    "sft": "Supervised fine-tuning, loss on the completion only.",
    "dpo": "Direct preference optimisation against a frozen reference (arith-v1's pairs, or sampled: "
    "preference.source).",
    "grpo": "GRPO with arith-grader rewards (correctness + weighted format).",
    "rft": "Rejection-sampling fine-tuning (expert iteration): keep the policy's right answers (or exactly right "
    "steps).",
    "prm": PRM_HELP,
    "orm": "Outcome reward model: train prm with outcome labels (supervision outcome | outcome-last; "
    "configs/prm/orm.yaml; docs/process-vs-outcome.md), scored by its last step wherever a PRM is taken.",
}
#: verbs that run another method's trainer and recipe kind
TRAINER = {"orm": "prm"}


def _verb(method: str) -> None:
    """Add ``posttrain train METHOD``: the same flags for every method."""

    def verb(config: Path = CONFIG, overrides: list[str] = OVERRIDES, resume: bool = RESUME,
             overwrite: bool = OVERWRITE, print_config: bool = PRINT, verbose: bool = VERBOSE,
             seeds: int = SEEDS, backend: choice(POLICY_BACKENDS) = PAIRS_BACKEND):  # fmt: skip
        _run(method, config, overrides, resume, overwrite, print_config, verbose, seeds, backend)

    train_app.command(method, help=VERBS[method])(verb)


for _method in VERBS:
    _verb(_method)
