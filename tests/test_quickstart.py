"""`posttrain quickstart --preset smoke`: the main job end to end, then again from its cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.data.arith.problems import CATEGORIES


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("qs")
    env = {**os.environ, "POSTTRAIN_CACHE": str(root / "cache")}
    out = root / "run"
    r = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smoke", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, env


def test_every_stage_ran_and_the_report_is_written(run):
    out, _ = run
    state = json.loads((out / "run.json").read_text())
    names = [s["name"] for s in state["stages"]]
    assert names == [
        *("prepare", "pretrain", "sft", "eval-sft", "dpo", "eval-dpo", "dpo-policy", "eval-dpo-policy"),
        *("grpo", "eval-grpo", "arith-prm", "prm", "eval-prm", "best-of-n", "beam-search", "report"),
    ]
    assert all(s["status"] == "done" for s in state["stages"])
    for method in ("sft", "dpo", "dpo-policy", "grpo"):
        metrics = json.loads((out / "eval" / method / "metrics.json").read_text())
        assert metrics["n"] == 40 and 0.0 <= metrics["accuracy"]["value"] <= 1.0
        assert list(metrics["per_category"]) == list(CATEGORIES)
        assert (out / method / "train_summary.json").is_file()
    assert json.loads((out / "eval" / "dpo" / "metrics.json").read_text())["preference"]["method"] == "implicit_reward"
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3
    assert "SFT" in (out / "report.md").read_text()
    assert json.loads((out / "base" / "contamination.json").read_text())["overlap"] == 0
    # process supervision: exact-labelled arith-prm from the SFT policy, a step PRM, its eval, best-of-N
    assert (out / "arith-prm" / "step" / "train.jsonl").is_file() and (out / "prm" / "prm_config.json").is_file()
    prm = json.loads((out / "prm-eval" / "metrics.json").read_text())
    assert prm["solutions"] > 0 and 0.0 <= prm["step"]["auroc"] <= 1.0
    bon = json.loads((out / "best-of-n" / "bon.json").read_text())
    assert bon["problems"] == 20 and bon["ns"] == [1, 2, 4] and "majority" in bon["selectors"]
    pairs = json.loads((out / "dpo-policy" / "preference_pairs.json").read_text())
    assert pairs["counts"]["pairs"] > 0  # sampled from the SFT model, graded
    beam = json.loads((out / "beam-search" / "beam.json").read_text())
    assert beam["problems"] == 20 and beam["tokens_per_problem"] > 0
    report = (out / "report.md").read_text()
    assert "## Process reward model" in report and "## Best-of-N" in report
    assert "## Paired comparisons" in report and "McNemar" in report
    assert "smoke run: its numbers measure nothing" in report.lower()
    provenance = json.loads((out / "run.json").read_text())["provenance"]
    assert provenance["seeds"] == {"sft": [0], "dpo": [0], "dpo-policy": [0], "grpo": [0]}
    assert provenance["versions"]["torch"] and provenance["argv"]


def test_second_run_reuses_every_stage(run):
    out, env = run
    r = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smoke", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((out / "run.json").read_text())
    assert [s["status"] for s in state["stages"]][:-1] == ["cached"] * 15


def test_unknown_preset_and_key_are_one_line_errors(tmp_path):
    for args, fragment in ((["--preset", "huge"], "unknown preset 'huge'"), (["sft.optim.epoch=1"], "epoch")):
        r = subprocess.run([sys.executable, "-m", "posttrainlab", "quickstart", "--out", str(tmp_path), *args],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr
