"""Fixtures of the SHARP pipeline tests: an arith-v1 build and a policy double (``pipeline_doubles``)."""

from __future__ import annotations

import pytest
from pipeline_doubles import MixedPolicy


@pytest.fixture
def mixed_policy() -> MixedPolicy:
    return MixedPolicy()


def pytest_collection_modifyitems(config, items):
    """Slow tests are opt-in (pyproject's marker: ``-m slow``, or the Makefile's ``-m "slow or not slow"``)."""
    if config.getoption("markexpr"):
        return
    skip = pytest.mark.skip(reason="slow: opt in with -m slow")
    for item in items:
        if "slow" in item.keywords and "pipeline" in item.nodeid:
            item.add_marker(skip)
