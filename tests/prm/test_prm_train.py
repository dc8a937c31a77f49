"""``posttrain train prm``: every supervision and head trains on the tiny model, resumes, and fails in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from posttrainlab.cli import main
from posttrainlab.config import load_config
from posttrainlab.prm import PRM
from posttrainlab.train.prm import train_prm
from posttrainlab.train.prm_recipe import PRMRecipe

ROOT = Path(__file__).resolve().parents[2]
MC_STEPS = Path(__file__).resolve().parent / "assets/mc_value_steps.jsonl"
FAST = ["optim.max_steps=2", "optim.batch_size=4", "optim.learning_rate=0.01", "optim.logging_steps=1"]


def cli(*args: str) -> int:
    """Run ``posttrain`` in this process (a subprocess would pay the torch import again); its exit code."""
    try:
        main(list(args))
    except SystemExit as e:
        return e.code
    return 0


def weights(path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "model.safetensors"))


def changed(a, b) -> int:
    import torch

    return sum(not torch.equal(a[k], b[k]) for k in a if k in b and a[k].shape == b[k].shape)


def losses(out: Path) -> list[float]:
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    values = [r["loss"] for r in rows if "loss" in r]
    assert values and all(math.isfinite(v) for v in values), rows
    return values


def recipe(config: str, tiny_model, out, *extra) -> PRMRecipe:
    overrides = [f"model={tiny_model}", f"output_dir={out}", *FAST, *extra]
    return load_config(PRMRecipe, ROOT / f"configs/prm/{config}.yaml", overrides)


@pytest.mark.parametrize(
    "config,extra,head",
    [
        ("step", [], "token-cls"),
        ("span", ["head=verdict"], "verdict"),
        ("soft", [], "verdict"),  # grouped MC-value rows
        ("soft", ["head=token-cls", "dataset.mc_rows=messages"], "token-cls"),  # the card's own rows
        ("step", ["head=verdict", "chat_template=false", "train_on_last_step_only=true", "class_weights=[2.0,1.0]",
                  f"dataset.path={ROOT / 'tests/assets/formats/ms_list.jsonl'}", "dataset.format=math-shepherd"],
         "verdict"),
    ],
)  # fmt: skip
def test_each_supervision_and_head_trains(tiny_model, tmp_path, config, extra, head):
    out = tmp_path / "prm"
    train_prm(recipe(config, tiny_model, out, *extra))
    assert changed(weights(tiny_model), weights(out)) > 0
    losses(out)
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["method"] == "prm" and summary["global_step"] == 2
    saved = json.loads((out / "prm_config.json").read_text())
    assert saved["head"] == head
    prm = PRM.from_pretrained(out)
    scores = prm.score("What is 2 + 3?", ["2 + 3 = 5.", "Answer: 5"])
    assert len(scores) == 2 and all(0.0 < s < 1.0 for s in scores)


def test_an_eval_path_logs_eval_loss_on_the_held_out_rows(tiny_model, tmp_path):
    """``dataset.eval_path``: the held-out rows' loss at every ``eval_steps``, in train_log.jsonl (the report's
    eval-loss curve)."""
    out, held = tmp_path / "prm", ROOT / "tests/assets/formats/span_good_step.jsonl"
    train_prm(recipe("step", tiny_model, out, f"dataset.eval_path={held}", "dataset.eval_steps=1"))
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval_loss" in r]
    assert [r["step"] for r in evals] == [1, 2] and all(math.isfinite(r["eval_loss"]) for r in evals)
    train_prm(recipe("step", tiny_model, tmp_path / "no-eval"))
    assert not any("eval_loss" in line for line in (tmp_path / "no-eval" / "train_log.jsonl").read_text().splitlines())


def test_cli_run_then_resume(tiny_model, tmp_path, capsys):
    out = tmp_path / "prm"
    # a constant rate: a cosine schedule ends the first run at lr 0, and the optimizer state resumes with it
    args = ["train", "prm", "--config", str(ROOT / "configs/prm/step.yaml"), f"model={tiny_model}",
            f"output_dir={out}", *FAST, "optim.save_steps=1", "optim.lr_scheduler=constant"]  # fmt: skip
    assert cli(*args) == 0
    assert "prm: model saved to" in capsys.readouterr().out
    assert (out / "checkpoint-2" / "prm_config.json").is_file() and (out / "recipe.yaml").is_file()
    first = weights(out)
    train_prm(recipe("step", tiny_model, out, "optim.max_steps=3", "optim.save_steps=1", "optim.lr_scheduler=constant"))
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-2") and summary["global_step"] == 3
    assert changed(first, weights(out)) > 0


def test_fine_tunes_a_qwen_prm_layout(qwen_prm, tmp_path):
    """Starting from Qwen2.5-Math-PRM's layout keeps its score MLP and architecture."""
    path, _ = qwen_prm
    out = tmp_path / "prm"
    train_prm(recipe("step", path, out))
    assert json.loads((out / "config.json").read_text())["architectures"] == ["Qwen2ForProcessRewardModel"]
    after = weights(out)
    assert {"score.0.weight", "score.2.weight"} <= set(after) and changed(weights(path), after) > 0
    assert len(PRM.from_pretrained(out).score("q", ["a", "b"])) == 2


def test_lora_run_saves_a_merged_model(tiny_model, tmp_path):
    out = tmp_path / "prm"
    train_prm(recipe("step", tiny_model, out, "lora.enabled=true", "lora.r=4", "lora.dropout=0.0"))
    assert not (out / "adapter_config.json").exists()
    assert changed(weights(tiny_model), weights(out)) > 0
    assert len(PRM.from_pretrained(out).score("q", ["a", "b"])) == 2


@pytest.mark.parametrize(
    "extra,message",
    [
        (["bogus=1"], "bogus"),
        (["dataset.path=/nonexistent/rows.jsonl"], "/nonexistent/rows.jsonl: no such file"),
        (["supervision=span"], "supervision span needs dataset.format span"),
        (["head=classifier"], "head 'classifier': choose one of token-cls, verdict"),
        ([f"dataset.path={ROOT / 'tests/assets/formats/step_bad.jsonl'}"], "step_bad.jsonl: row "),
        ([f"dataset.path={ROOT / 'tests/assets/formats/mc_value.jsonl'}", "dataset.format=mc-value"],
         "needs a string `question`"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, tiny_model, extra, message):
    # model= a local folder: the data errors must not depend on whether this machine has cached the tiny base
    out = tmp_path / "prm"
    argv = ("train", "prm", "--config", str(ROOT / "configs/prm/step.yaml"), f"model={tiny_model}", f"output_dir={out}")
    assert cli(*argv, *extra) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("posttrain: error: ")
    assert not out.exists()  # nothing written for a run that never started
