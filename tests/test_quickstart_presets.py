"""Quickstart presets are YAML files in ``configs/quickstart/`` read by ``load_config`` over ``QuickstartConfig``'s
defaults, which are the main job: ``default.yaml`` sets nothing, the other presets state what they change
(``extends:``), and ``--preset FILE.yaml`` reads a preset of the user's. The values pinned here are the recipes the
README's and docs/experiments.md's results were measured with."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from posttrainlab.config import SHIPPED, load_config
from posttrainlab.errors import BadInput
from posttrainlab.quickstart import PRESET_DIR, QuickstartConfig, planned_stages, preset_names, quickstart_config
from posttrainlab.train.pretrain import PretrainConfig
from posttrainlab.train.recipes import SFTRecipe

#: what the quickstart sets itself in every stage recipe (``quickstart.place``)
PLACED = {"model", "output_dir", "dataset.path", "dataset.eval_path"}


def flat(config, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        out |= flat(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}": value}
    return out


def changed(a, b) -> set[str]:
    mine, theirs = flat(asdict(a)), flat(asdict(b))
    return {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)}


def test_four_presets_at_most():
    assert PRESET_DIR == SHIPPED / "quickstart"
    assert preset_names() == ["default", "scarce", "smoke", "smollm2"]
    assert [quickstart_config(name).preset for name in preset_names()] == preset_names()


def test_the_default_preset_is_the_codes_defaults():
    assert asdict(quickstart_config("default")) == asdict(QuickstartConfig())
    body = [x for x in (PRESET_DIR / "default.yaml").read_text().splitlines() if x.strip() and not x.startswith("#")]
    assert body == ["{}"]


def test_the_default_is_the_measured_stable_instrument():
    """The base at lr 5e-4 with 10% warm-up and the 4-epoch SFT at 5e-4 (stable over base seeds on dev, the same
    weights on three machines), no other method (RFT never beat its control with 3,000 SFT solutions), and the process
    supervision chosen on dev; the RFT recipe is the one ``methods=[rft,sft-continued]`` and the scarce preset use."""
    cfg = QuickstartConfig()
    assert changed(cfg.base, PretrainConfig()) == {"train.learning_rate", "train.warmup_ratio"}
    assert (cfg.base.train.learning_rate, cfg.base.train.warmup_ratio, cfg.base.model.seed) == (5e-4, 0.1, 1)
    sft = cfg.sft
    assert (sft.dataset.split, sft.optim.epochs, sft.optim.learning_rate, sft.optim.batch_size) == (
        "sft_train_3k", 4, 5e-4, 16)  # fmt: skip
    assert cfg.methods == [] and cfg.continued_steps_from == "rft" and cfg.seeds == 1
    rft = cfg.rft
    assert (rft.dataset.split, rft.sft_data.split, rft.sft_ratio, rft.rounds) == ("rl_train", "sft_train_3k", 1.0, 1)
    assert (rft.rejection.k, rft.rejection.temperature, rft.rejection.max_new_tokens, rft.rejection.filter) == (
        8, 1.0, 48, "process")  # fmt: skip
    assert (rft.optim.epochs, rft.optim.learning_rate, rft.optim.batch_size) == (1, 2e-5, 16)
    assert (cfg.eval.split, cfg.eval.limit, cfg.eval.samples, cfg.eval.sample_temperature) == ("test", None, 8, 1.0)
    p = cfg.process
    assert (p.k, p.limit, p.train_prompts, p.labelling.labels, p.labelling.missing_answer) == (
        8, None, ["rl_train_1500"], "every-step", "explicit")  # fmt: skip
    assert (p.prm.head, p.prm.input_format, p.prm.optim.epochs, p.prm.optim.learning_rate) == (
        "result", "policy", 1, 1e-4)  # fmt: skip
    assert (p.bon_n, p.bon_limit, p.bon_temperature, p.beam.aggregation, p.beam.beams) == (16, 300, 0.8, "min", 4)
    assert planned_stages(cfg) == [
        *("prepare", "pretrain", "sft", "eval-sft"),
        *("arith-prm", "prm", "eval-prm", "best-of-n", "beam-search", "report"),
    ]
    with_rft = planned_stages(quickstart_config("default", ["methods=[rft,sft-continued]"]))
    assert with_rft[4:8] == ["rft", "eval-rft", "sft-continued", "eval-sft-continued"]


def test_the_standalone_sft_recipe_is_another_one():
    # configs/arith/sft.yaml is the converged recipe on the old base (docs/experiments.md)
    recipe = load_config(SFTRecipe, "configs/arith/sft.yaml")
    assert (recipe.optim.epochs, recipe.optim.learning_rate) == (6, 5e-4)


def test_the_scarce_preset_is_the_default_with_1000_solutions_and_rft_on_1500_prompts():
    """Chosen on dev: the default's base and SFT compute (756 steps) on sft_train's 1,000 solutions, in fp32 on a
    CPU as measured; RFT on rl_train_1500 (1:1 with sft_train, 3 epochs at 1e-4) beside its control; no PRM
    stages."""
    scarce, default = quickstart_config("scarce"), QuickstartConfig()
    assert asdict(scarce.base) == asdict(default.base)  # one cached base for both
    assert changed(scarce.sft, default.sft) == {"dataset.split", "optim.epochs", "optim.bf16"}
    assert (scarce.sft.dataset.split, scarce.sft.optim.epochs, scarce.sft.optim.bf16) == ("sft_train", 12, "gpu")
    assert changed(scarce.rft, default.rft) == {"dataset.split", "sft_data.split", "optim.epochs",
                                                "optim.learning_rate"}  # fmt: skip
    assert (scarce.rft.dataset.split, scarce.rft.optim.epochs, scarce.rft.optim.learning_rate) == (
        "rl_train_1500", 3, 1e-4)  # fmt: skip
    assert not scarce.process.enabled and scarce.methods == ["rft", "sft-continued"]


def test_smoke_runs_the_defaults_stages_small():
    smoke = quickstart_config("smoke")
    assert (smoke.base.model.num_hidden_layers, smoke.base.model.seed, smoke.base.corpus.size) == (2, 0, 4000)
    assert (smoke.eval.limit, smoke.eval.samples, smoke.process.bon_limit) == (40, 2, 20)
    default = planned_stages(QuickstartConfig())
    # and one method, sft-continued (not rft, which keeps no sample of so small a policy)
    assert planned_stages(smoke) == [*default[:4], "sft-continued", "eval-sft-continued", *default[4:]]


def test_smollm2_keeps_the_measured_recipe():
    real = quickstart_config("smollm2")
    assert real.base_model == "smollm2-135m-instruct" and real.eval.eval_base and real.methods == ["dpo", "grpo"]
    assert all(r.lora.enabled and r.lora.dropout == 0.0 for r in (real.sft, real.dpo, real.grpo))
    assert not real.process.prm.lora.enabled and (real.sft.dataset.limit, real.eval.limit) == (640, 100)
    # its PRM as measured (README): the token-classification head on first-error labels, greedy eval only
    p = real.process
    assert (p.prm.head, p.labelling.labels, p.train_prompts, real.eval.samples) == (
        "token-cls", "first-error", ["rl_train"], 0)  # fmt: skip
    assert real.sft.optim.bf16 == p.prm.optim.bf16 == "gpu"  # fp32 on a CPU, as measured (the default's: auto)


def test_a_preset_file_of_ones_own_extends_a_preset(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("extends: smoke\nmethods: [dpo]\n")
    cfg = quickstart_config(str(mine), ["eval.limit=8"])
    assert cfg.preset == "mine" and cfg.methods == ["dpo"] and cfg.eval.limit == 8
    assert asdict(cfg.sft) == asdict(quickstart_config("smoke").sft)
    child = tmp_path / "child.yaml"  # a chain, and a path relative to the file
    child.write_text("extends: mine.yaml\nseeds: 2\n")
    cfg = quickstart_config(str(child))
    assert (cfg.methods, cfg.seeds, cfg.base.corpus.size) == (["dpo"], 2, 4000)
    with pytest.raises(BadInput, match="no such config file"):
        quickstart_config(str(tmp_path / "nope.yaml"))
    with pytest.raises(BadInput, match="unknown preset 'huge': choose one of default, scarce, smoke, smollm2"):
        quickstart_config("huge")


def test_extends_refuses_cycles_and_unknown_parents(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("extends: b.yaml\n")
    b.write_text("extends: a.yaml\n")
    with pytest.raises(BadInput, match="extends itself"):
        quickstart_config(str(a))
    a.write_text("extends: nothing\n")
    with pytest.raises(BadInput, match="unknown preset 'nothing'"):
        quickstart_config(str(a))
    a.write_text("extends: [smoke]\n")
    with pytest.raises(BadInput, match="extends: expected a preset name"):
        quickstart_config(str(a))


@pytest.mark.parametrize("name, pointer", [("stable", "drop --preset"), ("effects", "docs/experiments.md")])
def test_retired_presets_say_where_they_went(name, pointer):
    with pytest.raises(BadInput, match=f"preset '{name}' was retired: .*{pointer}"):
        quickstart_config(name)
