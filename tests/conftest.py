"""Shared pytest setup: make test helpers in ``tests/`` (e.g. ``fakehub``, ``tiny_models``) importable,
and the session fixtures several test folders use (an arith-v1 build, a tiny untrained model).

``tests/`` has no ``__init__.py``; pytest puts each test file's own folder on ``sys.path``, not
``tests/`` itself, so ``tests/data/test_hub.py`` could not ``import fakehub`` without this.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture(scope="session")
def arith_dir(tmp_path_factory) -> Path:
    """arith-v1 built once per session (``posttrain data prepare``)."""
    from posttrainlab.data.arith.release import prepare

    out = tmp_path_factory.mktemp("data") / "arith-v1"
    prepare(out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny untrained causal LM of ``tiny_models.SMALL`` saved in Hugging Face format."""
    from posttrainlab.models.tiny import init_model
    from tiny_models import SMALL

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "tiny")
