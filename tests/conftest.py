"""Shared pytest setup: make test helpers in ``tests/`` (e.g. ``fakehub``) importable.

``tests/`` has no ``__init__.py``; pytest puts each test file's own folder on ``sys.path``, not
``tests/`` itself, so ``tests/data/test_hub.py`` could not ``import fakehub`` without this.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
