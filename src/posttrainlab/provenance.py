"""Where a result came from: the code's commit, library versions, device, command line, seeds, host, time.

Every output that holds a number someone may quote (eval ``metrics.json``, best-of-N ``bon.json``,
``train_summary.json``, ``compare.json``, the quickstart's ``run.json``) carries a ``provenance`` key, so
a result found later can be traced to the code and machine that made it and rerun::

    {"commit": "0b6c20f…", "dirty": false,                 # None, None outside a git checkout
     "versions": {"posttrainlab": "0.1.0", "python": "3.12.3", "torch": "2.6.0", ..., "peft": None},
     "device": "cpu", "cuda": None, "threads": None,       # cuda / threads only when torch is imported
     "argv": ["posttrain", "eval", "policy", ...], "seeds": {"generation": 0},
     "host": {"platform": "Linux-6.8…", "cpus": 16}, "time": "2025-05-01T12:00:00+00:00"}

It never fails and never imports torch: a provenance record is a side note, so a missing ``git``, a
source tree that is not a checkout, or an uninstalled library reads as ``None``. ``dirty`` is whether
tracked files differ from the commit (untracked files are not counted, as ``git describe --dirty``).
The device is read from torch only when the process has already imported it (``sys.modules``): the
commands that never load a model ran on the CPU, and importing torch would cost them ~1.6 s.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

#: the package folder; its checkout's root holds ``src/posttrainlab`` (the src layout)
PACKAGE_DIR = Path(__file__).resolve().parent

#: the distributions whose versions are recorded (``python`` is added from the interpreter)
LIBRARIES = ("posttrainlab", "torch", "transformers", "trl", "datasets", "peft", "accelerate")


def _git(folder: Path, *args: str) -> str | None:
    """``git -C folder ARGS`` output, stripped; ``None`` on any failure (no git, not a checkout, timeout)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_commit(package_dir: Path | None = None) -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the git checkout the package runs from; ``(None, None)`` when it is none.

    The checkout counts only when it is the package's own source (its root holds ``src/posttrainlab``
    resolving to ``package_dir``): an installed copy inside someone else's repository reports nothing
    rather than that repository's commit.
    """
    package_dir = PACKAGE_DIR if package_dir is None else Path(package_dir)
    root = _git(package_dir, "rev-parse", "--show-toplevel")
    if not root:
        return None, None
    try:
        if (Path(root) / "src" / "posttrainlab").resolve() != package_dir.resolve():
            return None, None
    except OSError:
        return None, None
    commit = _git(package_dir, "rev-parse", "HEAD")
    if not commit:
        return None, None
    status = _git(package_dir, "status", "--porcelain", "--untracked-files=no")
    return commit, None if status is None else bool(status)


def versions() -> dict[str, str | None]:
    """Installed versions of ``LIBRARIES`` and the interpreter's; ``None`` for a library not installed."""
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    out["python"] = platform.python_version()
    return out


def device() -> dict[str, Any]:
    """``device`` ("cpu" or the CUDA device's name), ``cuda``, ``threads`` and ``cpu_capability`` (the vector
    instructions ATen's CPU kernels use, AVX2 or AVX512 on x86: on one machine the two gave different pretrained
    weights from the same seeds, where 1 or 2 threads did not; docs/experiments.md): from torch if already imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"device": "cpu", "cuda": None, "threads": None, "cpu_capability": None}
    try:
        cuda = bool(torch.cuda.is_available())
        name = torch.cuda.get_device_name(0) if cuda else "cpu"
        capability = torch.backends.cpu.get_cpu_capability()
        return {"device": name, "cuda": cuda, "threads": int(torch.get_num_threads()), "cpu_capability": capability}
    except Exception:  # a half-initialised CUDA must not cost the run its outputs
        return {"device": "cpu", "cuda": None, "threads": None, "cpu_capability": None}


def provenance(seeds: dict[str, Any] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The provenance record of this process (module docstring); ``extra`` keys are added last.

    >>> p = provenance(seeds={"generation": 0})
    >>> sorted(p)
    ['argv', 'commit', 'cpu_capability', 'cuda', 'device', 'dirty', 'host', 'seeds', 'threads', 'time', 'versions']
    >>> p["seeds"], p["versions"]["python"] == platform.python_version()
    ({'generation': 0}, True)
    """
    commit, dirty = source_commit()
    record: dict[str, Any] = {
        "commit": commit,
        "dirty": dirty,
        "versions": versions(),
        **device(),
        "argv": list(sys.argv),
        "seeds": dict(seeds) if seeds is not None else None,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    record.update(extra or {})
    return record


__all__ = ["LIBRARIES", "provenance", "source_commit", "versions"]
