"""``posttrain label mc`` end to end: a tiny real model on arith-v1; an OpenAI-compatible endpoint (policy, judge)."""

from __future__ import annotations

import json
import random

import pytest

from label.mc.fake_endpoint import FakeEndpoint
from posttrainlab.cli import main
from posttrainlab.data.formats.mc_value import validate_mc
from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.label.mc.scripted import ScriptedArithPolicy
from tiny_models import SMALL


def cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as e:
        return 0 if e.code is None else e.code
    return 0


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from posttrainlab.models.tiny import init_model

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "tiny")


def test_tiny_model_end_to_end(tmp_path, problems_file, tiny_model, capsys):
    out = tmp_path / "mc"
    args = ["label", "mc", "--policy", str(tiny_model), "--data", str(problems_file), "--n", "2", "--out", str(out)]
    args += ["--limit", "4", "--val-problems", "1", "--max-new-tokens", "12", "--threads", "1", "--no-progress"]
    assert cli(*args, "--exact-check") == 0
    printed = capsys.readouterr().out
    assert "V == 0" in printed and "agreement.json" in printed
    rows = list(iter_rows(out / "train.parquet")) + list(iter_rows(out / "val.parquet"))
    assert rows and list(validate_mc(rows)) == []
    assert cli("data", "validate", "--format", "mc-value", str(out / "train.parquet")) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 4 and len(summary["val_ids"]) == 1
    assert cli("label", "mc-agreement", str(out), "--n", "1", "--n", "2") == 0
    table = json.loads((out / "agreement.json").read_text())["table"]
    assert [e["n"] for e in table] == [1, 2]


def test_bad_flags_exit_2(tmp_path, problems_file, capsys):
    base = ["label", "mc", "--policy", "x", "--data", str(problems_file), "--out", str(tmp_path / "o")]
    assert cli(*base, "--n", "0") == 2
    assert cli(*base, "--n", "2", "--search", "linear") == 2
    assert cli(*base, "--n", "2", "--shard", "3/2") == 2
    assert cli(*base, "--n", "2", "--keep-band", "0.9", "0.1") == 2
    assert (
        cli(*base, "--n", "2", "--val-problems", "50", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1")
        == 2
    )
    assert "posttrain: error:" in capsys.readouterr().err
    assert cli("label", "mc-agreement", str(tmp_path)) == 2


def scripted_server(policy: ScriptedArithPolicy):
    """Policy requests continue the assistant prefix with the scripted solver; judge requests get yes/no."""

    def respond(body, k):
        messages = body["messages"]
        question = messages[0]["content"]
        if question.startswith("You are grading"):
            response = question.split("Solution:\n", 1)[1]
            reference = question.split("Reference answer: ", 1)[1].split("\n", 1)[0]
            return ["yes" if f"Answer: {reference}" in response else "no"]
        prefix = messages[-1]["content"] if body.get("continue_final_message") else ""
        rng = random.Random(body["seed"])
        return [policy.continue_one(messages[:1], prefix, rng) for _ in range(body.get("n", 1))]

    return respond


def test_openai_backend_and_judge_end_to_end(tmp_path, problems_file):
    with FakeEndpoint(scripted_server(ScriptedArithPolicy(0.3, 0.1))) as server:
        out = tmp_path / "mc"
        args = ["label", "mc", "--policy", "served-policy", "--backend", "openai", "--base-url", server.url]
        args += ["--data", str(problems_file), "--n", "4", "--out", str(out), "--val-problems", "2", "--no-progress"]
        args += ["--judge-model", "judge", "--judge-url", server.url, "--keep-band", "0.1", "0.9"]
        assert cli(*args) == 0
    rows = list(iter_rows(out / "train.jsonl"))
    assert list(validate_mc(rows)) == [] and 0 < len(list(iter_rows(out / "band-0.1-0.9" / "train.jsonl"))) < len(rows)
    kinds = {
        ("judge" if r["messages"][0]["content"].startswith("You are grading") else "policy") for r in server.requests
    }
    assert kinds == {"policy", "judge"}
    work = [json.loads(line) for line in (out / "work" / "shard-0-of-1.jsonl").read_text().splitlines()]
    assert all("raw" in p for w in work for t in w["traces"] for p in t["prefixes"])
