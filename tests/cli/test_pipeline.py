"""``posttrain generate`` and ``annotate``: every check before torch is imported and before ``--out`` is touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_cli import fresh


@pytest.fixture
def problems(tmp_path) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text('{"id": "p1", "question": "What is 2 + 3?", "answer": 5}\n')
    return path


def test_generate_refuses_a_bad_backend_and_writes_nothing(tmp_path, problems):
    r = fresh("generate", "--backend", "bogus", "--model", "x", "--data", str(problems), "--out", str(tmp_path / "o"))
    assert r.code == 2 and "'bogus' is not one of 'transformers', 'vllm', 'vllm-server', 'openai'" in r.line
    assert not (tmp_path / "o").exists()  # it used to write generate.json there first


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--model", "{tmp}/nomodel"], "--model {tmp}/nomodel: no such model folder"),
        (["--model", "{tmp}", "--data", "{tmp}/nodata.jsonl"], "--data {tmp}/nodata.jsonl: no such file or folder"),
        (["--model", "{tmp}", "--k", "0"], "--k 0: must be at least 1"),
        (["--model", "served", "--backend", "openai"], "--backend openai needs --model-url"),
    ],
)
def test_generate_checks_flags_and_paths_before_torch(tmp_path, problems, extra, fragment):
    """With ``--threads 1`` too, which used to import torch before any check ran."""
    args = [a.format(tmp=tmp_path) for a in extra]
    if "--data" not in args:
        args += ["--data", str(problems)]
    r = fresh("generate", *args, "--output-dir", str(tmp_path / "o"), "--threads", "1")
    assert r.code == 2 and r.line.startswith(f"posttrain: error: {fragment.format(tmp=tmp_path)}")
    assert not r.torch and not (tmp_path / "o").exists()


def test_annotate_takes_concurrency_and_its_old_name(tmp_path):
    for flag in ("--concurrency", "--num-threads"):
        r = fresh("annotate", "--model-name", "j", "--data-file", str(tmp_path / "none"), "--output-dir",
                  str(tmp_path / "o"), flag, "2")  # fmt: skip
        assert r.code == 2 and "no such file" in r.line, flag  # parsed; refused at the data, not at the flag


def test_generate_refuses_a_file_where_out_should_be(tmp_path, problems):
    (tmp_path / "o").write_text("mine")
    r = fresh("generate", "--model", str(tmp_path), "--data", str(problems), "--out", str(tmp_path / "o"),
              "--backend", "openai", "--model-url", "http://127.0.0.1:9/v1")  # fmt: skip
    assert r.code == 2 and r.line == f"posttrain: error: --out {tmp_path / 'o'}: exists and is not a folder"
    assert (tmp_path / "o").read_text() == "mine"
