"""Where GRPO's time goes: posttrainlab's GRPO path against TRL's own GRPOTrainer, same model, same settings.

posttrainlab's path is ``train.grpo.build_trainer`` + ``train.common.run_trainer`` (the run folder, the JSONL log, the
progress lines, TensorBoard, the summary); TRL's is a ``GRPOTrainer`` built by hand from the same ``trl.GRPOConfig``
arguments (``train.grpo.grpo_kwargs``), rows and reward functions, then ``train()`` and ``save_model()``. The model is
the tiny default shape (random init: it never stops early, so every completion is ``max_completion_length`` long).
Each trainer's methods are timed from outside: generation (``_generate``), rewards (``_calculate_rewards``), the rest
of scoring (the reference and old-policy log-prob passes, advantages: ``_generate_and_score_completions`` less those
two), the loss forward (``compute_loss``), backward (``training_step`` less scoring and the loss) and the rest
(optimizer, scheduler, logging, saving). One untimed TRL step runs first (torch's warm-up). The last line is the
ratio of the two wall times.

    OMP_NUM_THREADS=1 .venv/bin/python bench/bench_grpo_trl.py --steps 4
    .venv/bin/python bench/bench_grpo_trl.py --recipe configs/arith/grpo-signal.yaml --steps 8
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

PHASES = ("generation", "rewards", "other scoring (ref/old log-probs)", "loss forward", "backward", "rest")


def timed(trainer) -> dict[str, float]:
    """Wrap ``trainer``'s GRPO methods so that each call adds its seconds to the returned dict."""
    spent: dict[str, float] = defaultdict(float)
    for name in ("_generate", "_calculate_rewards", "_generate_and_score_completions", "compute_loss",
                 "training_step"):  # fmt: skip
        original = getattr(trainer, name)

        def wrapper(*args, _original=original, _name=name, **kwargs):
            t0 = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - t0

        setattr(trainer, name, wrapper)
    return spent


def phases(spent: dict[str, float], wall: float) -> dict[str, float]:
    scoring = spent["_generate_and_score_completions"]
    step = spent["training_step"]
    return {
        "generation": spent["_generate"],
        "rewards": spent["_calculate_rewards"],
        "other scoring (ref/old log-probs)": scoring - spent["_generate"] - spent["_calculate_rewards"],
        "loss forward": spent["compute_loss"],
        "backward": step - scoring - spent["compute_loss"],
        "rest": wall - step,
    }


def recipe_for(args, model: Path, data: Path, out: Path):
    from posttrainlab.config import load_config
    from posttrainlab.train.recipes import GRPORecipe

    return load_config(
        GRPORecipe,
        args.recipe,
        [f"model={model}", f"output_dir={out}", f"dataset.path={data}", f"dataset.limit={args.limit}",
         f"optim.max_steps={args.steps}", "optim.save_steps=100000", "optim.logging_steps=1",
         "prompt_filter.enabled=false", *args.overrides],
    )  # fmt: skip


def lab(recipe) -> tuple[float, dict[str, float]]:
    from posttrainlab.train.common import check_run, run_trainer
    from posttrainlab.train.grpo import build_trainer

    start = check_run(recipe)
    trainer, n = build_trainer(recipe)
    spent = timed(trainer)
    t0 = time.perf_counter()
    run_trainer(trainer, recipe, "grpo", n, start)
    wall = time.perf_counter() - t0
    return wall, phases(spent, wall)


def plain_trl(recipe) -> tuple[float, dict[str, float]]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from posttrainlab.train.common import load_records
    from posttrainlab.train.grpo import grpo_kwargs, grpo_rows
    from posttrainlab.train.rewards import correctness_reward, format_reward

    model = AutoModelForCausalLM.from_pretrained(recipe.model)
    tokenizer = AutoTokenizer.from_pretrained(recipe.model, padding_side="left")
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[correctness_reward, format_reward],
        args=GRPOConfig(**grpo_kwargs(recipe)),
        train_dataset=Dataset.from_list(grpo_rows(load_records(recipe.dataset))),
        processing_class=tokenizer,
    )
    spent = timed(trainer)
    t0 = time.perf_counter()
    trainer.train()
    trainer.save_model(recipe.output_dir)
    wall = time.perf_counter() - t0
    return wall, phases(spent, wall)


def main() -> None:
    from posttrainlab.data.arith.release import prepare
    from posttrainlab.models.tiny import TinyModelConfig, init_model
    from posttrainlab.progress import quiet_libraries

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="configs/arith/grpo.yaml", help="GRPO recipe [configs/arith/grpo.yaml]")
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per trainer [8]")
    parser.add_argument("--limit", type=int, default=64, help="rl_train prompts [64]")
    parser.add_argument("overrides", nargs="*", help="recipe key=value overrides, e.g. num_generations=4")
    args = parser.parse_args()
    quiet_libraries()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        data = work / "arith-v1"
        prepare(data)
        model = init_model(TinyModelConfig(), work / "tiny")
        warm = recipe_for(args, model, data, work / "warm-up")
        warm.optim.max_steps = 1
        plain_trl(warm)  # one untimed step first: the first run in a process pays torch's warm-up
        runs = {}
        for name, fn in (("TRL GRPOTrainer", plain_trl), ("posttrainlab", lab)):
            recipe = recipe_for(args, model, data, work / name.split()[0])
            runs[name] = fn(recipe)
        r = recipe_for(args, model, data, work / "x")
        print(f"\n{args.steps} steps, {r.optim.batch_size} completions per step (G {r.num_generations}), "
              f"max_completion_length {r.max_completion_length}, beta {r.beta}, loss {r.loss_type}, "
              f"num_iterations {r.num_iterations}")  # fmt: skip
        print(f"{'phase':<36}" + "".join(f"{name:>24}" for name in runs))
        for phase in PHASES:
            cells = "".join(f"{p[phase]:>14.2f} s {100 * p[phase] / wall:5.1f}%" for wall, p in runs.values())
            print(f"{phase:<36}{cells}")
        print(f"{'wall (train + save)':<36}" + "".join(f"{wall:>14.2f} s {'':6}" for wall, _ in runs.values()))
        (trl_wall, _), (lab_wall, _) = runs.values()
        print(f"posttrainlab / TRL GRPOTrainer wall time: {lab_wall / trl_wall:.2f}x")


if __name__ == "__main__":
    main()
