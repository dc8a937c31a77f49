"""``posttrain train``'s output_dir: checked before anything is written, resumed out loud, never with another recipe.

Every run here is the tiny test model for one or two steps, in this process (``cli_capture``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.train.common import load_records
from posttrainlab.train.recipes import DatasetConfig, SFTRecipe

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LR = load_config(SFTRecipe, "configs/arith/sft.yaml").optim.learning_rate


def sft(capsys, tiny_model, arith_dir, out, *extra: str, flags: tuple[str, ...] = ()):
    return cli(capsys, "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"), *flags,
               f"model={tiny_model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=8",
               "optim.max_steps=2", "optim.batch_size=2", "optim.save_steps=1", "optim.logging_steps=1",
               "optim.lr_scheduler=constant", *extra)  # fmt: skip


def summary(out: Path) -> dict:
    return json.loads((out / "train_summary.json").read_text())


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tiny_model, arith_dir, tmp_path_factory):
    """A finished 2-step SFT run with checkpoints at steps 1 and 2."""

    class Quiet:  # the module fixture has no capsys; pytest's own capture keeps the output
        @staticmethod
        def readouterr():
            return "", ""

    out = tmp_path_factory.mktemp("runs") / "sft"
    code, _, _ = sft(Quiet, tiny_model, arith_dir, out)
    assert code == 0
    assert (out / "checkpoint-2" / "trainer_state.json").is_file()
    return out


@pytest.fixture
def run(finished, tmp_path) -> Path:
    """A copy of the finished run (each test changes its own)."""
    copy = tmp_path / "sft"
    shutil.copytree(finished, copy)
    return copy


# defect 2: check first, write after


@pytest.mark.parametrize("bad", ["model={tmp}/nope", "dataset.path={tmp}/arith-v11", "dataset.split=nope"])
def test_a_run_that_fails_its_checks_writes_nothing(capsys, tiny_model, arith_dir, tmp_path, bad):
    out = tmp_path / "new-run"
    code, _, err = sft(capsys, tiny_model, arith_dir, out, bad.format(tmp=tmp_path))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # not even a folder holding recipe.yaml


@pytest.mark.parametrize("flag", ["--resume", "--overwrite"])
def test_a_failed_run_leaves_a_finished_run_as_it_was(capsys, tiny_model, arith_dir, run, tmp_path, flag):
    before = snapshot(run)
    code, _, err = sft(capsys, tiny_model, arith_dir, run, f"model={tmp_path}/nope", flags=(flag,))
    assert code == 2 and "no such model folder" in err
    assert snapshot(run) == before  # recipe.yaml, checkpoints, model and summary untouched


def test_output_dir_with_user_files_is_refused(capsys, tiny_model, arith_dir, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    (out / "results.csv").write_text("a,b\n")
    code, _, err = sft(capsys, tiny_model, arith_dir, out)
    assert code == 2 and "notes.txt" in err and "results.csv" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv"]


# defect 3: build arith-v1 only where asked


def test_a_typo_in_dataset_path_is_refused_not_built(tmp_path):
    typo = tmp_path / "data" / "arith-v11"
    with pytest.raises(BadInput, match=rf"{typo}: no such folder.*prepare_if_missing=true"):
        load_records(DatasetConfig(path=str(typo), limit=2))
    assert not typo.exists()


def test_arith_v1_is_built_at_the_default_path_or_when_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert len(load_records(DatasetConfig(limit=2))) == 2  # the default path, data/arith-v1
    assert (tmp_path / "data" / "arith-v1" / "manifest.json").is_file()
    other = tmp_path / "elsewhere"
    assert len(load_records(DatasetConfig(path=str(other), limit=2, prepare_if_missing=True))) == 2
    assert (other / "manifest.json").is_file()
    never = DatasetConfig(path="data/arith-v2", prepare_if_missing=False)
    with pytest.raises(BadInput, match="data/arith-v2: no such folder"):
        load_records(never)


# defect 4: resume out loud, and only with the same recipe


def test_resume_says_where_it_starts(capsys, tiny_model, arith_dir, run):
    code, out, err = sft(capsys, tiny_model, arith_dir, run, "optim.max_steps=3")  # a length key may change
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("sft: resuming"))
    assert f"{run / 'checkpoint-2'}" in line and "step 2" in line
    assert summary(run)["resumed_from"] == str(run / "checkpoint-2") and summary(run)["global_step"] == 3


def test_resume_with_another_recipe_is_refused_listing_the_changes(capsys, tiny_model, arith_dir, run):
    before = snapshot(run)
    code, _, err = sft(capsys, tiny_model, arith_dir, run, "optim.learning_rate=0.5", "max_length=256")
    assert code == 2, err
    line = err.strip()
    assert "\n" not in line and f"optim.learning_rate {DEFAULT_LR} -> 0.5" in line and "max_length 512 -> 256" in line
    assert "--resume" in line and "--overwrite" in line
    assert snapshot(run) == before


def test_resume_flag_continues_with_the_new_recipe(capsys, tiny_model, arith_dir, run):
    code, out, err = sft(capsys, tiny_model, arith_dir, run, "optim.learning_rate=0.5", "optim.max_steps=3",
                         flags=("--resume",))  # fmt: skip
    assert code == 0, err
    assert "sft: resuming" in out and f"optim.learning_rate {DEFAULT_LR} -> 0.5" in out
    assert summary(run)["resumed_from"] == str(run / "checkpoint-2") and summary(run)["global_step"] == 3
    assert "learning_rate: 0.5" in (run / "recipe.yaml").read_text()


def test_overwrite_flag_starts_afresh(capsys, tiny_model, arith_dir, run):
    earlier_events = sorted((run / "tensorboard").iterdir())
    code, out, err = sft(capsys, tiny_model, arith_dir, run, "optim.learning_rate=0.5", "optim.max_steps=1",
                         flags=("--overwrite",))  # fmt: skip
    assert code == 0, err
    assert "resuming" not in out
    assert summary(run)["resumed_from"] is None and summary(run)["global_step"] == 1
    assert not (run / "checkpoint-2").exists()  # the earlier run's checkpoints would be resumed from next time
    steps = [json.loads(x)["step"] for x in (run / "train_log.jsonl").read_text().splitlines()]
    assert max(steps) == 1
    events = sorted((run / "tensorboard").iterdir())  # the new run's curves only
    assert events and not set(events) & set(earlier_events)


def test_resume_and_overwrite_together_are_refused(capsys, tiny_model, arith_dir, run):
    code, _, err = sft(capsys, tiny_model, arith_dir, run, flags=("--resume", "--overwrite"))
    assert code == 2 and "--resume" in err and "--overwrite" in err


def test_prm_resume_says_so_and_refuses_another_recipe(capsys, tiny_model, tmp_path):
    out = tmp_path / "prm"
    args = ["train", "prm", "--config", str(ROOT / "configs/prm/step.yaml"), f"model={tiny_model}",
            f"output_dir={out}", "optim.batch_size=4", "optim.save_steps=1", "optim.logging_steps=1"]  # fmt: skip
    assert cli(capsys, *args, "optim.max_steps=1")[0] == 0
    before = snapshot(out)
    code, _, err = cli(capsys, *args, "optim.max_steps=2", "head=verdict")
    assert code == 2 and "head token-cls -> verdict" in err, err
    assert snapshot(out) == before
    code, stdout, err = cli(capsys, *args, "optim.max_steps=2")
    assert code == 0, err
    assert any(x.startswith("prm: resuming") and "step 1" in x for x in stdout.splitlines()), stdout
    assert summary(out)["resumed_from"] == str(out / "checkpoint-1")


def test_a_field_added_since_the_run_at_its_default_is_not_a_change(tmp_path):
    """A recipe.yaml written before ``dpo.preference`` existed resumes; a non-default value is still a change."""
    import yaml

    from posttrainlab.config import to_dict
    from posttrainlab.train.common import recipe_changes
    from posttrainlab.train.recipes import DPORecipe

    old = to_dict(DPORecipe())
    del old["preference"]
    saved = tmp_path / "recipe.yaml"
    saved.write_text(yaml.safe_dump(old), encoding="utf-8")
    assert recipe_changes(saved, DPORecipe()) == []
    changed = DPORecipe()
    changed.preference.source = "policy"
    assert recipe_changes(saved, changed) == ["preference.source (unset) -> policy"]


def test_seeds_train_one_folder_per_seed_each_with_the_next_seed(capsys, tiny_model, arith_dir, tmp_path):
    out = tmp_path / "sft"
    code, stdout, _ = sft(capsys, tiny_model, arith_dir, out, flags=("--seeds", "2"))
    assert code == 0 and "(seed 2/2, optim.seed 1)" in stdout
    assert (summary(out)["recipe"]["optim"]["seed"], summary(tmp_path / "sft-s1")["recipe"]["optim"]["seed"]) == (0, 1)


# issue #25: settings no run can train with are refused before anything; TensorBoard logs where the docs say


def test_tensorboard_logs_go_to_the_documented_folder(finished):
    """transformers wrote them to output_dir/runs/<date>_<host>/, a runs/ folder beside the model (train.logs)."""
    assert not (finished / "runs").exists()
    assert any(p.name.startswith("events.out.tfevents") for p in (finished / "tensorboard").iterdir())


def test_nonsense_settings_are_refused_before_anything_is_written(capsys, tiny_model, arith_dir, tmp_path):
    """``optim.epochs=-3`` exited 0 with "0 steps ... final loss 0", saved the untouched start model as the result
    and wrote train_loss 0.0; now it is one line, exit 2, and no folder is made."""
    out = tmp_path / "new-run"
    code, _, err = sft(capsys, tiny_model, arith_dir, out, "optim.max_steps=-1", "optim.epochs=-3")
    assert code == 2 and err.count("\n") == 1 and "optim.epochs=-3.0: must be greater than 0" in err
    assert not out.exists()


def test_a_recipe_built_in_python_is_checked_too(tiny_model, arith_dir, tmp_path):
    from posttrainlab.train.recipes import OptimConfig, SFTRecipe
    from posttrainlab.train.sft import train_sft

    recipe = SFTRecipe(model=str(tiny_model), output_dir=str(tmp_path / "run"), optim=OptimConfig(batch_size=0),
                       dataset=DatasetConfig(path=str(arith_dir)))  # fmt: skip
    with pytest.raises(BadInput, match=r"^optim\.batch_size=0: must be at least 1$"):
        train_sft(recipe)
    assert not (tmp_path / "run").exists()
