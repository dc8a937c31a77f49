"""GRPO with a PRM reward trains a few steps on the tiny policy and an untrained tiny PRM, as a sequence reward and
as step-level advantages, and every run (the outcome reward's too) writes reward_log.jsonl with the named keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.train.recipes import GRPORecipe

ROOT = Path(__file__).resolve().parents[2]
EXACT = ("accuracy", "any_wrong_step", "wrong_step_rate")


def recipe(config, out, policy, data, *more):
    return load_config(
        GRPORecipe,
        ROOT / config,
        [f"model={policy}", f"output_dir={out}", f"dataset.path={data}", "dataset.limit=4", "optim.max_steps=2",
         "optim.batch_size=4", "num_generations=4", "max_completion_length=8", "optim.logging_steps=1",
         "optim.learning_rate=0.01", "beta=0", *more],
    )  # fmt: skip


def log_rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "reward_log.jsonl").read_text().splitlines()]


def shares(rows: list[dict], keys) -> None:
    for row in rows:
        for key in keys:
            assert 0.0 <= row[key] <= 1.0, (key, row)


@pytest.mark.parametrize("mode, credit", [("sequence", "sum"), ("step", "sum"), ("step", "min")])
def test_grpo_with_a_prm_reward_trains_and_logs_the_proxy_beside_exact_accuracy(
    mode, credit, arith_dir, tiny_policy, tiny_prm, tmp_path
):
    from test_trainers import changed, weights

    from posttrainlab.train.grpo import train_grpo

    out = tmp_path / f"grpo-{mode}-{credit}"
    # the PRM alone: the untrained policy never earns the grader's reward, so only the PRM's scores move it
    run = recipe("configs/arith/grpo-prm.yaml", out, tiny_policy, arith_dir, f"prm_reward.path={tiny_prm}",
                 f"prm_reward.mode={mode}", f"prm_reward.credit={credit}", "rewards.correctness=0")  # fmt: skip
    train_grpo(run)
    rows = log_rows(out)
    assert [r["step"] for r in rows] == [1, 2]
    # every sample errs, so every row has the PRM's verdict on first wrong steps too
    shares(rows, (*EXACT, "prm_score", "prm_step_score", "prm_reward", "prm_wrong_step_score", "prm_false_accept"))
    assert all(r["accuracy"] == 0.0 and r["any_wrong_step"] == 1.0 for r in rows)  # random text: every step wrong
    assert changed(weights(tiny_policy), weights(out)) > 0
    train_log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    process = [r["process_advantage/abs_mean"] for r in train_log if "process_advantage/abs_mean" in r]
    if mode == "step":  # the per-token advantages are the PRM's: not zero, though the outcome reward is flat
        assert process and all(math.isfinite(v) and v > 0 for v in process)
    else:
        assert not process and all(r["prm_reward"] == pytest.approx(r["reward"]) for r in rows)


def test_an_outcome_reward_run_logs_exact_accuracy_and_step_errors(arith_dir, tiny_policy, tmp_path):
    from posttrainlab.report.hacking import section
    from posttrainlab.train.grpo import train_grpo

    out = tmp_path / "grpo"
    train_grpo(recipe("configs/arith/grpo.yaml", out, tiny_policy, arith_dir))
    rows = log_rows(out)
    assert [r["step"] for r in rows] == [1, 2] and all("prm_score" not in r for r in rows)
    shares(rows, EXACT)
    text = section(tmp_path)
    assert "| GRPO | 2 | – | – | 0.0% → 0.0% | 100.0% → 100.0% |" in text
    # a fresh start (--overwrite) empties the log
    again = recipe("configs/arith/grpo.yaml", out, tiny_policy, arith_dir, "optim.max_steps=1")
    train_grpo(again, existing="overwrite")
    assert [r["step"] for r in log_rows(out)] == [1]


def test_a_probed_run_samples_the_same_held_out_prompts_every_few_steps(arith_dir, tiny_policy, tiny_prm, tmp_path):
    """``probe.split``: TRL's evaluation loop samples the split every ``probe.every`` steps with the run's reward
    functions, PRM step advantages included; reward_probe.jsonl gets those rows, reward_log.jsonl only the batch's."""
    from posttrainlab.train.grpo import train_grpo
    from posttrainlab.train.reward_log import PROBE_LOG

    out = tmp_path / "grpo-probe"
    run = recipe("configs/arith/grpo-prm.yaml", out, tiny_policy, arith_dir, f"prm_reward.path={tiny_prm}",
                 "prm_reward.mode=step", "rewards.correctness=0", "probe.split=validation", "probe.limit=3",
                 "probe.every=1", "probe.samples=2")  # fmt: skip
    train_grpo(run)
    probe = [json.loads(line) for line in (out / PROBE_LOG).read_text().splitlines()]
    assert [r["step"] for r in probe] == [1, 2]
    shares(probe, (*EXACT, "prm_score", "prm_false_accept"))
    assert [r["step"] for r in log_rows(out)] == [1, 2]  # the training rows stay in their own file
    assert all("eval_loss" not in r and "loss" not in r for r in probe)
    from posttrainlab.report.hacking import findings

    lines = findings(out)  # what `posttrain train grpo` prints at the end: the run's log, then its probe's
    assert [line.split(":")[0] for line in lines] == ["GRPO-probe", "GRPO-probe probe"]
    assert all("no step where" in line and "2 logs" in line for line in lines)
    # off by default, and a bad value is refused when the recipe is read
    assert not (tmp_path / "grpo" / PROBE_LOG).exists()
    from posttrainlab.errors import BadInput

    with pytest.raises(BadInput, match="every=0: must be at least 1"):
        recipe("configs/arith/grpo-prm.yaml", out, tiny_policy, arith_dir, "probe.split=validation", "probe.every=0")
