"""Nothing lost, nothing silently wrong in a run folder (issue #42): one writer at a time (``writer_lock``), reuse only
of what is verified (``StageRecords.stale``), history kept across invocations (``StageLog``), and a run refused by
its settings leaves the folder so that the corrected command carries on."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest
from rich.console import Console

from lock_holder import free_elsewhere, held_elsewhere
from posttrainlab import writer_lock as writer_lock_module
from posttrainlab.errors import BadInput
from posttrainlab.quickstart import RunLayout, Stage, StageLog, quickstart_config
from posttrainlab.quickstart.plan import Run
from posttrainlab.quickstart.record import StageRecords
from posttrainlab.quickstart.run import run_stages
from posttrainlab.writer_lock import lock_path, writer_lock
from test_quickstart_record import fake_plan, run_all


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "cache"))  # the lock files live there


def with_weights(layout: RunLayout):
    """fake_plan with an sft that writes weights."""
    stages = fake_plan(layout)
    sft = layout.model("sft")
    stages[1].run = lambda: (sft.mkdir(parents=True, exist_ok=True), (sft / "model.safetensors").write_bytes(b"w"),
                             (sft / "train_summary.json").write_text("{}"))  # fmt: skip
    return stages


# --- one writer ------------------------------------------------------------------------------------------------


def test_a_second_writer_is_refused_at_once_naming_the_first(tmp_path):
    folder = tmp_path / "run"
    with held_elsewhere(folder) as holder:
        with pytest.raises(
            BadInput, match=rf"another posttrain is writing this run folder \(PID {holder.pid} since .*: posttrain"
        ):
            with writer_lock(tmp_path / "x" / ".." / "run"):  # any spelling of the same folder
                pass
    with writer_lock(folder):
        assert not free_elsewhere(folder)  # held by this process now
    assert free_elsewhere(folder)  # released at the end of the block
    assert not folder.exists()  # the lock writes nothing into the folder


def test_the_lock_is_reentrant_within_one_process(tmp_path):
    """A verb calling a library function that locks the same folder must not refuse itself (two flocks on two opens
    of one file conflict even in one process): the inner block is a no-op, the outermost exit lets go."""
    folder = tmp_path / "run"
    with writer_lock(folder):
        with writer_lock(tmp_path / "x" / ".." / "run", what="output folder"):  # any spelling
            with writer_lock(folder):
                pass
        with pytest.raises(ValueError), writer_lock(folder):  # an inner block left by an exception
            raise ValueError
        assert not free_elsewhere(folder)  # the inner exits let nothing go
        assert json.loads(lock_path(folder).read_text())["pid"] == os.getpid()
    assert free_elsewhere(folder)
    assert writer_lock_module._HELD == {}


def test_a_lock_whose_process_died_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom posttrainlab.writer_lock import writer_lock\n"
        f"with writer_lock({str(folder)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BadInput, match=f"PID {holder.pid} "):
            with writer_lock(folder):
                pass
    finally:
        holder.kill()  # kill -9: the kernel drops its lock
        holder.wait()
    with writer_lock(folder):
        assert lock_path(folder).is_file()


def test_two_quickstarts_on_one_folder(tmp_path):
    """The second of two ``quickstart --preset smoke`` runs on one folder stops at once with one line, exit 2."""
    out = tmp_path / "qs"
    env = {**os.environ, "POSTTRAIN_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smoke", "--out", str(out)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 60
        while not (out / "quickstart.log").is_file() and time.time() < deadline:  # the first holds the lock
            time.sleep(0.2)
        second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"PID {first.pid}" in lines[0] and "quickstart" in lines[0]


# --- reuse only what is verified --------------------------------------------------------------------------------


def test_changed_or_missing_outputs_are_named_and_run_again_with_what_reads_them(tmp_path):
    layout = RunLayout(tmp_path / "run")
    run_all(layout, with_weights(layout))
    assert StageRecords(layout).stale(with_weights(layout)) == {}
    (layout.model("sft") / "model.safetensors").write_bytes(b"other weights")  # e.g. DPO's copied over SFT's
    records = StageRecords(layout)
    stale = records.stale(with_weights(layout))
    assert list(stale) == ["sft", "eval-sft"]
    assert "model.safetensors changed since the stage made it" in stale["sft"]
    assert stale["eval-sft"] == "it reads sft, which runs again"
    (layout.model("sft") / "model.safetensors").unlink()
    assert "model.safetensors is missing" in StageRecords(layout).stale(with_weights(layout))["sft"]
    (layout.eval_dir("sft") / "metrics.json").write_text('{"accuracy": 1}')  # a marker edited by hand
    assert set(StageRecords(layout).stale(with_weights(layout))) == {"sft", "eval-sft"}


def run_folder(tmp_path, stages_of, rerun=True):
    layout = RunLayout(tmp_path / "run")
    cfg = quickstart_config("smoke")
    (tmp_path / "base").mkdir(exist_ok=True)
    r = Run(cfg, layout, base=tmp_path / "base")
    run_stages(r, stages_of(layout), console=Console(file=io.StringIO()),
               logged=cfg, rerun=rerun)  # fmt: skip
    return layout


def test_the_quickstart_runs_a_changed_stage_again_and_keeps_the_old_folder(tmp_path):
    layout = run_folder(tmp_path, with_weights)
    (layout.model("sft") / "model.safetensors").write_bytes(b"dpo weights")
    with pytest.raises(BadInput, match="finished stages no longer match what they made .*sft: .*changed"):
        run_folder(tmp_path, with_weights, rerun=False)
    assert (layout.model("sft") / "model.safetensors").read_bytes() == b"dpo weights"  # refused: nothing moved
    run_folder(tmp_path, with_weights)
    assert (layout.model("sft") / "model.safetensors").read_bytes() == b"w"  # made again
    kept = sorted((layout.root / ".stale").iterdir())
    assert [p.name.split("-20")[0] for p in kept] == ["eval-sft", "sft"]
    assert (next(p for p in kept if p.name.startswith("sft-")) / "model.safetensors").read_bytes() == b"dpo weights"
    assert StageRecords(layout).stale(with_weights(layout)) == {}


# --- history --------------------------------------------------------------------------------------------------


def test_a_rerun_keeps_the_times_and_provenance_of_the_run_that_made_the_stages(tmp_path):
    def with_report(layout):
        return [*with_weights(layout), Stage("report", lambda: None, None, rebuilt=True)]

    layout = run_folder(tmp_path, with_report)
    first = json.loads(layout.run_json.read_text())
    assert [i["run"] for i in first["invocations"]] == [1] and first["provenance"]["argv"]
    assert first["invocations"][0]["ran"] == ["prepare", "sft", "eval-sft", "report"]
    run_folder(tmp_path, with_report)  # everything reused
    second = json.loads(layout.run_json.read_text())
    assert second["stages"][:-1] == first["stages"][:-1]  # times, statuses and run numbers of the first invocation
    assert second["provenance"] == first["provenance"] and second["started"] == first["started"]
    assert [(i["run"], i["ran"]) for i in second["invocations"]] == [(1, ["prepare", "sft", "eval-sft", "report"]),
                                                                      (2, ["report"])]  # fmt: skip
    assert second["stages"][-1]["run"] == 2  # the report is rebuilt every time


def test_a_run_json_from_before_invocations_counts_as_the_first(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"started": "T0", "provenance": {"argv": ["old"]}, "stages": [
        {"name": "sft", "seconds": 120.0, "status": "done"}]}))  # fmt: skip
    log = StageLog(tmp_path, quickstart_config("smoke"), ["sft"])
    assert log.number == 2 and log.invocations[0] == {"run": 1, "started": "T0", "provenance": {"argv": ["old"]}}
    assert [i["run"] for i in log.invocations] == [1, 2]
    log.stage("sft", True, lambda: None, Console(file=io.StringIO()))
    assert log.state["stages"] == [{"name": "sft", "seconds": 120.0, "status": "done", "run": 1}]


# --- a refused run leaves the folder so that the corrected command carries on ----------------------------------


def test_a_stage_that_refused_its_settings_before_writing_does_not_lock_the_folder(tmp_path):
    layout = RunLayout(tmp_path / "run")
    stages = with_weights(layout)
    records = run_all(layout, stages[:1])
    bad = fake_plan(layout, lr=-1.0)
    records.check(bad)
    records.started(bad[1])  # it started with the bad value and wrote nothing (its folder is absent)
    good = with_weights(layout)
    StageRecords(layout).check(good)  # the corrected command carries on
    layout.model("sft").mkdir()
    (layout.model("sft") / "checkpoint-1").mkdir()  # but a started stage that wrote something stays refused
    with pytest.raises(BadInput, match="made with other settings"):
        StageRecords(layout).check(good)


@pytest.mark.parametrize(
    "override",
    ["process.k=0", "process.bon_n=0", "process.limit=0", "process.bon_limit=0", "process.temperature=0",
     "eval.batch_size=0", "eval.max_new_tokens=0", "process.temperature=nan", "process.bon_temperature=0"],
)  # fmt: skip
def test_every_stage_setting_is_checked_when_the_config_is_loaded(override):
    key = override.split("=")[0].split(".")[-1]
    with pytest.raises(BadInput, match=rf"^{override.split('.')[0]}\.{key}="):
        quickstart_config("default", [override])


def test_a_training_run_folder_has_one_writer_too(tmp_path, capsys):
    from cli_capture import cli

    out = tmp_path / "sft"
    with held_elsewhere(out) as holder:
        code, _, err = cli(
            capsys,
            "train",
            "sft",
            "--config",
            "configs/arith/sft.yaml",
            f"output_dir={out}",
            f"model={tmp_path / 'none'}",
        )
    assert code == 2 and "another posttrain is writing this training run folder" in err, err
    assert f"PID {holder.pid} " in err
    assert not out.exists()


def test_the_ranks_of_one_launch_share_rank_0s_lock(tmp_path, monkeypatch):
    """``accelerate launch`` runs one ``posttrain train`` per rank on one folder: rank 0 holds the lock, the others
    write through it (tests/train/test_trainers.py runs the real launch)."""
    folder = tmp_path / "run"
    with held_elsewhere(folder):  # rank 0 (another process)
        monkeypatch.setenv("RANK", "1")
        with writer_lock(folder):
            pass
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(BadInput, match="another posttrain is writing"):
            with writer_lock(folder):
                pass
