"""The shipped accelerate configs (configs/accelerate/): each parses with accelerate's own classes, its launcher
starts the intended parallelism, and what it runs as on a machine with or without GPUs is said in one line, the
CPU fallbacks included (``train.launch``). Real 2-process runs on the CPU: an FSDP config (it runs as DDP over
gloo, and says so) and DeepSpeed ZeRO-3 (it runs, on DeepSpeed's CPU accelerator over gloo) for SFT and the PRM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.train.launch import (
    AS_ASKED,
    BF16_CLASH,
    FALLS_BACK,
    FSDP_NEEDS_GPU,
    NO_DEEPSPEED,
    STOPS,
    main,
    plan,
    read_launch,
    run_line,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs/accelerate"
#: each shipped config: accelerate's DistributedType, and what its launcher asks the processes for
INTENDED = {
    "ddp_cpu": ("MULTI_GPU", "DDP", 2),
    "ddp": ("MULTI_GPU", "DDP", 8),
    "fsdp": ("FSDP", "FSDP2", 8),
    "deepspeed_zero3": ("DEEPSPEED", "DeepSpeed ZeRO-3", 8),
}
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


def test_every_shipped_config_is_checked_here():
    assert sorted(p.stem for p in CONFIGS.glob("*.yaml")) == sorted(INTENDED)


@pytest.mark.parametrize("name", list(INTENDED))
def test_each_config_parses_with_accelerates_classes_and_launches_the_intended_parallelism(name):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file

    config = load_config_from_file(str(CONFIGS / f"{name}.yaml"))
    kind, asks, processes = INTENDED[name]
    assert isinstance(config, ClusterConfig) and config.distributed_type.value == kind
    launch = read_launch(CONFIGS / f"{name}.yaml")
    assert (launch.asks, launch.processes) == (asks, processes)
    assert launch.use_cpu == (name == "ddp_cpu")
    assert launch.mixed_precision == ("no" if name == "ddp_cpu" else "bf16")


@pytest.mark.parametrize("name", list(INTENDED))
def test_on_gpus_each_config_runs_as_asked(name):
    p = plan(CONFIGS / f"{name}.yaml", gpus=8, bf16=True, deepspeed=True)
    asks = INTENDED[name][1]
    assert p.status == AS_ASKED, p.line()
    where = "over gloo on the CPU" if name == "ddp_cpu" else "over nccl on 8 GPUs"
    assert p.runs == f"{asks} {where}"


def test_without_a_gpu_fsdp_falls_back_to_ddp_over_gloo_and_says_so():
    p = plan(CONFIGS / "fsdp.yaml", gpus=0, deepspeed=True)
    assert (p.status, p.runs, p.why) == (FALLS_BACK, "DDP over gloo on the CPU", FSDP_NEEDS_GPU)
    assert p.line() == (
        "fsdp.yaml: asks for FSDP2 in 8 processes; here it FALLS BACK to DDP over gloo on the CPU: accelerate runs "
        "FSDP only on GPUs, so nothing is sharded and each process holds the whole model"
    )


def test_without_a_gpu_the_ddp_configs_run_ddp_over_gloo():
    cpu = plan(CONFIGS / "ddp_cpu.yaml", gpus=0)
    assert cpu.line() == "ddp_cpu.yaml: asks for DDP in 2 processes; here it runs as asked: DDP over gloo on the CPU"
    gpu = plan(CONFIGS / "ddp.yaml", gpus=0)
    assert (gpu.status, gpu.runs, gpu.why) == (AS_ASKED, "DDP over gloo on the CPU", "no GPU here")


def test_without_a_gpu_deepspeed_stops_on_bf16_or_a_missing_install_and_runs_without_bf16():
    ds = CONFIGS / "deepspeed_zero3.yaml"
    assert (plan(ds, gpus=0, deepspeed=False).status, plan(ds, gpus=0, deepspeed=False).why) == (STOPS, NO_DEEPSPEED)
    bf16 = plan(ds, gpus=0, deepspeed=True)
    assert (bf16.status, bf16.why) == (STOPS, BF16_CLASH)
    assert "would not start: mixed_precision bf16" in bf16.line() and "--mixed_precision no" in bf16.line()
    ok = plan(ds, num_processes=2, mixed_precision="no", gpus=0, deepspeed=True)
    assert (ok.status, ok.runs) == (AS_ASKED, "DeepSpeed ZeRO-3 over gloo on the CPU")


def test_more_processes_than_gpus_or_bf16_on_a_gpu_without_it_stops():
    short = plan(CONFIGS / "fsdp.yaml", gpus=1, bf16=True)
    assert short.status == STOPS and short.why == "8 processes for 1 GPU(s): pass --num_processes 1"
    assert plan(CONFIGS / "fsdp.yaml", num_processes=1, gpus=1).status == AS_ASKED
    old = plan(CONFIGS / "deepspeed_zero3.yaml", gpus=8, bf16=False, deepspeed=True)
    assert (old.status, old.why) == (STOPS, BF16_CLASH)


def test_a_bad_config_is_one_line(tmp_path):
    text = (CONFIGS / "fsdp.yaml").read_text()
    typo = tmp_path / "typo.yaml"
    typo.write_text(text.replace("fsdp_reshard_after_forward", "fsdp_reshard_after_forwad"))
    with pytest.raises(BadInput, match=r"typo.yaml: fsdp_config.fsdp_reshard_after_forwad: not an option of acc"):
        read_launch(typo)
    extra = tmp_path / "extra.yaml"
    extra.write_text(text + "no_such_key: 1\n")
    with pytest.raises(BadInput, match=r"extra.yaml: not a valid accelerate config: .*no_such_key"):
        read_launch(extra)
    with pytest.raises(BadInput, match="no such accelerate config"):
        read_launch(tmp_path / "missing.yaml")


def test_the_command_prints_a_line_per_config_and_exits_by_the_worst(tmp_path, capsys):
    assert main([str(CONFIGS / "ddp_cpu.yaml")]) == 0
    assert capsys.readouterr().out == (
        "ddp_cpu.yaml: asks for DDP in 2 processes; here it runs as asked: DDP over gloo on the CPU\n"
    )
    (tmp_path / "bad.yaml").write_text("distributed_type: NOPE\n")
    assert main([str(tmp_path / "bad.yaml")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def accelerator(kind: str, processes: int, backend: str = "gloo", device: str = "cpu"):
    """A stand-in for ``trainer.accelerator`` with the fields ``run_line`` reads."""
    import torch
    from accelerate.utils import DistributedType

    state = SimpleNamespace(backend=backend, deepspeed_plugin=SimpleNamespace(zero_stage=3),
                            fsdp_plugin=SimpleNamespace(fsdp_version=2))  # fmt: skip
    return SimpleNamespace(distributed_type=DistributedType(kind), num_processes=processes, state=state,
                           device=torch.device(device))  # fmt: skip


def test_a_run_says_what_its_processes_run_and_what_they_fell_back_from():
    fsdp_env = {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2"}
    assert run_line(accelerator("MULTI_CPU", 2), "sft", fsdp_env) == (
        f"sft: the accelerate config asks for FSDP2, but this run is DDP over gloo on the CPU in 2 processes: "
        f"{FSDP_NEEDS_GPU}"
    )
    ds_env = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}
    assert run_line(accelerator("DEEPSPEED", 2), "prm", ds_env) == (
        "prm: 2 processes, DeepSpeed ZeRO-3 over gloo on the CPU"
    )
    assert run_line(accelerator("FSDP", 8, "nccl", "cuda"), "dpo", fsdp_env) == (
        "dpo: 8 processes, FSDP2 over nccl on 8 GPUs"
    )
    assert run_line(accelerator("MULTI_CPU", 2), "sft", {}) == "sft: 2 processes, DDP over gloo on the CPU"
    assert run_line(accelerator("DEEPSPEED", 1, "nccl", "cuda"), "sft", ds_env) == (
        "sft: 1 process, DeepSpeed ZeRO-3 over nccl on 1 GPU"
    )
    assert run_line(accelerator("NO", 1), "sft", {}) is None


# --------------------------------------------------------------------------------------------------
# Real runs: 2 CPU processes, 2 steps, the shipped configs with --num_processes 2 (they name 8 GPUs)


def launch(config: str, flags: list[str], method: str, recipe: list[str], out: Path) -> subprocess.CompletedProcess:
    accelerate = str(Path(sys.executable).with_name("accelerate"))
    cmd = [accelerate, "launch", "--config_file", str(CONFIGS / config), "--num_processes", "2", *flags,
           "-m", "posttrainlab", "train", method, *recipe, f"output_dir={out}",
           "optim.max_steps=2", "optim.batch_size=2", "optim.logging_steps=1"]  # fmt: skip
    r = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count(f"{method}: model saved to") == 2, r.stdout[-2000:]
    assert json.loads((out / "train_summary.json").read_text())["global_step"] == 2
    return r


def sft_recipe(tiny_model, arith_dir) -> list[str]:
    return ["--config", str(ROOT / "configs/arith/sft.yaml"), f"model={tiny_model}", f"dataset.path={arith_dir}",
            "dataset.limit=16"]  # fmt: skip


@pytest.mark.slow
def test_fsdp_config_on_the_cpu_trains_as_ddp_and_says_so(tiny_model, arith_dir, tmp_path):
    r = launch("fsdp.yaml", [], "sft", sft_recipe(tiny_model, arith_dir), tmp_path / "sft-fsdp")
    assert r.stdout.count("sft: the accelerate config asks for FSDP2, but this run is DDP over gloo") == 1, r.stdout


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason="deepspeed is not installed (the train extra installs it)")
@pytest.mark.parametrize("method", ["sft", "prm"])
def test_deepspeed_zero3_trains_in_two_cpu_processes(method, tiny_model, arith_dir, tmp_path):
    """ZeRO-3 for real: DeepSpeed's CPU accelerator, gloo, parameters partitioned; the final save gathers them
    into a plain model folder (zero3_save_16bit_model) whose tensors have the base model's shapes. DeepSpeed's
    inference-only shared-memory op is neither compiled nor loaded (``launch.skip_cpu_shm_build``: ~85 s of 2 cores
    on a machine's first DeepSpeed run)."""
    from safetensors.torch import load_file

    data = ROOT / "tests/assets/formats/span_good_step.jsonl"
    prm = ["--config", str(ROOT / "configs/prm/step.yaml"), f"model={tiny_model}", f"dataset.path={data}",
           "optim.learning_rate=0.01"]  # fmt: skip
    recipe = sft_recipe(tiny_model, arith_dir) if method == "sft" else prm
    out = tmp_path / f"{method}-zero3"
    r = launch("deepspeed_zero3.yaml", ["--mixed_precision", "no"], method, recipe, out)
    assert f"{method}: 2 processes, DeepSpeed ZeRO-3 over gloo on the CPU\n" in r.stdout, r.stdout[-2000:]
    assert "built successfully" not in r.stdout + r.stderr  # deepspeed.comm.torch.build_shm_op's line
    base, trained = load_file(str(tiny_model / "model.safetensors")), load_file(str(out / "model.safetensors"))
    shared = [k for k in base if k in trained and k != "model.embed_tokens.weight"]  # the PRM adds a token
    assert shared and all(trained[k].shape == base[k].shape for k in shared)
    assert any(not (trained[k] == base[k]).all() for k in shared)


def test_the_shm_op_is_skipped_only_for_deepspeed_on_the_cpu(monkeypatch):
    from posttrainlab.train import launch as launch_module

    assert not launch_module.skip_cpu_shm_build({})  # not a DeepSpeed launch: DeepSpeed is not even imported
    assert not launch_module.skip_cpu_shm_build({"ACCELERATE_USE_DEEPSPEED": "false"})
    if not HAS_DEEPSPEED:
        return
    import deepspeed.ops

    monkeypatch.setitem(deepspeed.ops.__compatible_ops__, launch_module.SHM_OP, True)
    assert launch_module.skip_cpu_shm_build({"ACCELERATE_USE_DEEPSPEED": "true"})
    assert deepspeed.ops.__compatible_ops__[launch_module.SHM_OP] is False
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU run keeps DeepSpeed's own choice
    monkeypatch.setitem(deepspeed.ops.__compatible_ops__, launch_module.SHM_OP, True)
    assert not launch_module.skip_cpu_shm_build({"ACCELERATE_USE_DEEPSPEED": "true"})
    assert deepspeed.ops.__compatible_ops__[launch_module.SHM_OP] is True


def test_under_a_launcher_a_command_leaves_with_its_exit_code_and_all_its_output(tmp_path):
    """``python -m posttrainlab`` with WORLD_SIZE > 1 skips the interpreter's teardown (``os._exit``, where gloo's
    threads can abort a finished run): the exit code and everything printed still come out."""
    env = {**os.environ, "WORLD_SIZE": "2"}
    ok = subprocess.run([sys.executable, "-m", "posttrainlab", "--help"], env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and "Usage: posttrain" in ok.stdout, ok.stderr
    missing = str(tmp_path / "missing")
    bad = subprocess.run([sys.executable, "-m", "posttrainlab", "data", "verify", missing], env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("posttrain: error:"), (bad.returncode, bad.stderr)
