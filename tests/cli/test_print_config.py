"""``--print-config`` on ``posttrain train {sft,dpo,grpo,prm}`` and ``posttrain quickstart``: the resolved recipe as
YAML on stdout, exit 0, and nothing loaded or written (the model and data named here do not exist)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.quickstart import QuickstartConfig
from posttrainlab.train.prm_recipe import PRMRecipe
from posttrainlab.train.recipes import DPORecipe, GRPORecipe, SFTRecipe


@pytest.mark.parametrize(
    "method, config, cls",
    [
        ("sft", "configs/arith/sft.yaml", SFTRecipe),
        ("dpo", "configs/arith/dpo.yaml", DPORecipe),
        ("grpo", "configs/arith/grpo.yaml", GRPORecipe),
        ("prm", "configs/prm/step.yaml", PRMRecipe),
    ],
)
def test_train_prints_the_resolved_recipe(capsys, tmp_path, monkeypatch, method, config, cls):
    monkeypatch.chdir(tmp_path)  # the documented configs/... path loads the shipped file from here
    overrides = [f"output_dir={tmp_path / 'run'}", f"model={tmp_path / 'no-model'}", "optim.learning_rate=0.5",
                 "dataset.path=nowhere", "trainer_args.report_to=none"]  # fmt: skip
    code, out, err = cli(capsys, "train", method, "--config", config, "--print-config", *overrides)
    assert code == 0, err
    printed = tmp_path / "printed.yaml"
    printed.write_text(out)
    recipe = load_config(cls, printed)
    assert recipe == load_config(cls, config, overrides)
    assert recipe.optim.learning_rate == 0.5 and recipe.trainer_args == {"report_to": "none"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["printed.yaml"]  # no run folder, no data built


def test_quickstart_prints_the_config_it_would_run(capsys, tmp_path, monkeypatch):
    """Each stage's model, output_dir and dataset.path as the quickstart sets them inside --out."""
    from posttrainlab.train.pretrain import base_cache_path

    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "run"
    code, out, err = cli(capsys, "quickstart", "--preset", "smoke", "--out", str(run), "--print-config",
                         "sft.optim.epochs=3")  # fmt: skip
    assert code == 0, err
    printed = tmp_path / "printed.yaml"
    printed.write_text(out)
    cfg = load_config(QuickstartConfig, printed)
    assert cfg.preset == "smoke" and cfg.sft.optim.epochs == 3 and cfg.sft.dataset.limit == 160
    assert cfg.sft.model == str(base_cache_path(cfg.base)) and cfg.sft.output_dir == str(run / "sft")
    assert cfg.dpo.model == cfg.grpo.model == cfg.process.prm.model == str(run / "sft")
    assert cfg.grpo.dataset.path == str(run / "data" / "arith-v1")
    # labels every-step (the smoke preset keeps the default's PRM recipe): the Math-Shepherd view holds every line
    assert Path(cfg.process.prm.dataset.path) == run / "arith-prm" / "math_shepherd" / "train.jsonl"
    assert cfg.process.prm.dataset.format == "math-shepherd" and cfg.process.prm.head == "result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["printed.yaml"]  # no run folder, no base cache


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "sft", "--config", "configs/arith/sft.yaml", "optim.epochs=-3"],
         "optim.epochs=-3.0: must be greater than 0 (or set optim.max_steps)"),
        (["train", "dpo", "--config", "configs/arith/dpo.yaml", "preference.source=bogus"],
         "preference.source='bogus': choose one of synthetic, policy, step"),
        (["train", "prm", "--config", "configs/prm/step.yaml", "optim.batch_size=0"], "optim.batch_size=0: must be at"),
        (["quickstart", "--preset", "smoke", "sft.optim.learning_rate=0"], "sft.optim.learning_rate=0.0: must be"),
        (["label", "mc", "--n", "0"], "--n 0: need at least one continuation per prefix"),
        (["label", "mc", "--dtype", "f8"], "--dtype 'f8': choose one of"),
    ],
)  # fmt: skip
def test_print_config_refuses_an_impossible_setting_in_one_line(capsys, tmp_path, monkeypatch, args, message):
    """``--print-config`` showed ``epochs: -3.0`` and ``source: bogus`` without complaint (issue #25): the values are
    checked as the config loads (config.check_settings), so it refuses them as the run would, exit 2."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *args, "--print-config")
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []
