"""Fixtures for MC labelling tests (helpers live in ``mc_fakes``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mc_fakes import arith_rows, write_jsonl


@pytest.fixture
def problems_file(tmp_path) -> Path:
    return write_jsonl(tmp_path / "problems.jsonl", arith_rows(12))
