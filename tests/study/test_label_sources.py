"""``posttrain study label-sources --config smoke``: the whole study on the tiny test model, killed once and resumed.

The policy that writes the solutions is ``label.mc.scripted.ScriptedArithPolicy`` (its errors are known, so every
source has right and wrong steps to label); every PRM is trained from the tiny test model, and the baseline verifier
scores with it. The "real model" judge (``judge.model``) is the scripted policy too, which never answers an annotation
prompt acceptably: every row of it is invalid.
"""

from __future__ import annotations

import json
import shutil

import pytest

from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.study import run_study, sources, study_config

SMOKE_STAGES = [
    "prepare", "solutions", "label-exact", "label-mc-1", "label-mc-2", "label-judge-0", "label-judge-0.3",
    "label-judge-model", "bon-samples", "prm-exact", "eval-exact", "prm-mc-hard-1", "eval-mc-hard-1", "prm-mc-hard-2",
    "eval-mc-hard-2", "prm-mc-soft-2", "eval-mc-soft-2", "prm-judge-0", "eval-judge-0", "prm-judge-0.3",
    "eval-judge-0.3", "prm-judge-model", "eval-judge-model", "eval-baseline", "report",
]  # fmt: skip
INTERRUPTED = "mc-soft-2"


@pytest.fixture(scope="module")
def study(tmp_path_factory, tiny_policy):
    """The smoke study, interrupted once in ``prm-mc-soft-2`` and run again: ``(folder, first run.json, console)``."""
    from rich.console import Console

    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.label.mc.scripted import ScriptedArithPolicy
    from posttrainlab.study import evaluate

    root = tmp_path_factory.mktemp("study")
    shutil.copytree(tiny_policy, root / "run" / "sft")
    patch = pytest.MonkeyPatch()
    scripted = ScriptedArithPolicy(p_error=0.6, p_recover=0.1)
    patch.setattr(TransformersBackend, "from_pretrained", classmethod(lambda cls, *a, **k: scripted))
    train, fired = evaluate.train_source, []

    def interrupted(cfg, layout, source, policy):
        if source.name == INTERRUPTED and not fired:
            fired.append(source.name)
            raise KeyboardInterrupt
        train(cfg, layout, source, policy)

    patch.setattr(evaluate, "train_source", interrupted)
    out, cfg = root / "study", study_config("smoke", [f"judge.model={tiny_policy}", "judge.max_attempts=2"])
    console = Console(record=True, width=120)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_study(out, cfg, root / "run", console)
        first = json.loads((out / "run.json").read_text())
        run_study(out, cfg, root / "run", console)
    finally:
        patch.undo()
    return out, first, console.export_text()


@pytest.mark.slow
def test_a_killed_study_resumes_where_it_stopped(study):
    out, first, console = study
    done = [s["name"] for s in first["stages"]]
    assert done == SMOKE_STAGES[: SMOKE_STAGES.index(f"prm-{INTERRUPTED}")]
    state = json.loads((out / "run.json").read_text())
    assert [s["name"] for s in state["stages"]] == SMOKE_STAGES
    status = {s["name"]: (s["status"], s["run"]) for s in state["stages"]}
    assert all(status[name] == ("done", 1) for name in done)  # reused: as the first invocation made them
    assert all(status[name] == ("done", 2) for name in SMOKE_STAGES[len(done) :])
    assert f"stage 16/{len(SMOKE_STAGES)}: prm-{INTERRUPTED}" in console
    log = (out / "study.log").read_text()
    assert f"prm-{INTERRUPTED}\tinterrupted" in log and f"prm-{INTERRUPTED}\tdone" in log
    assert json.loads((out / "stages.json").read_text())["stages"][f"prm-{INTERRUPTED}"]["status"] == "done"


@pytest.mark.slow
def test_every_source_labels_the_same_solutions_and_trains_one_prm(study):
    out, _, _ = study
    train = read_jsonl(out / "solutions" / "train.jsonl")
    assert len(train) == 6 and {r["source"] for r in train} == {"policy"}  # 3 problems x 2 samples
    keys = [(r["id"], r["sample_index"]) for r in train]
    exact = [[int(x) for x in r["labels"]] for r in train]
    for name in ("exact", "judge-0", "mc-1", "mc-2"):
        rows = read_jsonl(out / "labels" / name / "train.jsonl")
        assert [(r["id"], r["sample_index"]) for r in rows] == keys
        assert [len(r["targets"]) for r in rows] == list(map(len, exact))
        if name in ("exact", "judge-0"):  # the program judge without noise is the program
            assert [[int(t) for t in r["targets"]] for r in rows] == exact
        else:  # V of the whole solution is its grade, the exact label of its last line
            assert [r["targets"][-1] for r in rows] == [float(e[-1]) for e in exact]
    mc = json.loads((out / "labels" / "mc-2" / "cost.json").read_text())
    assert mc["continuations"] == 2 * (mc["prefixes"] - len(train) + mc["problems"])  # rollouts + the root's
    judge = json.loads((out / "labels" / "judge-0.3" / "cost.json").read_text())
    assert judge["judge_calls"] == len(train) and judge["failed"] == 0
    for source in sources(study_config("smoke")):  # judge-model aside
        if source.labelling is not None:
            summary = json.loads((out / "prm" / source.name / "train_summary.json").read_text())
            assert summary["global_step"] == 2  # the same budget for every source
            assert summary["recipe"]["supervision"] == ("soft" if source.soft else "step")
        metrics = json.loads((out / "evaluation" / source.name / "heldout" / "metrics.json").read_text())
        assert metrics["solutions"] == 6 and metrics["format"] == "math-shepherd"
        bon = json.loads((out / "evaluation" / source.name / "bon" / "bon.json").read_text())
        assert bon["problems"] == 3 and bon["sampling"]["reused_cache"]  # sampled once, in bon-samples


@pytest.mark.slow
def test_the_report_holds_every_source(study):
    out, _, _ = study
    report = (out / "report.md").read_text()
    assert "Smoke run: its numbers measure nothing" in report
    for name in [s.name for s in sources(study_config("smoke"))] + ["judge-model"]:
        assert f"| {name} |" in report
    assert "McNemar" in report and "![PRM quality against labelling cost](quality_vs_cost.png)" in report
    assert (out / "quality_vs_cost.png").read_bytes()[:4] == b"\x89PNG"
    data = json.loads((out / "study.json").read_text())
    assert data["sources"]["judge-0"]["quality"]["accuracy"] == 1.0
    assert data["sources"]["exact"]["quality"]["kappa"] == 1.0
    assert data["sources"]["judge-0"]["cost"]["judge_calls"] == 6
    assert data["sources"]["baseline"]["cost"] == {"continuations": 0, "judge_calls": 0, "seconds": 0.0}
    assert data["bon"]["problems"] == 3 and data["prm_steps"] == 2


@pytest.mark.slow
def test_a_judge_that_never_answers_is_recorded_and_trains_no_prm(study):
    out, _, _ = study
    cost = json.loads((out / "labels" / "judge-model" / "cost.json").read_text())
    assert cost["failed"] == 6 and cost["judge_calls"] == 12  # 6 rows x 2 attempts, every answer rejected
    assert read_jsonl(out / "labels" / "judge-model" / "train.jsonl") == []
    assert (out / "prm" / "judge-model" / "skipped.json").is_file()
    assert not (out / "prm" / "judge-model" / "prm_config.json").exists()
    entry = json.loads((out / "study.json").read_text())["sources"]["judge-model"]
    assert entry["quality"]["labelled"] == 0 and entry["quality"]["missing"] == 6 and entry["prm"] is None
    assert "| judge-model | 0/6 |" in (out / "report.md").read_text()
    assert "no PRM: no labelled solution in OUT/labels/judge-model/train.jsonl" in (out / "report.md").read_text()


def test_from_must_name_a_run_folder_with_an_sft_model(tmp_path):
    with pytest.raises(BadInput, match="no SFT model in it"):
        run_study(tmp_path / "out", study_config("smoke"), tmp_path)
    assert not (tmp_path / "out").exists()


def test_a_folder_the_study_did_not_make_is_refused(tmp_path, tiny_policy):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "sft").symlink_to(tiny_policy)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="choose a new or empty --out"):
        run_study(out, study_config("smoke"), tmp_path / "run")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_the_cli_prints_the_config_and_refuses_a_bad_value(capsys):
    from cli_capture import cli

    code, out, _ = cli(capsys, "study", "label-sources", "--config", "smoke", "--print-config", "mc.ns=[1,2,8]")
    assert code == 0 and "preset: smoke" in out and "- 8" in out
    code, _, err = cli(capsys, "study", "label-sources", "--config", "smoke", "--print-config", "judge.noise=[2]")
    assert code == 2 and err.strip().startswith("posttrain: error: judge.noise=[2.0]") and err.count("\n") == 1


def test_stage_lines_name_the_study_log(tmp_path):
    """The study's stage log is its own file, headed by the study's name."""
    from posttrainlab.quickstart.stage_log import StageLog
    from posttrainlab.study.layout import LOG

    StageLog(tmp_path, study_config("smoke"), ["prepare", "report"], log_name=LOG)
    header = (tmp_path / "study.log").read_text().splitlines()[0]
    assert "study preset=smoke: 2 stages: prepare report" in header and not (tmp_path / "quickstart.log").exists()
