"""Where posttrainlab keeps what it builds once and reuses: ``$POSTTRAIN_CACHE``, default ``~/.cache/posttrainlab``.

Below it: ``base/<config hash>`` (pretrained tiny bases) and ``imported/<name>-<sha256>`` (models imported from GGUF).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: ``$POSTTRAIN_CACHE`` when set, else ``~/.cache/posttrainlab``."""
    return Path(os.environ.get("POSTTRAIN_CACHE", Path.home() / ".cache" / "posttrainlab"))
