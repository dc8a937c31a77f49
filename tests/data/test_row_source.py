"""The one data-path resolver for row-reading verbs (``data.loading.row_source``, ``dataset_folder``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.data.jsonl import write_jsonl
from posttrainlab.data.loading import RowSource, dataset_folder, row_source, split_file
from posttrainlab.data.manifest import file_entry, manifest_text
from posttrainlab.errors import BadInput


@pytest.fixture
def dataset(tmp_path) -> Path:
    """A two-config manifest-backed dataset: ``step/{heldout,train}.jsonl`` and ``eval/test.jsonl``."""
    root = tmp_path / "ds"
    files = {}
    for rel in ("step/heldout.jsonl", "step/train.jsonl", "eval/test.jsonl"):
        write_jsonl(root / rel, [{"id": rel, "question": "q"}])
        files[rel] = file_entry(root / rel)
    (root / "manifest.json").write_text(manifest_text({"dataset": "toy", "files": files}), encoding="utf-8")
    return root


def test_a_dataset_folder_gives_its_verified_split(dataset):
    found = row_source(str(dataset), config="step", default_split="heldout")
    assert found == RowSource(str(dataset / "step" / "heldout.jsonl"), dataset.resolve(), "heldout")
    assert row_source(f"{dataset}:train", default_split="heldout").split == "train"  # the path's split wins
    assert row_source(str(dataset), "test", default_split="heldout").path == str(dataset / "eval" / "test.jsonl")
    with pytest.raises(BadInput, match="name a split"):
        row_source(str(dataset))


def test_a_listed_file_is_verified_and_knows_its_dataset(dataset):
    file = dataset / "eval" / "test.jsonl"
    assert row_source(str(file)) == RowSource(str(file), dataset.resolve(), "test")
    file.write_text(json.dumps({"id": "edited"}) + "\n", encoding="utf-8")
    with pytest.raises(BadInput, match="expected sha256"):
        row_source(str(file))


def test_any_other_file_or_hub_path_is_read_as_it_is(tmp_path):
    lone = tmp_path / "rows.jsonl"
    write_jsonl(lone, [{"question": "q"}])
    assert row_source(str(lone), "ignored") == RowSource(str(lone))
    assert row_source("hf://owner/name/SHARP-Math:test") == RowSource("hf://owner/name/SHARP-Math:test")
    with pytest.raises(BadInput, match="no such file"):
        row_source(str(tmp_path / "missing.jsonl"))
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInput, match="has no manifest.json"):
        row_source(str(tmp_path / "plain"))


def test_default_split_applies_only_when_none_is_named(dataset):
    assert split_file(str(dataset), default_split="test").name == "test.jsonl"
    assert split_file(f"{dataset}:heldout", default_split="test").name == "heldout.jsonl"
    assert split_file(str(dataset), "train", default_split="test").name == "train.jsonl"


def test_dataset_folder_of_a_folder_a_file_in_it_a_lone_file_and_a_hub_path(dataset, tmp_path):
    assert dataset_folder(str(dataset)) == str(dataset)
    assert Path(dataset_folder(str(dataset / "step" / "train.jsonl"))) == dataset.resolve()
    lone = tmp_path / "rows.jsonl"
    write_jsonl(lone, [{"question": "q"}])
    assert dataset_folder(str(lone)) is None
    assert dataset_folder("hf://owner/name/eval:test") == "hf://owner/name"
