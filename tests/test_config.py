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
    assert shipped == load_config(SFTRecipe, SHIPPED / "arith/sft.yaml") and shipped.optim.epochs == 6
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
    from posttrainlab.study import StudyConfig
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
        "study": lambda: StudyConfig,
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
        presets = SHIPPED / "quickstart" if rel.startswith("quickstart/") else None  # `extends: default`
        config = load_config(cls, SHIPPED / rel, presets=presets)
        if cls.__name__ == "PRMRecipe":
            config.check()  # its choices too


# issue #25: impossible values are refused when the config is loaded (config.check_settings), not after the work


@dataclass
class CheckedOptim:
    epochs: float = 1.0

    def check(self) -> None:
        if not self.epochs > 0:
            raise BadInput(f"epochs={self.epochs}: must be greater than 0")


@dataclass
class CheckedRun:
    optim: CheckedOptim = field(default_factory=CheckedOptim)
    kind_of_run: str = "sft"

    def check(self) -> None:
        if self.kind_of_run not in ("sft", "dpo"):
            raise BadInput(f"kind_of_run {self.kind_of_run!r}: choose one of sft, dpo")


@dataclass
class Outer:
    sft: CheckedRun = field(default_factory=CheckedRun)


def test_each_check_runs_at_load_and_a_nested_refusal_names_the_field_from_the_top():
    assert load_config(CheckedRun, None, ["optim.epochs=2"]).optim.epochs == 2
    with pytest.raises(BadInput, match=r"^optim\.epochs=-3\.0: must be greater than 0$"):
        load_config(CheckedRun, None, ["optim.epochs=-3"])
    with pytest.raises(BadInput, match=r"^kind_of_run 'bogus': choose one of sft, dpo$"):
        load_config(CheckedRun, None, ["kind_of_run=bogus"])
    with pytest.raises(BadInput, match=r"^sft\.optim\.epochs=0\.0: must be greater than 0$"):
        load_config(Outer, None, ["sft.optim.epochs=0"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.epochs=-3", "optim.epochs=-3.0: must be greater than 0 (or set optim.max_steps)"),
        ("optim.max_steps=0", "optim.max_steps=0: must be at least 1, or -1 to train optim.epochs"),
        ("optim.learning_rate=0", "optim.learning_rate=0.0: must be greater than 0"),
        ("optim.batch_size=0", "optim.batch_size=0: must be at least 1"),
        ("optim.grad_accum=-1", "optim.grad_accum=-1: must be at least 1"),
        ("optim.warmup_ratio=1.5", "optim.warmup_ratio=1.5: must be in [0, 1) (a share of the steps)"),
        ("dataset.limit=0", "dataset.limit=0: must be at least 1"),
        ("lora.r=0", "lora.r=0: must be at least 1"),
        ("output_dir=''", "output_dir: empty; name a folder"),
        ("max_length=0", "max_length=0: must be at least 1"),
    ],
)
def test_a_recipe_refuses_values_no_run_can_train_with(override, message):
    """``optim.epochs=-3`` trained 0 steps, exited 0 and saved the start model as the result (issue #25)."""
    from posttrainlab.train.recipes import SFTRecipe

    with pytest.raises(BadInput) as e:
        load_config(SFTRecipe, None, [override])
    assert str(e.value) == message
    assert load_config(SFTRecipe, None, ["optim.epochs=0", "optim.max_steps=5"]).optim.max_steps == 5


@pytest.mark.parametrize(
    "cls, override, message",
    [
        ("DPORecipe", "preference.source=bogus", "preference.source='bogus': choose one of synthetic, policy, step"),
        ("DPORecipe", "beta=0", "beta=0.0: must be greater than 0"),
        ("GRPORecipe", "num_generations=1", "num_generations=1: must be at least 2"),
        ("PRMRecipe", "head=classifier", "head 'classifier': choose one of token-cls, verdict, result"),
        ("PRMRecipe", "dataset.eval_limit=0", "dataset.eval_limit=0: must be at least 1"),
    ],
)
def test_unknown_choices_and_impossible_values_of_every_recipe(cls, override, message):
    from posttrainlab.train import prm_recipe, recipes

    recipe_class = getattr(recipes, cls, None) or getattr(prm_recipe, cls)
    overrides = [override, "dataset.path=rows.jsonl"] if cls == "PRMRecipe" else [override]
    with pytest.raises(BadInput) as e:
        load_config(recipe_class, None, overrides)
    assert str(e.value) == message


def test_the_quickstart_config_names_the_stage():
    from posttrainlab.quickstart import QuickstartConfig

    with pytest.raises(BadInput, match=r"^dpo\.preference\.source='bogus': choose one of synthetic, policy, step$"):
        load_config(QuickstartConfig, None, ["dpo.preference.source=bogus"])
    with pytest.raises(BadInput, match=r"^process\.prm\.optim\.batch_size=0: must be at least 1$"):
        load_config(QuickstartConfig, None, ["process.prm.optim.batch_size=0"])
