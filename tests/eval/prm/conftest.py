"""Fixtures for the PRM evaluation tests: an arith-v1 build, fakes with known outputs, a tiny policy and PRM.

``FakeBackend`` returns, for sample j of a prompt, one of four fixed solutions built from the prompt's
own problem (``KINDS``), so every exact step label is known in advance. ``OracleScorer`` scores a step
0.9 when it is right and 0.1 when it is wrong (``step_verdicts``), or a fixed table of scores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiny_models import SMALL, one_torch_thread


@pytest.fixture(scope="session")
def one_thread():
    """One torch thread: the models are tiny and the machine is shared (see tests/eval/test_policy_eval.py)."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory, one_thread) -> Path:
    from posttrainlab.models.tiny import init_model

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "policy")


@pytest.fixture(scope="session")
def tiny_prm(tmp_path_factory, tiny_policy) -> Path:
    """An untrained token-classification PRM on the tiny policy, saved as ``posttrain train prm`` saves one."""
    from posttrainlab.models.prm import load_for_training
    from posttrainlab.models.prm_spec import write_spec

    out = tmp_path_factory.mktemp("models") / "prm"
    model, tokenizer, spec = load_for_training(tiny_policy, head="token-cls")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_spec(spec, out)
    return out
