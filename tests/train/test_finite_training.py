"""Finite training only (issue #42): rates and weights that are not finite are refused with the other recipe values,
and a step whose loss, gradient norm or weights are not finite stops the run: one line, exit 1, no model, no
``train_summary.json``. ``optim.learning_rate=inf`` used to train, print ``grad nan``, save a NaN model and a summary
holding ``Infinity``, exit 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]


def _strict(text: str):
    """``json.loads`` that refuses ``NaN``/``Infinity`` (what other JSON readers do)."""

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "cls, override, message",
    [
        ("SFTRecipe", "optim.learning_rate=inf", "optim.learning_rate=inf: must be a finite number"),
        ("SFTRecipe", "optim.learning_rate=nan", "optim.learning_rate=nan: must be a finite number"),
        ("SFTRecipe", "optim.max_grad_norm=inf", "optim.max_grad_norm=inf: must be a finite number"),
        ("DPORecipe", "beta=nan", "beta=nan: must be a finite number"),
        ("DPORecipe", "sft_weight=inf", "sft_weight=inf: must be a finite number"),
        ("GRPORecipe", "rewards.correctness=nan", "rewards.correctness=nan: must be a finite number"),
        ("GRPORecipe", "rewards.format=-1", "rewards.format=-1.0: must be >= 0"),
        ("GRPORecipe", "epsilon=inf", "epsilon=inf: must be a finite number"),
        ("RFTRecipe", "sft_ratio=inf", "sft_ratio=inf: must be a finite number"),
        ("RFTRecipe", "rejection.temperature=inf", "rejection.temperature=inf: must be a finite number"),
        ("PRMRecipe", "head_learning_rate=inf", "head_learning_rate=inf: must be a finite number"),
        ("PRMRecipe", "class_weights=[nan,1.0]", "class_weights [nan, 1.0]: expected two finite positive numbers"),
        ("PretrainConfig", "train.learning_rate=inf", "train.learning_rate=inf: must be a finite number"),
        ("PretrainConfig", "train.learning_rate=0", "train.learning_rate=0.0: must be greater than 0"),
        ("PretrainConfig", "train.seq_len=0", "train.seq_len=0: must be at least 1"),
    ],
)
def test_rates_and_weights_that_are_not_finite_are_refused_as_the_recipe_loads(cls, override, message):
    from posttrainlab.train import pretrain, prm_recipe, recipes

    recipe_class = getattr(recipes, cls, None) or getattr(prm_recipe, cls, None) or getattr(pretrain, cls)
    overrides = [override, "dataset.path=rows.jsonl"] if cls == "PRMRecipe" else [override]
    with pytest.raises(BadInput) as e:
        load_config(recipe_class, None, overrides)
    assert str(e.value).startswith(message), str(e.value)


def test_the_defaults_and_finite_values_still_load():
    from posttrainlab.train.pretrain import PretrainConfig
    from posttrainlab.train.recipes import GRPORecipe, SFTRecipe

    assert (
        load_config(SFTRecipe, ROOT / "configs/arith/sft.yaml", ["optim.learning_rate=0.5"]).optim.learning_rate == 0.5
    )
    assert load_config(GRPORecipe, None, ["rewards.format=0"]).rewards.format == 0
    assert load_config(PretrainConfig, ROOT / "configs/models/tiny-base.yaml").train.learning_rate == 1e-3


def test_print_config_refuses_an_infinite_learning_rate(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(capsys, "train", "sft", "--config", "configs/arith/sft.yaml", "optim.learning_rate=inf",
                         f"output_dir={tmp_path / 'run'}", "--print-config")  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and "optim.learning_rate=inf: must be a finite" in err
    assert not (tmp_path / "run").exists()


def test_the_checks_name_the_step_and_the_value():
    import torch
    from transformers import TrainerControl, TrainerState

    from posttrainlab.errors import Diverged
    from posttrainlab.train.finite import check_logs, check_weights, finite_callback, gradient_norm

    model = torch.nn.Linear(2, 1)
    model.weight.grad = torch.tensor([[3.0, 4.0]])
    model.bias.grad = torch.tensor([0.0])
    assert gradient_norm(model) == pytest.approx(5.0)  # sqrt(3^2 + 4^2), by hand
    callback, state, control = finite_callback("sft"), TrainerState(global_step=6, max_steps=10), TrainerControl()
    callback.on_pre_optimizer_step(None, state, control, model=model)  # finite: passes
    model.bias.grad = torch.tensor([math.nan])
    with pytest.raises(Diverged, match=r"^sft step 7: gradient norm nan is not finite; sft stopped: no model saved"):
        callback.on_pre_optimizer_step(None, state, control, model=model)
    check_logs("dpo", 3, {"loss": 0.7, "grad_norm": 2.0, "rewards/margins": math.nan})  # only loss and grad_norm
    with pytest.raises(Diverged, match=r"^dpo step 4: grad norm inf is not finite"):
        check_logs("dpo", 4, {"loss": 0.7, "grad_norm": math.inf})
    callback.on_step_end(None, state, control, model=model)  # not saving, not the last step: weights not read
    with torch.no_grad():
        model.weight[0, 1] = math.inf
    control.should_save = True
    with pytest.raises(Diverged, match=r"^sft step 6: weight weight is not finite"):
        callback.on_step_end(None, state, control, model=model)
    with pytest.raises(Diverged, match="weight weight"):
        check_weights("sft", 10, model)


def test_a_diverging_run_stops_with_one_line_and_leaves_no_model_and_no_summary(capsys, tiny_model, arith_dir,
                                                                               tmp_path):  # fmt: skip
    """A finite but huge rate (1e30) diverges at the second step: the run stops there, exit 1, one line; the folder
    holds no model and no train_summary.json (a quickstart reads that as not done), and its log is strict JSON."""
    out = tmp_path / "sft"
    code, _, err = cli(capsys, "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"), f"model={tiny_model}",
                       f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=8", "optim.max_steps=4",
                       "optim.batch_size=2", "optim.save_steps=100", "optim.logging_steps=1",
                       "optim.lr_scheduler=constant", "optim.warmup_ratio=0", "optim.learning_rate=1e30")  # fmt: skip
    lines = err.strip().splitlines()
    assert code == 1, err
    assert lines[-1].startswith("posttrain: error: sft step ") and "is not finite; sft stopped" in lines[-1], err
    assert "Traceback" not in err
    assert not (out / "train_summary.json").exists() and not (out / "model.safetensors").exists()
    assert not list(out.glob("checkpoint-*"))  # save_steps 100: nothing was saved before the fault
    for line in (out / "train_log.jsonl").read_text().splitlines():
        _strict(line)


def test_every_json_the_lab_writes_is_strict():
    from posttrainlab.data.jsonl import dumps, strict_json

    text = strict_json({"train_loss": math.inf, "log": [{"loss": math.nan, "step": 1}]}, indent=2)
    assert _strict(text) == {"train_loss": None, "log": [{"loss": None, "step": 1}]}
    assert dumps({"id": "a", "v": math.nan}) == '{"id": "a", "v": null}'
    assert dumps({"id": "a", "v": 0.5, "t": "é"}) == '{"id": "a", "v": 0.5, "t": "é"}'  # the byte form is unchanged
