"""The runners' settings (``runners.settings``): one class per runner, each default written once there, and the CLI
verbs, the quickstart and the Python API building the same objects."""

from __future__ import annotations

import inspect
from dataclasses import MISSING, asdict, fields

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.runners.settings import (
    BeamSettings,
    BestOfNSettings,
    JudgeSettings,
    PolicyEvalSettings,
    PRMEvalSettings,
)


def verbs():
    from posttrainlab.cli.beam_search import beam_search
    from posttrainlab.cli.eval_prm import best_of_n, prm
    from posttrainlab.cli.evaluate import judge, policy

    return [
        (policy, PolicyEvalSettings, {}),
        (prm, PRMEvalSettings, {"fmt": "format"}),
        (best_of_n, BestOfNSettings, {}),
        (beam_search, BeamSettings, {}),
        (judge, JudgeSettings, {"timeout": "timeout_s"}),
    ]


@pytest.mark.parametrize("verb,cls,names", verbs(), ids=lambda v: getattr(v, "__name__", ""))
def test_every_flag_defaults_to_its_settings_field(verb, cls, names):
    """A flag that sets a field has that field's default (the CLI writes none of its own), but where the flag's
    text differs from the field's value: ``--samples`` (unset: ``k``, 0 in the class) and ``--ns`` (a text)."""
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    checked = 0
    for name, param in inspect.signature(verb).parameters.items():
        field = names.get(name, name)
        if field in defaults and name not in ("ns",):
            assert param.default.default == defaults[field], f"{verb.__name__} --{name}"
            checked += 1
    assert checked >= 6


def test_the_quickstart_holds_and_builds_the_same_classes():
    from posttrainlab.quickstart.config import QuickstartConfig, quickstart_config

    cfg = QuickstartConfig()
    assert isinstance(cfg.eval, PolicyEvalSettings) and isinstance(cfg.process.beam, BeamSettings)
    # bon_n, bon_temperature: the class's defaults; the main job's first 300 problems and min-aggregated beams
    assert cfg.process.best_of_n() == BestOfNSettings(limit=300)
    beam = cfg.process.beam_search()
    assert type(beam) is BeamSettings and asdict(beam) == asdict(BeamSettings(limit=300, aggregation="min"))
    eval_ = cfg.eval.policy_settings(beta=0.3)
    assert type(eval_) is PolicyEvalSettings and eval_.beta == 0.3
    assert (eval_.split, eval_.batch_size, eval_.max_new_tokens, eval_.sample_temperature) == ("test", 64, 48, 1.0)

    cfg = quickstart_config("smoke", ["process.beam.beams=2", "process.bon_limit=7", "eval.limit=40", "eval.k=2",
                                      "eval.samples=4"])  # fmt: skip
    assert (cfg.process.beam_search().beams, cfg.process.beam_search().limit) == (2, 7)
    assert (cfg.process.best_of_n().n, cfg.process.best_of_n().limit) == (4, 7)
    assert (cfg.eval.limit, cfg.eval.policy_settings(0.1).n_samples) == (40, 4)


@pytest.mark.parametrize(
    "override,message",
    [
        ("process.beam.limit=3", "process.beam.limit=3: beam search runs on the best-of-N problems"),
        ("process.beam.temperature=0", "process.beam.temperature=0.0: beam search needs temperature > 0"),
        ("eval.beta=0.5", "eval.beta=0.5: the quickstart ranks a DPO policy's pairs with dpo.beta"),
        ("eval.k=0", "eval.k=0, samples=2: need 1 <= k <= samples"),
    ],
)
def test_the_quickstart_refuses_what_its_runs_would(override, message):
    from posttrainlab.quickstart.config import quickstart_config

    with pytest.raises(BadInput, match=message.replace("(", r"\(")):
        quickstart_config("smoke", [override])


def test_checks_name_the_setting():
    cases = [
        (PolicyEvalSettings(limit=0), "limit=0"),
        (PolicyEvalSettings(k=3, samples=2), "k=3, samples=2"),
        (PolicyEvalSettings(sample_temperature=0.0), "sample_temperature=0.0"),
        (PRMEvalSettings(threshold=1.5), "threshold=1.5"),
        (PRMEvalSettings(batch_size=0), "batch_size=0"),
        (BestOfNSettings(n=4, ns=[1, 8]), "between 1 and the number of samples 4"),
        (BestOfNSettings(vote_aggregation="max"), "vote aggregation 'max'"),
        (BeamSettings(max_step_tokens=0), "max_step_tokens=0"),
        (BeamSettings(prm_batch_size=0), "prm_batch_size=0"),
        (JudgeSettings("d", "m", num_threads=0), "--num-threads 0"),
    ]
    for settings, message in cases:
        with pytest.raises(BadInput, match=message):
            settings.check()
    for ok in (PolicyEvalSettings(), PRMEvalSettings(), BestOfNSettings(), BeamSettings(), JudgeSettings("d", "m")):
        ok.check()
    assert PolicyEvalSettings(k=4).n_samples == 4 and PolicyEvalSettings(k=2, samples=8).n_samples == 8
