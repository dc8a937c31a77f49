"""The suite's own disk use: a passed test's ``tmp_path`` is deleted when the test ends (pyproject.toml's
``tmp_path_retention_policy``). A CI run failed with 47 ``No space left on device`` errors when every test's folder
was kept to the end: the real-model training tests write 2-4 GB each (weights, a checkpoint with its optimizer
state), 19 GB over the suite. This runs pytest, with the project's configuration, on two tests of its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

INNER = """
from pathlib import Path

def test_passes(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"0" * 1_000_000)
    Path({record!r}).joinpath("passed").write_text(str(tmp_path))

def test_fails(tmp_path):
    (tmp_path / "kept.txt").write_text("look at me")
    Path({record!r}).joinpath("failed").write_text(str(tmp_path))
    assert False
"""


def test_a_passed_tests_folder_is_deleted_and_a_failed_ones_kept(tmp_path):
    record, inner = tmp_path / "record", tmp_path / "inner"
    record.mkdir()
    inner.mkdir()
    (inner / "test_inner.py").write_text(INNER.format(record=str(record)))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(inner), "--basetemp", str(tmp_path / "base"),
         str(inner / "test_inner.py")],
        capture_output=True, text=True, timeout=120, cwd=inner,
    )  # fmt: skip
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    passed, failed = (Path((record / name).read_text()) for name in ("passed", "failed"))
    assert not passed.exists()  # deleted when its test passed
    assert (failed / "kept.txt").read_text() == "look at me"  # kept to be looked at
