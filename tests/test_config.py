"""Config loading: YAML sets fields, key=value overrides change them, every fault is one BadInput line."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from posttrainlab.config import load_config
from posttrainlab.errors import BadInput


@dataclass
class Optim:
    lr: float = 1e-3
    epochs: int = 1


@dataclass
class Data:
    path: str = "data/arith-v1"
    limit: int | None = None


@dataclass
class Run:
    name: str = "run"
    optim: Optim = field(default_factory=Optim)
    dataset: Data = field(default_factory=Data)


def test_defaults_yaml_then_overrides(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("name: sft\noptim:\n  lr: 0.01\ndataset:\n  limit: 1000\n")
    run = load_config(Run, cfg, ["optim.epochs=3", "dataset.limit=2000"])
    assert run == Run("sft", Optim(0.01, 3), Data("data/arith-v1", 2000))
    assert load_config(Run, cfg, ["dataset.limit=null"]).dataset.limit is None


@pytest.mark.parametrize(
    "yaml_text, overrides, fragment",
    [
        ("optim:\n  lrr: 1\n", [], "run.yaml: Key 'lrr' not in 'Optim'"),
        ("", ["optim.lrr=1"], "override 'optim.lrr=1': Key 'lrr' not in 'Optim'"),
        ("", ["optim.lr=fast"], "override 'optim.lr=fast': Value 'fast'"),
        ("", ["epochs"], "override 'epochs': expected key=value"),
        ("optim: [1, 2\n", [], "run.yaml:"),
        ("- 1\n- 2\n", [], "run.yaml:"),
    ],
)
def test_faults_are_one_line(tmp_path, yaml_text, overrides, fragment):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml_text or "name: x\n")
    with pytest.raises(BadInput) as e:
        load_config(Run, cfg, overrides)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(BadInput, match="no such config file"):
        load_config(Run, tmp_path / "nope.yaml")
