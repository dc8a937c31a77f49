"""Writing arith-v1 to disk: atomic replacement, refusal of foreign folders, ``--check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.arith import generator, release
from posttrainlab.data.arith.generator import BuildError
from posttrainlab.data.arith.release import check, prepare
from posttrainlab.data.manifest import sha256_file, verify_dir
from posttrainlab.errors import BadInput


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("arith") / "arith-v1"
    prepare(out)
    return out


def test_written_files_match_manifest_and_golden(built):
    assert verify_dir(built) == []
    manifest = json.loads((built / "manifest.json").read_text())
    assert manifest == release.golden_manifest("1.3.0")
    assert sorted(p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file()) == sorted(
        [*manifest["files"], "manifest.json", "README.md"]
    )
    for rel, entry in manifest["files"].items():
        assert sha256_file(built / rel) == entry["sha256"]
        text = (built / rel).read_text(encoding="utf-8")
        assert text.endswith("\n") and len(text.splitlines()) == entry["records"]


def test_check_passes_on_a_good_build_and_names_an_edited_file(built, tmp_path):
    assert check("1.3.0", built) == []
    copy = tmp_path / "copy"
    prepare(copy)
    victim = copy / "eval" / "test.jsonl"
    victim.write_text(victim.read_text().replace("What is", "What's", 1))
    problems = check("1.3.0", copy)
    assert len(problems) == 1 and "eval/test.jsonl" in problems[0]


def test_check_reports_a_drift_from_the_golden_manifest(monkeypatch):
    golden = release.golden_manifest("1.0.0")
    golden["files"]["eval/test.jsonl"]["sha256"] = "0" * 64
    monkeypatch.setattr(release, "golden_manifest", lambda version: golden)
    problems = check("1.0.0")
    assert problems and problems[0].startswith("eval/test.jsonl")


def test_check_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check("1.0.0") == []
    assert list(tmp_path.iterdir()) == []


def test_prepare_replaces_an_earlier_build(tmp_path):
    out = tmp_path / "ds"
    prepare(out, "1.0.0")
    assert not (out / "eval" / "dev.jsonl").exists()
    prepare(out, "1.3.0")
    assert (out / "eval" / "dev.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no staging or aside folder left


def test_prepare_refuses_a_folder_with_other_files(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(BadInput, match="holds other files"):
        prepare(out)
    assert (out / "notes.txt").read_text() == "keep me"


def test_failed_build_leaves_the_earlier_output_untouched(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    prepare(out, "1.0.0")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise BuildError("arith-v1 build aborted: injected")

    monkeypatch.setattr(generator, "_verify_grades", broken)
    with pytest.raises(BuildError):
        prepare(out, "1.3.0")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_failure_while_writing_leaves_the_earlier_output_untouched(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    prepare(out, "1.0.0")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real = Path.write_bytes
    calls = []

    def flaky(self, data):
        calls.append(self)
        if len(calls) == 3:
            raise OSError("disk full (injected)")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    with pytest.raises(OSError, match="injected"):
        prepare(out, "1.3.0")
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_unknown_version_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="unknown arith-v1 version '2.0.0'"):
        prepare(tmp_path / "x", "2.0.0")


def test_datasets_load_dataset_reads_the_local_build(built, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from datasets import load_dataset

    test = load_dataset(str(built), "eval", split="test")
    assert len(test) == 500
    assert test.column_names == ["id", "category", "prompt", "answer", "solution"]
    pairs = load_dataset(str(built), "preference", split="preference_train")
    assert len(pairs) == 500 and "corruption" in pairs.column_names
    default = load_dataset(str(built), split="dev")  # eval is the default config
    assert len(default) == 500
