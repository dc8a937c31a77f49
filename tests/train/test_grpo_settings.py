"""GRPO's loss settings (train/grpo.py): every recipe field and pinned value reaches ``trl.GRPOConfig`` as written; the
defaults are TRL 1.16's (the measured recipe is unchanged); bad values are one line; the prompt filter keeps the
prompts the policy sometimes but not always solves, and a run with the signal settings trains on them."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.train.recipes import GRPORecipe

ROOT = Path(__file__).resolve().parents[2]
SIGNAL = ROOT / "configs/arith/grpo-signal.yaml"


def built(recipe: GRPORecipe):
    from posttrainlab.train.grpo import config_class, grpo_kwargs

    return config_class()(**grpo_kwargs(recipe))


def test_each_setting_of_the_signal_recipe_reaches_the_grpo_config():
    from posttrainlab.train.grpo import PINNED

    args = built(load_config(GRPORecipe, SIGNAL, ["steps_per_generation=2", "trainer_args.report_to=none"]))
    assert (args.loss_type, args.scale_rewards, args.beta, args.num_iterations, args.steps_per_generation) == (
        "dr_grpo", "none", 0.0, 2, 2)  # fmt: skip
    assert (args.epsilon, args.epsilon_high, args.mask_truncated_completions, args.num_generations) == (
        0.2, None, True, 16)  # fmt: skip
    assert (args.generation_batch_size, args.per_device_train_batch_size, args.max_steps) == (64, 32, 160)
    assert (args.learning_rate, args.lr_scheduler_type.value, args.reward_weights) == (5e-5, "constant", [1.0, 0.0])
    assert (args.temperature, args.max_completion_length) == (1.0, 48)
    for key, value in PINNED.items():
        assert getattr(args, key) == value, key
    args = built(load_config(GRPORecipe, SIGNAL, ["optim.grad_accum=3"]))  # steps_per_generation null: grad_accum's
    assert args.steps_per_generation == 3


def test_the_default_recipe_writes_trl_1_16s_defaults_out():
    """The quickstart's GRPO (and configs/arith/grpo.yaml) keep what TRL 1.16 did unseen, now written down."""
    from trl import GRPOConfig

    trl = {f.name: f.default for f in fields(GRPOConfig)}
    for recipe in (GRPORecipe(), load_config(GRPORecipe, ROOT / "configs/arith/grpo.yaml")):
        for name in ("loss_type", "scale_rewards", "num_iterations", "epsilon", "mask_truncated_completions"):
            assert getattr(recipe, name) == trl[name], name
        assert recipe.steps_per_generation is None and not recipe.prompt_filter.enabled
        assert (recipe.beta, recipe.rewards.format, recipe.optim.lr_scheduler) == (0.04, 0.2, "cosine")


@pytest.mark.parametrize(
    "bad, message",
    [
        ("loss_type=ppo", "loss_type='ppo': choose one of dapo, dr_grpo"),
        ("scale_rewards=std", "scale_rewards='std': choose one of group, batch, none"),
        ("num_iterations=0", "num_iterations=0: must be at least 1"),
        ("steps_per_generation=0", "steps_per_generation=0: must be at least 1"),
        ("epsilon=0", "epsilon=0.0: must be greater than 0"),
        ("prompt_filter.k=1", "prompt_filter.k=1: must be at least 2"),
        ("prompt_filter.temperature=0", "prompt_filter.temperature=0.0: must be greater than 0"),
    ],
)
def test_bad_values_are_one_line(bad, message):
    with pytest.raises(BadInput) as e:
        load_config(GRPORecipe, SIGNAL, [bad])
    assert message in str(e.value) and "\n" not in str(e.value)


class Scripted:
    """Prompt i of the split: ``i % 3`` right answers of 4 (0: never solved, 1 and 2: sometimes)."""

    name = "scripted"

    def __init__(self, records):
        self.by_prompt = {r["prompt"]: (i, r["answer"]) for i, r in enumerate(records)}
        self.calls = 0

    def generate(self, prompts, *, n=1, **_):
        self.calls += 1
        out = []
        for p in prompts:
            i, answer = self.by_prompt[p[-1]["content"]]
            out.append([f"Answer: {answer if j < i % 3 else answer + 1}" for j in range(n)])
        return out


def test_the_prompt_filter_keeps_prompts_sometimes_solved_and_the_signal_recipe_trains(
    arith_dir, tiny_model, tmp_path, monkeypatch
):
    from test_trainers import changed, finite_log, weights

    from posttrainlab.train import grpo
    from posttrainlab.train.common import load_records

    def length_reward(completions, answer, **_):  # the untrained model never earns the arith reward
        return [float(len(c[-1]["content"])) for c in completions]

    monkeypatch.setattr(grpo, "correctness_reward", length_reward)
    out = tmp_path / "grpo"
    recipe = load_config(
        GRPORecipe,
        SIGNAL,
        [f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=6",
         "optim.max_steps=2", "optim.batch_size=4", "num_generations=2", "max_completion_length=8",
         "optim.logging_steps=1", "optim.learning_rate=0.01", "prompt_filter.k=4"],
    )  # fmt: skip
    backend = Scripted(load_records(recipe.dataset))
    grpo.train_grpo(recipe, backend=backend)
    kept = [json.loads(line)["id"] for line in (out / "grpo_prompts.jsonl").read_text().splitlines()]
    assert kept == ["rl_train-0001", "rl_train-0002", "rl_train-0004", "rl_train-0005"]
    counts = json.loads((out / "grpo_prompts.json").read_text())["counts"]
    assert (counts["prompts"], counts["kept"], counts["all_wrong"], counts["all_right"]) == (6, 4, 2, 0)
    assert counts["pass_rates"] == [0.0, 0.25, 0.5, 0.0, 0.25, 0.5]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["records"] == 4 and summary["global_step"] == 2
    finite_log(out, "reward")
    # the untrained model never ends an answer within 8 tokens: every completion is truncated, masked, no update
    assert changed(weights(tiny_model), weights(out)) == 0
    recipe.output_dir, recipe.mask_truncated_completions = str(tmp_path / "unmasked"), False
    grpo.train_grpo(recipe, backend=backend)
    assert changed(weights(tiny_model), weights(tmp_path / "unmasked")) > 0
    with pytest.raises(BadInput, match="prompt_filter: 4 of 6 prompts kept .* too few for one batch"):
        few = load_config(GRPORecipe, SIGNAL, [f"model={tiny_model}", f"output_dir={tmp_path / 'few'}",
                                              f"dataset.path={arith_dir}", "dataset.limit=6", "prompt_filter.k=4",
                                              "optim.batch_size=80", "num_generations=16"])  # fmt: skip
        grpo.train_grpo(few, backend=Scripted(load_records(few.dataset)))
