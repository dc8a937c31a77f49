"""Config loading: YAML sets fields, key=value overrides change them, every fault is one BadInput line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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


def test_a_documented_configs_path_loads_the_shipped_file_from_any_folder(tmp_path, monkeypatch):
    """``--config configs/arith/sft.yaml`` works from a pip install: missing under the cwd, the shipped file loads;
    a file of that name under the cwd is the user's and wins."""
    from posttrainlab.config import SHIPPED, config_path
    from posttrainlab.train.recipes import SFTRecipe

    monkeypatch.chdir(tmp_path)
    shipped = load_config(SFTRecipe, "configs/arith/sft.yaml")
    assert shipped == load_config(SFTRecipe, SHIPPED / "arith/sft.yaml") and shipped.optim.epochs == 3
    assert config_path("configs/arith/sft.yaml") == SHIPPED / "arith/sft.yaml"
    with pytest.raises(BadInput, match="configs/arith/nope.yaml: no such config file"):
        load_config(SFTRecipe, "configs/arith/nope.yaml")
    (tmp_path / "configs/arith").mkdir(parents=True)
    (tmp_path / "configs/arith/sft.yaml").write_text("optim:\n  epochs: 7\n")
    assert load_config(SFTRecipe, "configs/arith/sft.yaml").optim.epochs == 7


def test_the_repository_configs_folder_is_the_shipped_one():
    from posttrainlab.config import SHIPPED

    root = Path(__file__).resolve().parents[1]
    assert (root / "configs").resolve() == SHIPPED and SHIPPED.parent.name == "posttrainlab"


def _schema(rel: str):
    """The config class a shipped YAML sets, by its folder (and name); None for accelerate's own files."""
    from posttrainlab.label.mc.config import MCRunConfig
    from posttrainlab.models.tiny import TinyModelConfig
    from posttrainlab.quickstart import QuickstartConfig
    from posttrainlab.train.pretrain import PretrainConfig
    from posttrainlab.train.prm_recipe import PRMRecipe
    from posttrainlab.train.recipes import RECIPES

    folder, name = rel.split("/")[0], Path(rel).stem
    by_folder = {
        "arith": lambda: RECIPES[name.split("-")[0]],  # grpo-long.yaml is a grpo recipe
        "models": lambda: {"tiny": TinyModelConfig, "tiny-base": PretrainConfig}[name],
        "prm": lambda: PRMRecipe,
        "label": lambda: {"mc": MCRunConfig}[name],
        "quickstart": lambda: QuickstartConfig,
        "accelerate": lambda: None,
    }
    assert folder in by_folder, f"configs/{rel}: name its config class in tests/test_config.py _schema"
    return by_folder[folder]()


def test_every_shipped_config_loads():
    """Every YAML under posttrainlab/configs (recursively) loads into its config class, the accelerate ones into
    accelerate's own; a file this test cannot place fails it."""
    from posttrainlab.config import SHIPPED

    files = sorted(p.relative_to(SHIPPED).as_posix() for p in SHIPPED.rglob("*.y*ml"))
    assert len(files) >= 15, files
    for rel in files:
        cls = _schema(rel)
        if cls is None:
            from accelerate.commands.config.config_args import ClusterConfig

            assert ClusterConfig.from_yaml_file(SHIPPED / rel).num_processes >= 2, rel
            continue
        config = load_config(cls, SHIPPED / rel)
        if cls.__name__ == "PRMRecipe":
            config.check()  # its choices too
