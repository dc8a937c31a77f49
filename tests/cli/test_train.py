"""``posttrain train``: a recipe of another kind is refused, and everything the trainers check without torch (run
folder, choices, model folders, data) is checked before the trainer module imports it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fresh_cli import fresh

from cli_capture import cli
from posttrainlab.config import SHIPPED, load_config
from posttrainlab.errors import BadInput
from posttrainlab.train.recipes import DPORecipe

RECIPES = {"arith/sft.yaml": "sft", "arith/dpo.yaml": "dpo", "arith/grpo.yaml": "grpo",
           "prm/step.yaml": "prm", "prm/span.yaml": "prm", "prm/soft.yaml": "prm"}  # fmt: skip


def test_every_shipped_recipe_records_its_kind():
    for name, kind in RECIPES.items():
        assert yaml.safe_load((SHIPPED / name).read_text())["kind"] == kind, name


@pytest.mark.parametrize("method, config", [("dpo", "arith/sft.yaml"), ("sft", "arith/dpo.yaml"),
                                            ("grpo", "prm/step.yaml"), ("prm", "arith/grpo.yaml")])  # fmt: skip
def test_a_recipe_of_another_kind_is_refused(capsys, tmp_path, monkeypatch, method, config):
    """``train dpo --config configs/arith/sft.yaml`` used to run: every key of the SFT file is a DPO field."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "train", method, "--config", f"configs/{config}", "--print-config")
    assert code == 2 and out == ""
    assert err.strip() == (
        f"posttrain: error: configs/{config}: kind {RECIPES[config]!r} (its kind: line), "
        f"but this command takes kind {method!r}"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_right_kind_prints_with_its_kind_line(capsys, tmp_path):
    code, out, err = cli(capsys, "train", "dpo", "--config", "configs/arith/dpo.yaml", "--print-config")
    assert code == 0, err
    assert out.startswith("kind: dpo\nmodel: runs/sft\n")
    printed = tmp_path / "printed.yaml"
    printed.write_text(out)
    assert load_config(DPORecipe, printed, kind="dpo") == load_config(DPORecipe, "configs/arith/dpo.yaml")


def test_a_file_without_kind_is_checked_by_its_keys_only(capsys, tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("model: runs/sft\noutput_dir: runs/mine\n")
    assert cli(capsys, "train", "dpo", "--config", str(own), "--print-config")[0] == 0
    own.write_text("length_grouping: false\n")  # an SFT-only key: refused by the keys, as before
    code, _, err = cli(capsys, "train", "dpo", "--config", str(own), "--print-config")
    assert code == 2 and "length_grouping" in err


def test_load_config_without_kind_takes_the_line_out_unchecked():
    from posttrainlab.train.recipes import SFTRecipe

    assert load_config(SFTRecipe, "configs/arith/sft.yaml").output_dir == "runs/sft"
    with pytest.raises(BadInput, match="kind 'sft'"):
        load_config(SFTRecipe, "configs/arith/sft.yaml", kind="grpo")


@pytest.fixture
def model(tiny_model) -> str:
    return str(tiny_model)


@pytest.mark.parametrize(
    "method, config, overrides, fragment",
    [
        ("sft", "arith/sft.yaml", ["model={tmp}/nope"], "{tmp}/nope: no such model folder"),
        ("sft", "arith/sft.yaml", ["model={model}", "dataset.path={tmp}/nodata"], "dataset.path {tmp}/nodata: no such"),
        ("dpo", "arith/dpo.yaml", ["model={model}", "ref_model={tmp}/noref"], "{tmp}/noref: no such model folder"),
        ("prm", "prm/step.yaml", ["model={model}", "head=classifier", "dataset.path=x"], "head 'classifier'"),
        ("prm", "prm/step.yaml", ["model={model}", "dataset.path={tmp}/no.jsonl"], "dataset.path {tmp}/no.jsonl: no"),
    ],
)
def test_bad_paths_and_choices_are_refused_before_torch(tmp_path, model, method, config, overrides, fragment):
    """They used to wait for the trainer module's torch/TRL import (5-9 s here) before being refused."""
    values = {"tmp": tmp_path, "model": model}
    args = [o.format(**values) for o in overrides] + [f"output_dir={tmp_path / 'run'}"]
    r = fresh("train", method, "--config", f"configs/{config}", *args)
    assert r.code == 2 and fragment.format(**values) in r.line
    assert not r.torch and not (tmp_path / "run").exists()


def test_a_foreign_output_dir_is_refused_before_torch(tmp_path, model):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    r = fresh("train", "sft", "--config", "configs/arith/sft.yaml", f"model={model}", f"output_dir={run}")
    assert r.code == 2 and "notes.txt" in r.line and not r.torch
    assert sorted(p.name for p in Path(run).iterdir()) == ["notes.txt"]
