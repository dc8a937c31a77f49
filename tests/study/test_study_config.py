"""The study's config: presets, key=value overrides, and every value no run can use refused in one line."""

from __future__ import annotations

import hashlib

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.study import StudyConfig, preset_names, sources, study_config
from posttrainlab.study.layout import labellings


def test_the_shipped_presets_load():
    assert preset_names() == ["label-sources", "smoke"]
    cfg = study_config("label-sources")
    assert cfg.preset == "label-sources" and cfg.mc.ns == [1, 4, 16] and cfg.judge.model is None
    assert cfg.prm.input_format == "policy" and cfg.bon.n == 16 and cfg.bon.split == "test"
    smoke = study_config("smoke", ["judge.noise=[0.2]"])
    assert smoke.preset == "smoke" and smoke.judge.noise == [0.2]


def test_every_source_and_labelling_of_a_config():
    cfg = study_config("label-sources", ["judge.model=smollm2-135m-instruct", "baseline=false"])
    assert [s.name for s in sources(cfg)] == [
        "exact", "mc-hard-1", "mc-hard-4", "mc-hard-16", "mc-soft-4", "mc-soft-16",
        "judge-0", "judge-0.1", "judge-0.3", "judge-model",
    ]  # fmt: skip
    assert [name for name, _ in labellings(cfg)] == [
        "exact", "mc-1", "mc-4", "mc-16", "judge-0", "judge-0.1", "judge-0.3", "judge-model",
    ]  # fmt: skip
    soft = next(s for s in sources(cfg) if s.name == "mc-soft-4")
    assert soft.soft and soft.labelling == "mc-4"


@pytest.mark.parametrize(
    "override,message",
    [
        ("mc.ns=[0,4]", "mc.ns=[0, 4]: need distinct N >= 1"),
        ("mc.ns=[4,4]", "mc.ns=[4, 4]: need distinct N"),
        ("mc.soft=[8]", "mc.soft=[8]: 8 is not one of ns"),
        ("judge.noise=[1.5]", "judge.noise=[1.5]: need distinct values in [0, 1]"),
        ("judge.max_attempts=0", "judge.max_attempts=0: must be at least 1"),
        ("solutions.k=0", "solutions.k=0: must be at least 1"),
        ("solutions.heldout_split=dev", "solutions.heldout_split=dev: an evaluation pool"),
        ("solutions.heldout_split=rl_train", "both rl_train"),
        ("solutions.train_split=nope", "solutions.train_split=nope: 'nope' is no arith-v1 split (prompt splits: "),
        ("solutions.temperature=0", "solutions.temperature=0.0: must be > 0"),
        ("bon.split=rl_extra", "bon.split=rl_extra: best-of-N runs on problems no PRM saw"),
        ("bon.n=0", "bon.n=0: need at least one sample"),
        ("prm.head=verdict", "prm.head=verdict: the study trains token-cls PRMs"),
        ("prm.optim.learning_rate=-1", "prm.optim.learning_rate=-1.0: must be greater than 0"),
        ("eval.format=step", "eval.format=step: the held-out solutions are math-shepherd rows"),
        ("policy.preset=nope", "policy: unknown preset 'nope'"),
        ("policy.overrides=[sft.optim.epochs=-1]", "policy: sft.optim.epochs=-1.0: must be greater than 0"),
        ("mc.nope=1", "Key 'nope' not in 'MCSettings'"),
    ],
)
def test_a_value_no_run_can_use_is_refused_when_loaded(override, message):
    with pytest.raises(BadInput) as e:
        study_config("smoke", [override])
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_an_unknown_config_name_is_refused():
    with pytest.raises(BadInput, match="unknown study config 'nope': choose one of label-sources, smoke"):
        study_config("nope")


def test_the_defaults_are_the_measured_preset():
    """configs/study/label-sources.yaml writes the defaults out; the file and the class must not drift apart."""
    from dataclasses import asdict

    assert asdict(study_config("label-sources")) == asdict(StudyConfig())


def test_without_from_the_quickstarts_own_stages_make_the_policy(tmp_path):
    """From a fresh clone one command does everything: the quickstart's prepare, pretrain and SFT come first."""
    from posttrainlab.study.plan import study_plan

    r, stages = study_plan(tmp_path / "out", study_config("label-sources"))
    names = [s.name for s in stages]
    assert names[:4] == ["prepare", "pretrain", "sft", "solutions"] and len(names) == 32  # docs/label-sources.md
    assert names[-2:] == ["eval-baseline", "report"] and "eval-sft" not in names
    sft = stages[2]
    assert sft.settings["model"] == "BASE" and sft.settings["dataset"].split == "sft_train_3k"  # the default SFT
    assert r.cfg.methods == [] and not r.cfg.process.enabled
    prm = next(s for s in stages if s.name == "prm-mc-soft-16")
    assert prm.after == ("label-mc-16", "sft") and prm.settings["recipe"]["supervision"] == "soft"
    assert prm.settings["recipe"]["dataset"]["path"] == str(
        tmp_path / "out" / "labels" / "mc-16" / "mc" / "train.jsonl"
    )


def test_with_from_only_the_data_is_prepared(tmp_path):
    from posttrainlab.study.plan import study_plan

    (tmp_path / "run" / "sft").mkdir(parents=True)
    (tmp_path / "run" / "sft" / "config.json").write_text("{}")
    (tmp_path / "run" / "sft" / "model.safetensors").write_bytes(b"weights")
    _, stages = study_plan(tmp_path / "out", study_config("label-sources"), tmp_path / "run")
    assert [s.name for s in stages][:2] == ["prepare", "solutions"] and len(stages) == 30
    identity = stages[1].settings["policy"]
    assert identity["policy"] == str((tmp_path / "run").resolve() / "sft")
    weights = {identity["policy"] + "/model.safetensors": hashlib.sha256(b"weights").hexdigest()}
    assert identity["weights"] == weights  # a changed --from model changes every stage's record
