"""``optim.bf16``: where training runs under bf16 autocast (``train.launch.use_bf16``), what the trainers get, what
the run records, and that a stage recorded before the setting existed keeps its record (``quickstart.plan``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.train import launch
from posttrainlab.train.recipes import OptimConfig, SFTRecipe

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "text, native", [("flags : fpu avx512f avx512_bf16 avx512vl", True), ("flags : fpu amx_bf16 amx_tile", True),
                     ("flags : fpu avx2 avx512f avx512bw", False), ("flags : fpu avx512_bf16x", False)],
)  # fmt: skip
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, text, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor : 0\n{text}\n")
    assert launch.cpu_has_bf16(cpuinfo) is native
    assert launch.cpu_has_bf16(tmp_path / "missing") is False  # flags that cannot be read: not native


@pytest.mark.parametrize(
    "cuda, cuda_bf16, cpu_bf16, expected",
    [
        (False, False, True, {"gpu": False, "auto": True, "never": False}),  # a CPU with AVX512_BF16 (Zen 4)
        (False, False, False, {"gpu": False, "auto": False, "never": False}),  # emulated bf16 is slower: fp32
        (True, True, False, {"gpu": True, "auto": True, "never": False}),  # an A100 or H100
        (True, False, True, {"gpu": False, "auto": False, "never": False}),  # a T4: the GPU trains, in fp32
    ],
)
def test_each_setting_on_each_kind_of_machine(monkeypatch, cuda, cuda_bf16, cpu_bf16, expected):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: cuda_bf16)
    monkeypatch.setattr(launch, "cpu_has_bf16", lambda *a: cpu_bf16)
    assert {setting: launch.use_bf16(setting) for setting in expected} == expected


def test_a_setting_it_does_not_know_is_one_line_naming_the_choices():
    with pytest.raises(BadInput, match=r"bf16='sometimes': must be one of gpu, auto, never"):
        load_config(SFTRecipe, None, ["optim.bf16=sometimes"])
    assert OptimConfig().bf16 == "gpu"  # every recipe's default: what transformers does


def test_the_trainer_gets_autocast_where_the_setting_says_and_trainer_args_cannot_set_it(
    monkeypatch, arith_dir, tiny_model, tmp_path
):
    from posttrainlab.train.sft import build_trainer

    monkeypatch.setattr(launch, "cpu_has_bf16", lambda *a: True)
    base = [f"model={tiny_model}", f"dataset.path={arith_dir}", "dataset.limit=4", f"output_dir={tmp_path / 's'}"]
    for setting, on in (("auto", True), ("gpu", False), ("never", False)):
        trainer, _ = build_trainer(load_config(SFTRecipe, None, [*base, f"optim.bf16={setting}"]))
        assert trainer.args.bf16 is on, setting
    with pytest.raises(BadInput, match="trainer_args.bf16: a recipe field sets it"):
        build_trainer(load_config(SFTRecipe, None, [*base, "trainer_args.bf16=true"]))


@pytest.mark.skipif(not launch.cpu_has_bf16(), reason="this CPU has no native bf16 (avx512_bf16 / amx_bf16)")
def test_a_bf16_run_trains_records_it_and_saves_fp32_weights(arith_dir, tiny_model, tmp_path, capsys):
    from safetensors import safe_open

    from cli_capture import cli

    out = tmp_path / "sft"
    code, _, err = cli(
        capsys, "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"), f"model={tiny_model}",
        f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=8", "optim.max_steps=2",
        "optim.batch_size=4", "optim.bf16=auto",
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["bf16"] is True and summary["recipe"]["optim"]["bf16"] == "auto"
    with safe_open(str(out / "model.safetensors"), framework="pt") as f:
        assert {str(f.get_tensor(k).dtype) for k in f.keys()} == {"torch.float32"}


def test_a_stage_recorded_before_the_setting_keeps_its_record():
    """``gpu`` (the default, what every run did before the setting) leaves a stage record as it was; another
    value joins it, so a run folder of the other setting is a different stage."""
    from dataclasses import replace

    from posttrainlab.quickstart.plan import prm_record, recipe_record
    from posttrainlab.train.prm_recipe import PRMRecipe

    for recipe, record in ((SFTRecipe(), recipe_record), (PRMRecipe(), prm_record)):
        assert "bf16" not in record(recipe)["optim"]
        auto = replace(recipe, optim=replace(recipe.optim, bf16="auto"))
        assert record(auto)["optim"]["bf16"] == "auto"
        assert {k: v for k, v in record(auto)["optim"].items() if k != "bf16"} == record(recipe)["optim"]
