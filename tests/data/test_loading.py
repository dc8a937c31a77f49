"""Loading splits: every path form, checksum refusal, and one-line errors for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from posttrainlab.data.arith.release import prepare
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.data.loading import load_split, parse_data_path, split_file
from posttrainlab.data.manifest import verify_dir
from posttrainlab.errors import BadInput


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("arith") / "arith-v1"
    prepare(out, "1.1.0")
    return out


@pytest.fixture
def copy(built, tmp_path) -> Path:
    dst = tmp_path / "arith-v1"
    shutil.copytree(built, dst)
    return dst


@pytest.mark.parametrize(
    "spec, split, config, n",
    [
        ("{d}", "test", None, 500),
        ("{d}", "test", "eval", 500),
        ("{d}:dev", None, None, 500),
        ("{d}/sft/sft_train.jsonl", None, None, 1000),
        ("{d}", "preference_test", None, 500),
    ],
)
def test_path_forms(built, spec, split, config, n):
    assert len(load_split(spec.format(d=built), split=split, config=config)) == n


def test_limit_gives_nested_prefixes(built):
    first = load_split(str(built), "sft_train", limit=100)
    assert first == load_split(str(built), "sft_train")[:100]


def test_edited_file_is_refused_naming_file_and_both_hashes(copy):
    path = copy / "eval" / "test.jsonl"
    path.write_text(path.read_text().replace("What is 1", "What is 2", 1))
    with pytest.raises(BadInput) as e:
        load_split(str(copy), "test")
    msg = str(e.value)
    assert str(path) in msg and "expected sha256" in msg and "found" in msg and "\n" not in msg
    with pytest.raises(BadInput):  # the file path form finds the manifest and refuses too
        load_split(str(path))


def test_truncated_line_in_a_manifest_backed_file_is_refused(copy):
    path = copy / "sft" / "sft_train.jsonl"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(BadInput, match="checksum mismatch"):
        load_split(str(copy), "sft_train")


def test_truncated_line_in_a_plain_jsonl_names_the_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n{"a": 2, "b\n')
    with pytest.raises(BadInput, match=r"rows.jsonl:2: not valid JSON"):
        read_jsonl(path)


def test_unknown_split_and_config_list_the_choices(built):
    with pytest.raises(BadInput, match=r"unknown split 'tset'; choose one of test, validation, dev"):
        load_split(str(built), "tset")
    with pytest.raises(BadInput, match=r"unknown config 'evl'"):
        load_split(str(built), "test", config="evl")
    with pytest.raises(BadInput, match="unknown split 'test'"):
        load_split(str(built), "test", config="sft")


def test_manifest_listing_a_missing_file(copy):
    (copy / "eval" / "dev.jsonl").unlink()
    problems = verify_dir(copy)
    assert len(problems) == 1 and "missing" in str(problems[0])
    with pytest.raises(BadInput, match="missing"):
        load_split(str(copy), "dev")


def test_broken_manifest_and_missing_paths(copy, tmp_path):
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(BadInput, match="manifest.json: not valid JSON"):
        load_split(str(copy), "test")
    with pytest.raises(BadInput, match="no such file or folder"):
        load_split(str(tmp_path / "nowhere"), "test")
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInput, match="has no manifest.json"):
        load_split(str(tmp_path / "plain"), "test")


def test_folder_without_split_asks_for_one(built):
    with pytest.raises(BadInput, match="name a split"):
        split_file(str(built))


def test_parse_data_path_hub_forms():
    ref = parse_data_path("hf://ZaandaTeika/SHARP/SHARP-Math:test")
    assert (ref.location, ref.config, ref.split, ref.on_hub) == ("ZaandaTeika/SHARP", "SHARP-Math", "test", True)
    ref = parse_data_path("hf://OverwhelmingFit/SOPO-Math-Shepherd-614:test")
    assert (ref.location, ref.config, ref.split) == ("OverwhelmingFit/SOPO-Math-Shepherd-614", None, "test")


def test_records_round_trip_as_json(built):
    record = load_split(str(built), "validation")[0]
    assert json.loads(json.dumps(record, ensure_ascii=False)) == record


def test_hub_path_downloads_verifies_and_loads_through_a_fake_hub(built, tmp_path, monkeypatch):
    """The arith-v1 card's `dataset.path: hf://M-amir1998/arith-v1`, served by a fake Hub on loopback."""
    import huggingface_hub.constants as constants

    from fakehub import FakeHub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with FakeHub({"M-amir1998/arith-v1": built}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        test = load_split("hf://M-amir1998/arith-v1:test")
        dev = load_split("hf://M-amir1998/arith-v1/eval:dev")
    assert test == load_split(str(built), "test") and len(dev) == 500


def test_hub_path_offline_fails_at_once_with_one_line(tmp_path, monkeypatch):
    from posttrainlab.errors import HubUnavailable

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable) as e:
        load_split("hf://M-amir1998/arith-v1:test")
    assert "\n" not in str(e.value) and "hf://M-amir1998/arith-v1" in str(e.value)


def test_mistyped_local_path_that_looks_like_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match=r"^data/arith-v2: no such local path, and not loadable as a Hub id"):
        load_split("data/arith-v2", "test")
