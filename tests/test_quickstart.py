"""`posttrain quickstart --preset smoke`: the main job end to end, then again from its cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.eval.step_metrics import step_auroc


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


STAGES = ["prepare", "pretrain", "sft", "eval-sft", "sft-continued", "eval-sft-continued",
          "arith-prm", "prm", "eval-prm", "best-of-n", "beam-search", "report"]  # fmt: skip


def test_every_stage_ran_and_the_report_is_written(run):
    out, _ = run
    state = json.loads((out / "run.json").read_text())
    assert [s["name"] for s in state["stages"]] == STAGES
    assert all(s["status"] == "done" and s["run"] == 1 for s in state["stages"])
    for method in ("sft", "sft-continued"):
        metrics = json.loads((out / "eval" / method / "metrics.json").read_text())
        graded = [row["correct"] for row in read_jsonl(out / "eval" / method / "samples.jsonl")]
        assert metrics["n"] == len(graded) == 40 and metrics["accuracy"]["value"] == sum(graded) / 40
        assert list(metrics["per_category"]) == list(CATEGORIES)
        assert metrics["sampled"]["n_samples"] == 2  # pass@1 and maj@K beside greedy, as the default
        assert (out / method / "train_summary.json").is_file()
    control = json.loads((out / "sft-continued" / "train_summary.json").read_text())
    assert control["global_step"] == 6  # rft.optim.max_steps (no rft run to match in smoke)
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3
    assert json.loads((out / "base" / "contamination.json").read_text())["overlap"] == 0
    # process supervision: exact-labelled arith-prm from the SFT policy, a step PRM, its eval, best-of-N
    assert (out / "arith-prm" / "math_shepherd" / "train.jsonl").is_file() and (
        out / "prm" / "prm_config.json"
    ).is_file()
    spec = json.loads((out / "prm" / "prm_config.json").read_text())  # the default recipe's head
    assert (spec["head"], spec["input_format"]) == ("result", "policy")
    prm = json.loads((out / "prm-eval" / "metrics.json").read_text())
    scored = read_jsonl(out / "prm-eval" / "scores.jsonl")  # the AUROC is the one its scores give
    auroc = step_auroc([r["labels"] for r in scored], [r["scores"] for r in scored])
    assert prm["solutions"] == len(scored) > 0 and prm["step"]["auroc"] == auroc
    bon = json.loads((out / "best-of-n" / "bon.json").read_text())
    assert bon["problems"] == 20 and bon["ns"] == [1, 2, 4] and "majority" in bon["selectors"]
    beam = json.loads((out / "beam-search" / "beam.json").read_text())
    assert beam["problems"] == 20 and beam["tokens_per_problem"] > 0
    report = (out / "report.md").read_text()
    assert "## Results" in report and "## Process reward model" in report and "## Best-of-N" in report
    assert "## Paired comparisons" in report and "McNemar" in report
    assert "smoke run: its numbers measure nothing" in report.lower()
    assert "(no reference run for preset 'smoke')" in report  # the base's hash, said at the top
    results = json.loads((out / "report_files" / "results.json").read_text())
    assert [p["method"] for p in results["policies"]] == ["sft", "sft-continued"]
    assert results["search"]["n"] == 4 and results["base_sha256"] in str(state["weights"]["base"])
    provenance = state["provenance"]
    assert provenance["seeds"] == {"sft": [0], "sft-continued": [0]}
    assert provenance["versions"]["torch"] and provenance["argv"]


def test_second_run_reuses_every_stage_and_keeps_the_history(run):
    out, env = run
    first = json.loads((out / "run.json").read_text())
    r = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smoke", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((out / "run.json").read_text())
    assert r.stdout.count("cached (already done, reusing it)") == len(STAGES) - 1
    assert state["stages"][:-1] == first["stages"][:-1]  # each stage's time and run as the first run made it
    assert state["provenance"] == first["provenance"] and [i["run"] for i in state["invocations"]] == [1, 2]


def test_run_json_records_the_sha256_of_every_model(run):
    from posttrainlab.data.manifest import sha256_file

    out, _ = run
    weights = json.loads((out / "run.json").read_text())["weights"]
    assert weights["sft"] == {"OUT/sft/model.safetensors": sha256_file(out / "sft" / "model.safetensors")}
    assert list(weights["base"].values()) == [sha256_file(out / "base" / "model.safetensors")]
    assert set(weights) == {"base", "sft", "sft-continued", "prm"}


def quickstart(out: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smoke", "--out", str(out),
                           *args], capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file's bytes (a link's target) under ``root``."""
    return {str(p.relative_to(root)): str(p.readlink()) if p.is_symlink() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}  # fmt: skip


def test_a_finished_run_of_other_settings_is_refused_before_anything_is_written(run, tmp_path):
    import shutil

    out, env = run
    copy = tmp_path / "X"  # issue #25: `cp -r RUN X && posttrain quickstart --preset smoke --out X`, another base
    shutil.copytree(out, copy, symlinks=True)
    before = tree(copy)
    r = quickstart(copy, env, "base.model.seed=5")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "stage pretrain: " in r.stderr and "model.seed: 0 -> 5" in r.stderr
    assert tree(copy) == before  # the report, run.json, the base link: all as they were
    r = quickstart(copy, env, "sft.optim.learning_rate=0.002")
    assert r.returncode == 2 and "stage sft: " in r.stderr and "optim.learning_rate: 0.001 -> 0.002" in r.stderr


def test_a_changed_model_is_named_and_made_again(run, tmp_path):
    """Reuse means verified (issue #42): the SFT weights replaced by RFT's are found, refused with --no-rerun, and
    made again (byte-identical: the same seeds) with every stage that reads them; the old folders are kept."""
    import shutil

    from posttrainlab.data.manifest import sha256_file

    out, env = run
    copy = tmp_path / "Y"
    shutil.copytree(out, copy, symlinks=True)
    made = sha256_file(copy / "sft" / "model.safetensors")
    shutil.copy(copy / "sft-continued" / "model.safetensors", copy / "sft" / "model.safetensors")
    r = quickstart(copy, env, "--no-rerun")
    assert r.returncode == 2 and "sft: " in r.stderr and "changed since the stage made it" in r.stderr, r.stderr
    r = quickstart(copy, env, "process.enabled=false")  # fewer stages to make again; the PRM's are not planned
    assert r.returncode == 0, r.stderr[-2000:]
    assert "stage sft runs again" in r.stdout and "stage sft-continued runs again: it reads sft" in r.stdout
    assert sha256_file(copy / "sft" / "model.safetensors") == made
    assert {p.name.rsplit("-2", 1)[0] for p in (copy / ".stale").iterdir()} >= {"sft", "eval-sft", "sft-continued"}


def test_a_folder_of_the_users_or_a_file_as_out_is_refused_unchanged(run, tmp_path):
    _, env = run
    user = tmp_path / "uf"
    (user / "sft").mkdir(parents=True)
    (user / "run.json").write_text("mine")
    (user / "sft" / "my.txt").write_text("notes")
    r = quickstart(user, env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a quickstart run folder" in r.stderr
    assert tree(user) == {"run.json": b"mine", "sft/my.txt": b"notes"}
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file" / "sub"):
        r = quickstart(bad, env)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_unknown_preset_and_key_are_one_line_errors(tmp_path):
    for args, fragment in ((["--preset", "huge"], "unknown preset 'huge'"), (["sft.optim.epoch=1"], "epoch")):
        r = subprocess.run([sys.executable, "-m", "posttrainlab", "quickstart", "--out", str(tmp_path), *args],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr
