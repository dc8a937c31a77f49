"""Data integrity (issue #42): ``data card`` refuses files that no longer match what the folder records, unless
``--rehash``; ``data verify`` refuses manifest paths outside the folder and checks record counts.

``data card`` after a row was appended to ``eval/test.jsonl`` wrote a card mixing the old count (500) with recounted
bytes and the old SHA-256, exit 0; ``data verify`` hashed ``../../../../etc/hostname`` and ignored a wrong count."""

from __future__ import annotations

import json
import shutil

import pytest

from cli_capture import cli
from posttrainlab.data.manifest import count_records, sha256_file


@pytest.fixture
def build(arith_dir, tmp_path):
    copy = tmp_path / "arith-v1"
    shutil.copytree(arith_dir, copy)
    return copy


def _manifest(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_data_card_refuses_a_changed_file_and_rehash_records_it(capsys, build):
    test = build / "eval" / "test.jsonl"
    n = count_records(test)
    first = test.read_text().splitlines()[0]
    with open(test, "a", encoding="utf-8") as f:
        f.write(first + "\n")
    card, manifest = (build / "README.md").read_bytes(), (build / "manifest.json").read_bytes()
    code, out, err = cli(capsys, "data", "card", str(build))
    assert code == 2 and err.count("\n") == 1, err
    assert "eval/test.jsonl" in err and "checksum mismatch" in err and "--rehash" in err
    assert (build / "README.md").read_bytes() == card and (build / "manifest.json").read_bytes() == manifest

    code, out, err = cli(capsys, "data", "card", str(build), "--rehash")
    assert code == 0, err
    assert "rehashed " in out and "eval/test.jsonl" in out
    entry = _manifest(build)["files"]["eval/test.jsonl"]
    assert entry == {"sha256": sha256_file(test), "records": n + 1}
    assert _manifest(build)["splits"]["test"]["records"] == n + 1
    text = (build / "README.md").read_text()
    assert f"| test | eval | {n + 1} |" in text  # the card's split table: the file as it is now
    code, out, err = cli(capsys, "data", "verify", str(build))
    assert code == 0, err  # manifest, card and files agree again


def test_data_card_on_an_unchanged_build_needs_no_rehash(capsys, build):
    before = (build / "README.md").read_bytes()
    code, out, err = cli(capsys, "data", "card", str(build))
    assert code == 0, err
    assert (build / "README.md").read_bytes() == before and "rehashed" not in out


@pytest.mark.parametrize("rel", ["../../../../etc/hostname", "/etc/hostname", "eval/../../outside.jsonl"])
def test_verify_refuses_a_manifest_path_outside_the_folder(capsys, build, rel):
    manifest = _manifest(build)
    manifest["files"][rel] = {"sha256": "0" * 64, "records": 1}
    (build / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = cli(capsys, "data", "verify", str(build))
    assert code == 2 and err.count("\n") == 1, err
    assert f"file {rel!r} is outside" in err and "refused" in err


def test_verify_checks_record_counts(capsys, build):
    manifest = _manifest(build)
    n = manifest["files"]["eval/dev.jsonl"]["records"]
    manifest["files"]["eval/dev.jsonl"]["records"] = n + 7
    (build / "manifest.json").write_text(json.dumps(manifest, indent=2))
    code, _, err = cli(capsys, "data", "verify", str(build))
    assert code == 2, err
    assert f"record count mismatch: manifest.json says {n + 7}, the file holds {n}" in err
