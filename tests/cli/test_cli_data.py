"""The ``posttrain`` command as a user runs it: exit codes, one-line errors, start-up cost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

POSTTRAIN = [sys.executable, "-m", "posttrainlab"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*POSTTRAIN, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "arith-v1"
    r = run("data", "prepare", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "unused 96" in r.stdout.replace("\n", " ")
    return out


def test_prepare_then_check_then_verify(built):
    r = run("data", "prepare", "--check", "--out", str(built))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "byte-identical" in r.stdout
    r = run("data", "verify", str(built))
    assert r.returncode == 0 and "all 11 files match" in r.stdout


def test_check_fails_on_an_edited_build(built, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    victim = copy / "prompt" / "rl_extra.jsonl"
    victim.write_bytes(victim.read_bytes().replace(b"What", b"what", 1))
    r = run("data", "prepare", "--check", "--out", str(copy))
    assert r.returncode == 1 and "rl_extra.jsonl" in r.stdout
    r = run("data", "verify", str(copy))
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("posttrain: error: ") and "rl_extra.jsonl" in last and "checksum mismatch" in last


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["data", "prepare", "--version", "9.9.9", "--out", "{tmp}/x"], "unknown arith-v1 version '9.9.9'"),
        (["data", "prepare", "--dataset", "gsm8k", "--out", "{tmp}/x"], "unknown dataset 'gsm8k'"),
        (["data", "prepare", "--out", "{tmp}/full"], "holds other files"),
        (["data", "verify", "{tmp}/nowhere"], "no manifest.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, fragment):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("x")
    r = run(*[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], r.stderr
    assert (tmp_path / "full" / "mine.txt").read_text() == "x"


def test_unknown_flag_is_usage_error_exit_2():
    r = run("data", "prepare", "--bogus")
    assert r.returncode == 2


def test_help_and_data_verbs_never_import_heavy_libraries():
    code = (
        "import sys; import posttrainlab.cli, posttrainlab.data.arith, posttrainlab.data.loading, "
        "posttrainlab.grading.arith, posttrainlab.data.manifest; "
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'datasets', 'pyarrow') if m in sys.modules]; "
        "print(heavy)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
    r = run("--help")
    assert r.returncode == 0 and "data" in r.stdout
