"""``OUT/stages.json`` and the check before a quickstart writes anything (``quickstart.record``), on fake stages:
a stage is reused only when its recorded settings match, and a folder the quickstart did not make is refused
before a byte is written."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from posttrainlab.data.atomic import folder_files
from posttrainlab.errors import BadInput
from posttrainlab.quickstart import RunLayout, Stage
from posttrainlab.quickstart.record import StageRecords


@dataclass
class Optim:
    learning_rate: float = 1e-3
    epochs: float = 1.0


def fake_plan(layout: RunLayout, lr: float = 1e-3, eval_limit: int = 40) -> list[Stage]:
    """prepare → sft (a recipe with a run-folder path) → eval-sft, each writing its marker when run."""

    def writes(marker: Path):
        return lambda: (marker.parent.mkdir(parents=True, exist_ok=True), marker.write_text("{}"))

    sft = layout.model("sft")
    return [
        Stage("prepare", writes(layout.data / "manifest.json"), {"arith": "v1"}, marker=layout.data / "manifest.json",
              folder=layout.data),
        Stage("sft", writes(sft / "train_summary.json"), {"optim": Optim(lr), "data": str(layout.data)},
              marker=sft / "train_summary.json", after=("prepare",), folder=sft, models=(sft,)),
        Stage("eval-sft", writes(layout.eval_dir("sft") / "metrics.json"), {"limit": eval_limit},
              marker=layout.eval_dir("sft") / "metrics.json", after=("sft",), folder=layout.eval_dir("sft")),
    ]  # fmt: skip


def run_all(layout: RunLayout, stages: list[Stage]) -> StageRecords:
    records = StageRecords(layout)
    records.check(stages)
    for stage in stages:
        if not stage.done():
            records.started(stage)
            stage.run()
        records.finished(stage)
    return records


def snapshot(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in folder_files(root)}


def test_a_finished_run_records_each_stage_and_matches_itself_from_another_place(tmp_path):
    import hashlib
    import shutil

    layout = RunLayout(tmp_path / "run")
    stages = fake_plan(layout)
    stages[1].run = lambda: (layout.model("sft").mkdir(), (layout.model("sft") / "model.safetensors").write_bytes(
        b"weights"), (layout.model("sft") / "train_summary.json").write_text("{}"))  # fmt: skip
    records = run_all(layout, stages)
    saved = json.loads(layout.stages_json.read_text())["stages"]
    assert [saved[n]["status"] for n in ("prepare", "sft", "eval-sft")] == ["done"] * 3
    assert saved["sft"]["settings"] == {"optim": {"learning_rate": 1e-3, "epochs": 1.0}, "data": "OUT/data/arith-v1"}
    assert saved["sft"]["after"] == {"prepare": saved["prepare"]["hash"]}
    assert saved["sft"]["weights"] == {"OUT/sft/model.safetensors": hashlib.sha256(b"weights").hexdigest()}
    copy = RunLayout(tmp_path / "copy")  # a copied run folder: its paths are OUT/…, so it still matches
    shutil.copytree(layout.root, copy.root)
    again = StageRecords(copy)
    again.check(fake_plan(copy))
    assert again.hashes == records.hashes


def test_other_settings_are_refused_naming_the_stage_and_the_change_and_nothing_is_written(tmp_path):
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.stages_json.write_text('{"stages": {}}')
    run_all(layout, fake_plan(layout))
    before = snapshot(layout.root)
    with pytest.raises(BadInput) as e:
        StageRecords(layout).check(fake_plan(layout, lr=1e-4))
    assert str(e.value) == (
        f"stage sft: {layout.root} was made with other settings (optim.learning_rate: 0.001 -> 0.0001); "
        "use another --out, or the settings it was made with"
    )
    assert snapshot(layout.root) == before
    with pytest.raises(BadInput, match=r"stage eval-sft: .* \(limit: 40 -> 20\)"):
        StageRecords(layout).check(fake_plan(layout, eval_limit=20))


def test_a_stage_made_after_another_version_of_what_it_reads_is_refused(tmp_path):
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.stages_json.write_text('{"stages": {}}')
    run_all(layout, fake_plan(layout))
    saved = json.loads(layout.stages_json.read_text())
    saved["stages"]["sft"]["after"]["prepare"] = "0" * 16  # sft was trained on another build of the data
    saved["stages"]["sft"]["hash"] = "f" * 16
    layout.stages_json.write_text(json.dumps(saved))
    with pytest.raises(BadInput, match="stage sft: .*made after another prepare"):
        StageRecords(layout).check(fake_plan(layout))


def test_a_folder_the_quickstart_did_not_make_is_refused_unchanged(tmp_path):
    user = tmp_path / "uf"  # the reproduction: the user's own run.json and sft/my.txt
    (user / "sft").mkdir(parents=True)
    (user / "run.json").write_text("mine")
    (user / "sft" / "my.txt").write_text("notes")
    layout = RunLayout(user)
    with pytest.raises(BadInput, match=r"uf: not a quickstart run folder of this version \(no stages.json; holds "
                                       r"run.json, sft\); choose a new or empty --out"):  # fmt: skip
        StageRecords(layout).check(fake_plan(layout))
    assert snapshot(user) == {"run.json": b"mine", "sft/my.txt": b"notes"}


def test_a_stage_folder_without_a_record_and_a_base_that_is_no_link_are_refused(tmp_path):
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.stages_json.write_text('{"stages": {}}')
    (layout.model("sft")).mkdir()
    with pytest.raises(BadInput, match="run/sft: exists, but this run folder has no record of stage sft"):
        StageRecords(layout).check(fake_plan(layout))
    (layout.model("sft")).rmdir()
    layout.base.mkdir()
    with pytest.raises(BadInput, match="run/base: not the link the quickstart makes"):
        StageRecords(layout).check(fake_plan(layout))
    file_out = RunLayout(tmp_path / "file")
    file_out.root.write_text("x")
    with pytest.raises(BadInput, match="file: exists and is not a folder"):
        StageRecords(file_out).check(fake_plan(file_out))


def test_a_killed_stage_carries_on_and_an_unreadable_record_is_named(tmp_path):
    layout = RunLayout(tmp_path / "run")
    layout.root.mkdir()
    layout.stages_json.write_text('{"stages": {}}')
    stages = fake_plan(layout)
    records = StageRecords(layout)
    records.check(stages)
    records.started(stages[0])  # killed here: its folder exists, its marker does not
    layout.data.mkdir(parents=True)
    again = StageRecords(layout)
    again.check(stages)  # the same settings: accepted, and the stage runs again
    assert not stages[0].done() and again.records["prepare"]["status"] == "started"
    layout.stages_json.write_text("{broken")
    with pytest.raises(BadInput, match="stages.json: unreadable"):
        StageRecords(layout)
