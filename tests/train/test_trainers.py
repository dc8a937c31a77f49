"""SFT, DPO and GRPO on TRL: each trains a few steps, changes the weights, logs finite losses, resumes; every trainer
(the PRM's too) runs data-parallel in two CPU processes and takes TRL's own arguments through ``trainer_args``."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.train.recipes import DPORecipe, GRPORecipe, SFTRecipe

ROOT = Path(__file__).resolve().parents[2]


def weights(path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def changed(a, b) -> int:
    import torch

    return sum(not torch.equal(a[k], b[k]) for k in a if k in b)


def finite_log(out: Path, key: str) -> list[float]:
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    values = [r[key] for r in rows if key in r]
    assert values and all(math.isfinite(v) for v in values), rows
    return values


def test_sft_trains_on_completions(arith_dir, tiny_model, tmp_path):
    from posttrainlab.train.sft import train_sft

    out = tmp_path / "sft"
    recipe = load_config(
        SFTRecipe,
        ROOT / "configs/arith/sft.yaml",
        [f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=32",
         "optim.max_steps=3", "optim.batch_size=4", "optim.logging_steps=1"],
    )  # fmt: skip
    train_sft(recipe)
    assert changed(weights(tiny_model), weights(out)) > 0
    finite_log(out, "loss")
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["global_step"] == 3 and summary["records"] == 32 and summary["resumed_from"] is None


def test_sft_masks_the_prompt(arith_dir, tiny_model):
    """Loss on the completion only: every label inside the prompt is -100."""
    from posttrainlab.train.sft import build_trainer

    recipe = load_config(SFTRecipe, None, [f"model={tiny_model}", f"dataset.path={arith_dir}", "dataset.limit=4"])
    trainer, _ = build_trainer(recipe)
    batch = next(iter(trainer.get_train_dataloader()))
    tok = trainer.processing_class
    for ids, labels in zip(batch["input_ids"], batch["labels"], strict=True):
        text = tok.decode(ids[labels != -100])
        assert text.startswith(tuple("0123456789")) and "Answer: " in text and "Solve" not in text


def test_dpo_trains_against_a_frozen_reference(arith_dir, tiny_model, tmp_path, monkeypatch):
    """The policy moves; the reference (TRL's own copy of the starting model) does not: after training, every one
    of its tensors is still exactly the start's."""
    from posttrainlab.train import dpo

    built = []

    def keep(*args, **kwargs):
        trainer, n = build(*args, **kwargs)
        built.append(trainer)
        return trainer, n

    build = dpo.build_trainer
    monkeypatch.setattr(dpo, "build_trainer", keep)
    out = tmp_path / "dpo"
    recipe = load_config(
        DPORecipe,
        ROOT / "configs/arith/dpo.yaml",
        [f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=8",
         "optim.max_steps=2", "optim.batch_size=4", "optim.logging_steps=1", "optim.learning_rate=0.01"],
    )  # fmt: skip
    dpo.train_dpo(recipe)
    start = weights(tiny_model)
    assert changed(start, weights(out)) > 0
    finite_log(out, "loss")
    (trainer,) = built
    reference = {k: v.detach().cpu() for k, v in trainer.ref_model.state_dict().items()}
    assert set(start) <= set(reference) and changed(start, reference) == 0


def test_grpo_logs_reward_kl_and_the_share_of_flat_groups(arith_dir, tiny_model, tmp_path, monkeypatch):
    """An untrained model earns the arith rewards never, so every group is flat and nothing moves;
    a reward that varies within a group (here: completion length) shows that the update path works."""
    from posttrainlab.train import grpo
    from posttrainlab.train.grpo import train_grpo

    def length_reward(completions, answer, **_):
        return [float(len(c[-1]["content"])) for c in completions]

    monkeypatch.setattr(grpo, "correctness_reward", length_reward)

    out = tmp_path / "grpo"
    recipe = load_config(
        GRPORecipe,
        ROOT / "configs/arith/grpo.yaml",
        [f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=4",
         "optim.max_steps=2", "optim.batch_size=4", "num_generations=4", "max_completion_length=8",
         "optim.logging_steps=1", "optim.learning_rate=0.01"],
    )  # fmt: skip
    train_grpo(recipe)
    finite_log(out, "reward")
    finite_log(out, "kl")
    flat = finite_log(out, "frac_reward_zero_std")
    assert all(0.0 <= v <= 1.0 for v in flat)
    assert changed(weights(tiny_model), weights(out)) > 0


def test_grpo_batch_must_hold_whole_groups(tiny_model, arith_dir):
    from posttrainlab.errors import BadInput
    from posttrainlab.train.grpo import build_trainer

    recipe = load_config(GRPORecipe, None, [f"model={tiny_model}", "optim.batch_size=6", "num_generations=4"])
    with pytest.raises(BadInput, match="multiple of num_generations"):
        build_trainer(recipe)


def _sft_cmd(tiny_model, arith_dir, out, steps):
    return [
        sys.executable, "-m", "posttrainlab", "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"),
        f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=64",
        f"optim.max_steps={steps}", "optim.batch_size=2", "optim.save_steps=2", "optim.logging_steps=1",
    ]  # fmt: skip


def test_killed_run_resumes_from_its_last_checkpoint(arith_dir, tiny_model, tmp_path):
    out = tmp_path / "sft"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = _sft_cmd(tiny_model, arith_dir, out, 40)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.time() + 240
    while time.time() < deadline and not list(out.glob("checkpoint-*/trainer_state.json")):
        time.sleep(0.05)
    time.sleep(0.3)  # then kill anywhere: mid-step, or while a later checkpoint is being written
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(out.glob("checkpoint-*")), "no checkpoint was written before the kill"
    assert not (out / "train_summary.json").exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)  # the same command again
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["resumed_from"] and "checkpoint-" in summary["resumed_from"]
    assert summary["global_step"] == 40
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps[-1] == 40 and steps[0] < int(summary["resumed_from"].rsplit("-", 1)[1]) + 1


#: the shipped accelerate config of the tested data-parallel run: two CPU processes (configs/accelerate/). Not
#: `accelerate launch --cpu --num_processes 2`: without an mpirun hostfile that starts one process
DDP_CPU = ROOT / "configs/accelerate/ddp_cpu.yaml"


def test_two_cpu_processes_with_accelerate(arith_dir, tiny_model, tmp_path):
    out = tmp_path / "sft-ddp"
    cmd = ["accelerate", "launch", "--config_file", str(DDP_CPU), "-m", "posttrainlab",
           *_sft_cmd(tiny_model, arith_dir, out, 2)[3:]]  # fmt: skip
    cmd[0] = str(Path(sys.executable).with_name("accelerate"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["global_step"] == 2
    assert changed(weights(tiny_model), weights(out)) > 0


#: each trainer's 2-step data-parallel run: its config, its data (None: the arith-v1 build) and what makes it tiny
DDP_RUNS = {
    "dpo": ("configs/arith/dpo.yaml", None, ["dataset.limit=8", "optim.learning_rate=0.01"]),
    "grpo": ("configs/arith/grpo.yaml", None, ["dataset.limit=4", "num_generations=2", "max_completion_length=8"]),
    "prm": ("configs/prm/step.yaml", ROOT / "tests/assets/formats/span_good_step.jsonl", ["optim.learning_rate=0.01"]),
}


@pytest.mark.parametrize("method", list(DDP_RUNS))
def test_every_trainer_runs_in_two_cpu_processes_with_the_shipped_accelerate_config(
    method, arith_dir, tiny_model, tmp_path
):
    """The SFT test's pattern for DPO, GRPO and the PRM trainer: both processes finish (each prints its line) and
    the run trains its steps; a global batch of 2 processes x 2 records."""
    out = tmp_path / f"{method}-ddp"
    config, data, extra = DDP_RUNS[method]
    accelerate = str(Path(sys.executable).with_name("accelerate"))
    cmd = [accelerate, "launch", "--config_file", str(DDP_CPU), "-m", "posttrainlab", "train", method,
           "--config", str(ROOT / config), f"model={tiny_model}", f"output_dir={out}",
           f"dataset.path={data or arith_dir}", "optim.max_steps=2", "optim.batch_size=2", "optim.logging_steps=1",
           *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count(f"{method}: model saved to") == 2, r.stdout[-2000:]
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["global_step"] == 2
    finite_log(out, "loss")


@pytest.mark.parametrize("method", ["sft", "dpo", "grpo", "prm"])
@pytest.mark.parametrize(
    "arg, message",
    [
        ("trainer_args.no_such_arg=1", "trainer_args.no_such_arg: not an argument of "),
        ("trainer_args.learning_rate=0.5", "trainer_args.learning_rate: a recipe field sets it (now 0.5;"),
    ],
)
def test_a_bad_trainer_arg_is_one_line_before_any_data_or_model_loads(tmp_path, capsys, method, arg, message):
    """Neither the model nor the data named here exists: the trainer_args check comes first."""
    from cli_capture import cli

    config = "configs/prm/step.yaml" if method == "prm" else f"configs/arith/{method}.yaml"
    out = tmp_path / "run"
    missing = [f"model={tmp_path / 'no-model'}", f"dataset.path={tmp_path / 'no-data'}", f"output_dir={out}"]
    code, _, err = cli(capsys, "train", method, "--config", str(ROOT / config), *missing, "optim.learning_rate=.5", arg)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_trainer_args_reach_the_trl_config_and_replace_the_defaults(arith_dir, tiny_model):
    from posttrainlab.train.sft import build_trainer

    base = [f"model={tiny_model}", f"dataset.path={arith_dir}", "dataset.limit=4"]
    trainer, _ = build_trainer(load_config(SFTRecipe, None, base))
    assert trainer.args.report_to == ["tensorboard"] and trainer.args.completion_only_loss is True
    assert not trainer.args.dataloader_drop_last
    extra = ["trainer_args.report_to=none", "trainer_args.dataloader_drop_last=true"]
    trainer, _ = build_trainer(load_config(SFTRecipe, None, [*base, *extra, "trainer_args.completion_only_loss=false"]))
    assert trainer.args.report_to == [] and trainer.args.dataloader_drop_last is True
    assert trainer.args.completion_only_loss is False  # a fixed value no recipe field sets: replaceable too


def test_trainer_args_reach_the_prm_training_arguments(tiny_model, tmp_path):
    from posttrainlab.train.prm import build_trainer
    from posttrainlab.train.prm_recipe import PRMRecipe

    rows = ROOT / "tests/assets/formats/span_good_step.jsonl"
    extra = ["trainer_args.report_to=[]", "trainer_args.logging_first_step=true"]
    overrides = [f"model={tiny_model}", f"output_dir={tmp_path / 'prm'}", f"dataset.path={rows}", *extra]
    recipe = load_config(PRMRecipe, ROOT / "configs/prm/step.yaml", overrides)
    trainer, _, _ = build_trainer(recipe)
    assert trainer.args.report_to == [] and trainer.args.logging_first_step is True
    assert trainer.args.label_names == ["labels"]


def test_missing_model_folder_is_one_line_exit_2(arith_dir, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"),
         f"model={tmp_path / 'nope'}", f"dataset.path={arith_dir}", f"output_dir={tmp_path / 'o'}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such model folder" in lines[0]


def test_resume_point_skips_a_checkpoint_killed_while_being_written(tmp_path):
    from posttrainlab.train.common import last_checkpoint

    assert last_checkpoint(tmp_path / "none") is None
    for step, complete in ((4, True), (8, True), (12, False)):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-x").mkdir()
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-8")


def test_prm_batches_solutions_of_similar_length_unless_told_not_to(tiny_model, tmp_path):
    """length_grouping (the default) draws every solution once per epoch, in batches of similar length: less
    padding than the random batches it replaced (bench/bench_prm_length_grouping.py)."""
    import random

    from posttrainlab.train.prm import build_trainer
    from posttrainlab.train.prm_recipe import PRMRecipe

    rng = random.Random(0)
    rows = []
    for i in range(96):  # 1 to 12 steps each, in random order
        n = rng.randint(1, 12)
        rows.append({"prompt": f"What is {i} + 1?", "completions": [f"{i} + {j} = {i + j}" for j in range(n)],
                     "labels": [True] * n})  # fmt: skip
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def padded(grouped: bool) -> tuple[float, list[int]]:
        overrides = [
            f"model={tiny_model}",
            f"output_dir={tmp_path / str(grouped)}",
            f"dataset.path={data}",
            "dataset.format=math-shepherd",
            "optim.batch_size=8",
            f"length_grouping={str(grouped).lower()}",
        ]
        trainer, _, _ = build_trainer(load_config(PRMRecipe, ROOT / "configs/prm/step.yaml", overrides))
        lengths = [len(ex["input_ids"]) for ex in trainer.train_dataset]
        order = list(trainer._get_train_sampler())
        batches = [order[i : i + 8] for i in range(0, len(order), 8)]
        return sum(max(lengths[i] for i in b) * len(b) for b in batches) / sum(lengths), order

    random_ratio, random_order = padded(False)
    grouped_ratio, grouped_order = padded(True)
    assert sorted(grouped_order) == sorted(random_order) == list(range(96))
    assert random_ratio > 1.2 and grouped_ratio - 1 < (random_ratio - 1) / 2, (random_ratio, grouped_ratio)
