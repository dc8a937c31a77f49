"""The thread policy (``posttrainlab.threads``): flag checks, what reaches GNU OpenMP, who wins, one copy of it.

The OpenMP side is checked where it matters, inside libgomp: ``OMP_DISPLAY_ENV=VERBOSE`` makes it print the
values it read when torch loaded it, so a variable set too late (after ``import torch``) shows its default,
``GOMP_SPINCOUNT = '300000'``, and ``OMP_WAIT_POLICY=PASSIVE`` read in time shows ``'0'``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab import threads
from posttrainlab.errors import BadInput
from posttrainlab.threads import CANDIDATES, check_threads, configure_threads

SRC = Path(threads.__file__).parent
OMP_VARS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS", "OMP_DISPLAY_ENV")


@pytest.mark.parametrize("bad", [0, -3, True, 1.5, "2"])
def test_a_count_below_one_or_not_whole_is_bad_input(bad):
    with pytest.raises(BadInput, match=rf"^--workers {re.escape(str(bad))}: must be at least 1$"):
        check_threads(bad, flag="--workers")
    with pytest.raises(BadInput):
        configure_threads(bad)


def fresh(code: str, **env: str) -> tuple[dict, str]:
    """Run ``code`` in a fresh interpreter (torch not imported) with only ``env`` of the OpenMP variables set;
    return the JSON it prints last and libgomp's own report of what it read."""
    clean = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "OMP_DISPLAY_ENV": "VERBOSE", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


PROLOGUE = """
import json, os, sys
from posttrainlab import threads
"""
REPORT = """
import torch
print(json.dumps({"set": n, "torch": torch.get_num_threads(), "env": os.environ.get("OMP_WAIT_POLICY")}))
"""


def spincount(stderr: str) -> str:
    return re.search(r"GOMP_SPINCOUNT = '(\d+)'", stderr).group(1)


def test_the_policy_reaches_openmp_before_torch_loads_it():
    # the lead's switch, DEFAULT_POLICY = CANDIDATES["passive"], made in the subprocess: libgomp reads it
    switched = 'threads.DEFAULT_POLICY = threads.CANDIDATES["passive"]\nn = threads.configure_threads()'
    out, err = fresh(PROLOGUE + switched + REPORT)
    assert out["set"] is None and out["env"] == "PASSIVE"
    assert spincount(err) == "0"
    # too late: torch (so libgomp) already loaded; nothing is claimed, OpenMP keeps its default spin
    late = PROLOGUE + 'import torch\nn = threads.configure_threads(policy=threads.CANDIDATES["passive"])' + REPORT
    out, err = fresh(late)
    assert out["env"] is None and spincount(err) == "300000"


def test_the_users_environment_and_flag_win_over_the_policy():
    code = PROLOGUE + 'n = threads.configure_threads(policy=threads.CANDIDATES["spin10k"])' + REPORT
    assert spincount(fresh(code)[1]) == "10000"
    assert spincount(fresh(code, GOMP_SPINCOUNT="5")[1]) == "5"  # the user's variable is kept
    one = PROLOGUE + "n = threads.configure_threads(policy=threads.ThreadPolicy(threads=1))" + REPORT
    assert fresh(one)[0]["set"] == 1 and fresh(one)[0]["torch"] == 1
    out, _ = fresh(one, OMP_NUM_THREADS="2")  # the user's OMP_NUM_THREADS beats the policy's count ...
    assert out["set"] is None and out["torch"] == 2
    flag = PROLOGUE + "n = threads.configure_threads(3, policy=threads.ThreadPolicy(threads=1))" + REPORT
    out, _ = fresh(flag, OMP_NUM_THREADS="2")  # ... and --threads beats both
    assert out["set"] == 3 and out["torch"] == 3


def test_in_process_count_is_set_and_a_late_policy_sets_nothing(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        assert configure_threads(1) == 1 and torch.get_num_threads() == 1
        for k in OMP_VARS:
            monkeypatch.delenv(k, raising=False)
        assert threads.DEFAULT_POLICY == CANDIDATES["passive"]  # bench/bench_threads.py's choice (threads.py)
        assert configure_threads(None) is None and torch.get_num_threads() == 1  # the count: left as it was
        assert not any(k in os.environ for k in OMP_VARS)  # torch is loaded here: too late, so nothing is set
    finally:
        torch.set_num_threads(before)


def test_one_copy_of_the_thread_setting():
    """Every torch command goes through configure_threads: no other module calls torch.set_num_threads."""
    callers = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "set_num_threads(" in p.read_text(encoding="utf-8")
    )
    assert callers == ["threads.py"]
    users = {p.name for p in (SRC / "cli").glob("*.py") if "configure_threads(" in p.read_text(encoding="utf-8")}
    assert {"evaluate.py", "label.py", "pipeline.py", "serve.py"} <= users


def test_candidates_describe_themselves():
    assert [p.describe() for p in CANDIDATES.values()] == [
        "default threads",
        "1 thread",
        "default threads, OMP_WAIT_POLICY=PASSIVE",
        "default threads, GOMP_SPINCOUNT=10000",
    ]


def test_a_bad_count_on_the_command_line_is_one_line_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "serve", "--judge", "arith", "--threads", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--threads 0: must be at least 1" in proc.stderr + proc.stdout


def test_the_cli_applies_the_default_policy_before_any_verb_imports_torch():
    code = (
        "import os, sys\nfrom posttrainlab.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
        "    pass\nprint(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert run.stdout.split()[-2:] == ["PASSIVE", "False"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"  # the user's choice is kept
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert run.stdout.split()[-2:] == ["ACTIVE", "False"]
