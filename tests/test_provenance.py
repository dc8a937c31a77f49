"""Provenance records (provenance.py): their keys, the command line and seeds, the commit inside and
outside a git checkout, the device with and without torch, and the outputs that carry one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainlab import provenance as prov
from posttrainlab.provenance import provenance, source_commit
from posttrainlab.runners.settings import BestOfNSettings, PolicyEvalSettings

KEYS = {"commit", "dirty", "versions", "device", "cuda", "threads", "cpu_capability", "argv", "seeds", "host", "time"}
ROOT = Path(__file__).resolve().parents[1]
HAS_GIT = shutil.which("git") is not None


def test_keys_argv_seeds_and_extra(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["posttrain", "eval", "compare", "a", "b"])
    p = provenance(seeds={"generation": 7}, extra={"stage": "eval-sft"})
    assert set(p) == KEYS | {"stage"} and p["stage"] == "eval-sft"
    assert p["argv"] == ["posttrain", "eval", "compare", "a", "b"] and p["seeds"] == {"generation": 7}
    assert set(p["versions"]) == {*prov.LIBRARIES, "python"} and p["versions"]["posttrainlab"]
    assert p["host"]["cpus"] >= 1 and p["host"]["platform"]
    assert datetime.fromisoformat(p["time"]).utcoffset().total_seconds() == 0  # UTC
    assert json.loads(json.dumps(p)) == p  # plain JSON: lists, not tuples
    assert provenance()["seeds"] is None


def test_a_missing_library_reads_none(monkeypatch):
    monkeypatch.setattr(prov, "LIBRARIES", ("posttrainlab", "no-such-distribution-xyz"))
    assert prov.versions()["no-such-distribution-xyz"] is None


@pytest.mark.skipif(not (HAS_GIT and (ROOT / ".git").exists()), reason="the tests run from a git checkout only")
def test_the_commit_of_this_checkout():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    commit, dirty = source_commit()
    assert commit == head and len(commit) == 40 and isinstance(dirty, bool)


def test_outside_a_git_checkout_never_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(prov, "PACKAGE_DIR", tmp_path)
    assert source_commit() == (None, None)
    p = provenance()
    assert p["commit"] is None and p["dirty"] is None


@pytest.mark.skipif(not HAS_GIT, reason="needs git")
def test_someone_elses_repository_is_not_the_source(tmp_path):
    """An installed copy inside another checkout (a venv in a project) must not report that project's commit."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inside = tmp_path / "venv" / "site-packages" / "posttrainlab"
    inside.mkdir(parents=True)
    assert source_commit(inside) == (None, None)


def test_no_git_binary(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(prov.subprocess, "run", missing)
    assert source_commit() == (None, None)


def test_device_without_torch_does_not_import_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert prov.device() == {"device": "cpu", "cuda": None, "threads": None, "cpu_capability": None}
    assert "torch" not in sys.modules


def test_device_from_an_imported_torch(monkeypatch):
    cuda = SimpleNamespace(is_available=lambda: True, get_device_name=lambda i: "NVIDIA H200")
    backends = SimpleNamespace(cpu=SimpleNamespace(get_cpu_capability=lambda: "AVX2"))
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda, get_num_threads=lambda: 4, backends=backends))
    assert prov.device() == {"device": "NVIDIA H200", "cuda": True, "threads": 4, "cpu_capability": "AVX2"}
    cpu = SimpleNamespace(is_available=lambda: False, get_device_name=None)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cpu, get_num_threads=lambda: 2, backends=backends))
    assert prov.device() == {"device": "cpu", "cuda": False, "threads": 2, "cpu_capability": "AVX2"}

    def broken():
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=SimpleNamespace(is_available=broken)))
    assert prov.device()["device"] == "cpu"


# --- the outputs that carry it ------------------------------------------------------------------------


class Echo:
    """A sampling backend that answers 5 to everything."""

    name = "echo"

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        return [["x = 2 + 3\nAnswer: 5"] * n for _ in prompts]


class Half:
    """A PRM scorer that gives every step 0.5."""

    def score_batch(self, items, batch_size=8):
        return [[0.5] * len(steps) for _, steps in items]


@pytest.fixture
def problems(tmp_path) -> Path:
    rows = [{"id": f"t-{i}", "category": "addition", "prompt": f"What is {i} + 3?", "answer": i + 3} for i in range(3)]
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_policy_metrics_carry_it(problems, tmp_path, monkeypatch):
    from posttrainlab.runners.policy import evaluate_policy

    monkeypatch.setattr(sys, "argv", ["posttrain", "eval", "policy"])
    metrics = evaluate_policy(
        "m", str(problems), tmp_path / "e", PolicyEvalSettings(preference_split=None, seed=3), backend=Echo()
    )
    on_disk = json.loads((tmp_path / "e" / "metrics.json").read_text())
    assert on_disk == metrics and set(on_disk["provenance"]) == KEYS
    assert on_disk["provenance"]["seeds"] == {"generation": 3}
    assert on_disk["provenance"]["argv"] == ["posttrain", "eval", "policy"]


def test_best_of_n_and_prm_eval_carry_it(problems, tmp_path):
    from posttrainlab.runners import best_of_n, prm_eval

    best_of_n.run(
        "p",
        "prm",
        str(problems),
        tmp_path / "bon",
        BestOfNSettings(n=2, seed=5),
        backend=Echo(),
        scorer=Half(),
        progress=False,
    )
    bon = json.loads((tmp_path / "bon" / "bon.json").read_text())
    assert set(bon["provenance"]) == KEYS and bon["provenance"]["seeds"] == {"sampling": 5}
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps({"question": "q", "steps": ["a", "b"], "step_labels": [1, 0]}) + "\n")
    prm_eval.run("prm", str(steps), tmp_path / "prm", scorer=Half(), progress=False)
    m = json.loads((tmp_path / "prm" / "metrics.json").read_text())
    assert set(m["provenance"]) == KEYS and m["provenance"]["seeds"] is None


def test_train_summary_carries_it(tmp_path):
    """``run_trainer`` with a stand-in trainer (no model): the summary records the recipe's seed."""
    from posttrainlab.train.common import run_trainer
    from posttrainlab.train.recipes import OptimConfig, SFTRecipe

    class Trainer:  # the part of transformers.Trainer that run_trainer touches
        model = object()
        state = SimpleNamespace(global_step=3)
        processing_class = SimpleNamespace(save_pretrained=lambda path: None)
        callback_handler = SimpleNamespace(callbacks=[])
        args = SimpleNamespace(logging_nan_inf_filter=True, bf16=False)

        def add_callback(self, callback):
            pass

        def is_world_process_zero(self):
            return True

        def train(self, resume_from_checkpoint=None):
            return SimpleNamespace(training_loss=1.5)

        def save_model(self, path):
            Path(path, "model.safetensors").write_bytes(b"")

    recipe = SFTRecipe(model="base", output_dir=str(tmp_path / "sft"), optim=OptimConfig(seed=11))
    out = run_trainer(Trainer(), recipe, "sft", n_records=4)
    summary = json.loads((out / "train_summary.json").read_text())
    assert set(summary["provenance"]) == KEYS and summary["provenance"]["seeds"] == {"seed": 11}
    assert summary["bf16"] is False  # the number format the trainer ran in, as its args say
