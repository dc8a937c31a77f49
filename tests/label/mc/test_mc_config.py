"""One config regime for ``posttrain label mc``: ``--config FILE.yaml``, ``key=value``, old flags, ``--print-config``.

Every setting is a field of ``MCRunConfig``; the flags are turned into ``key=value`` overrides from the field
types (``cli.settings``), applied in command-line order after the file.
"""

from __future__ import annotations

import random
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from cli_capture import cli
from label.mc.fake_endpoint import FakeEndpoint
from posttrainlab.cli.settings import flag_overrides
from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.label.mc.config import MCConfig, MCRunConfig, OutputConfig
from posttrainlab.label.mc.scripted import ScriptedArithPolicy

SHIPPED = Path(__file__).resolve().parents[3] / "configs" / "label" / "mc.yaml"
PATHS = ["--policy", "p", "--data", "d.jsonl", "--out", "o"]


def printed(capsys, *args: str) -> dict:
    code, out, err = cli(capsys, "label", "mc", *args, "--print-config")
    assert code == 0, err
    return yaml.safe_load(out)


def test_the_shipped_yaml_sets_every_key_to_its_default():
    assert load_config(MCRunConfig, SHIPPED) == MCRunConfig()
    assert list(yaml.safe_load(SHIPPED.read_text())) == [f.name for f in fields(MCRunConfig)]


def test_config_file_then_overrides_and_flags_in_command_line_order(capsys, tmp_path):
    file = tmp_path / "mc.yaml"
    file.write_text("policy: runs/sft\ndata: problems.jsonl\nout: runs/mc\nn: 16\nsearch: binary\nseed: 3\n")
    got = printed(capsys, "--config", str(file), "n=4", "--n", "6", "seed=5", "--keep-band", "0.1", "0.9")
    assert (got["policy"], got["n"], got["seed"], got["search"], got["keep_band"]) == (
        "runs/sft",
        6,
        5,
        "binary",
        [0.1, 0.9],
    )
    got = printed(capsys, "--config", str(file), "--n", "6", "n=4")  # the later one wins
    assert got["n"] == 4


def test_every_old_flag_keeps_its_meaning(capsys):
    args = [*PATHS, "--n", "2", "--split", "test", "--limit", "4", "--samples-per-problem", "2"]
    args += ["--temperature", "0.5", "--top-p", "0.9", "--max-new-tokens", "12", "--seed", "1", "--search", "binary"]
    args += ["--grader", "math:float_rounding=2", "--step-split", "paragraphs", "--stop", "\n\n", "--stop", "END"]
    args += ["--backend", "openai", "--base-url", "http://x/v1", "--api-key", "k", "--batch-size", "4"]
    args += ["--problems-per-call", "3", "--judge-model", "j", "--judge-url", "http://j/v1"]
    args += ["--judge-relabel", "unparsed", "--val-problems", "1", "--keep-band", "0.1", "0.9"]
    args += ["--mid-difficulty", "0.2", "0.8", "--source", "s", "--card-columns-only", "--shard", "0/2"]
    args += ["--keep-continuations", "--exact-check", "--trust-remote-code", "--dtype", "bfloat16", "--threads", "1"]
    args += ["--no-progress", "--ray", "2", "--ray-address", "auto"]
    got = printed(capsys, *args)
    assert got == {
        "policy": "p", "data": "d.jsonl", "out": "o", "split": "test", "limit": 4, "shard": "0/2", "n": 2,
        "samples_per_problem": 2, "temperature": 0.5, "top_p": 0.9, "max_new_tokens": 12, "seed": 1,
        "search": "binary", "grader": "math:float_rounding=2", "step_split": "paragraphs", "stop": ["\n\n", "END"],
        "val_problems": 1, "keep_band": [0.1, 0.9], "mid_difficulty": [0.2, 0.8], "source": "s",
        "formats": ["parquet", "jsonl"], "text_columns": False, "backend": "openai", "base_url": "http://x/v1",
        "api_key": "***", "batch_size": 4, "problems_per_call": 3, "judge_model": "j", "judge_url": "http://j/v1",
        "judge_relabel": "unparsed", "keep_continuations": True, "exact_check": True, "trust_remote_code": True,
        "dtype": "bfloat16", "threads": 1, "progress": False, "ray": 2, "ray_address": "auto",
    }  # fmt: skip
    cfg = load_config(MCRunConfig, None, flag_overrides(MCRunConfig, args, command="t"))
    assert cfg.api_key == "k" and cfg.stop == ("\n\n", "END") and cfg.labelling() == MCConfig(
        n=2, samples_per_problem=2, temperature=0.5, top_p=0.9, max_new_tokens=12, seed=1, search="binary",
        grader="math:float_rounding=2", step_split="paragraphs", stop=("\n\n", "END"),
    )  # fmt: skip
    assert cfg.output() == OutputConfig(1, (0.1, 0.9), (0.2, 0.8), "s", ("parquet", "jsonl"), False)


def test_flag_forms():
    def over(*tokens):
        return flag_overrides(MCRunConfig, list(tokens), command="t")

    assert over("--seed=4", "--split=1", "--text-columns", "--no-text-columns") == [
        "seed=4", 'split="1"', "text_columns=true", "text_columns=false"
    ]  # fmt: skip  # a text setting keeps "1" a string
    assert over("--formats", "jsonl", "--formats", "parquet")[-1] == 'formats=["jsonl", "parquet"]'
    for bad, message in [
        (["--nope", "1"], "--nope: no such setting"),
        (["--keep-band", "0.1"], "--keep-band: needs 2 values"),
        (["--keep-band=0.1"], "--keep-band: takes 2 values"),
        (["--progress=false"], "--progress: takes no value"),
        (["--n"], "--n: needs 1 value"),
    ]:
        with pytest.raises(BadInput, match=message):
            over(*bad)


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope=1"], "override 'nope=1': Key 'nope' not in 'MCRunConfig'"),
        (["--nope", "1"], "--nope: no such setting; `posttrain label mc --help` lists them"),
        (["--n", "abc"], "override 'n=abc': Value 'abc' of type 'str' could not be converted to Integer"),
        (["keep_band=[0.1]"], "keep_band"),
        (["n"], "override 'n': expected key=value"),
    ],
)
def test_an_unknown_key_or_a_bad_value_exits_2_in_one_line(capsys, tmp_path, args, message):
    for tail in ([], ["--print-config"]):
        code, out, err = cli(capsys, "label", "mc", *PATHS, *args, *tail)
        assert code == 2 and message in err and err.count("\n") == 1 and out == "", err


def test_a_config_file_with_an_unknown_key_exits_2(capsys, tmp_path):
    file = tmp_path / "mc.yaml"
    file.write_text("n: 4\nnum_continuations: 8\n")
    code, _, err = cli(capsys, "label", "mc", "--config", str(file), *PATHS)
    assert code == 2 and "Key 'num_continuations' not in 'MCRunConfig'" in err


def test_print_config_loads_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = printed(capsys, "--policy", "no-such-model", "--out", "o", "--n", "3")  # paths not checked: only printed
    assert got["n"] == 3 and got["data"] is None and list(tmp_path.iterdir()) == []
    # an impossible value is refused as the settings load, as the run would (tests/cli/test_print_config.py)
    code, out, err = cli(capsys, "label", "mc", "--n", "0", "--print-config")
    assert code == 2 and out == "" and "--n 0: need at least one continuation" in err


@pytest.mark.parametrize("missing", ["--policy", "--data", "--out"])
def test_policy_data_and_out_must_be_set(capsys, tmp_path, missing):
    i = PATHS.index(missing)
    code, _, err = cli(capsys, "label", "mc", *PATHS[:i], *PATHS[i + 2 :])
    assert code == 2 and f"{missing}: not set" in err


def test_help_lists_every_setting_with_its_help(capsys):
    code, out, _ = cli(capsys, "label", "mc", "--help")
    assert code == 0
    flat = " ".join(out.split())
    for f in fields(MCRunConfig):
        assert f"--{f.name.replace('_', '-')}" in out and f"[{f.name}:" in out, f.name
        assert " ".join(f.metadata["help"].split()) in flat, f.name
    assert "--card-columns-only" in out and "--config" in out and "--print-config" in out


def _policy_server():
    policy = ScriptedArithPolicy(0.3, 0.1)

    def respond(body, k):
        messages = body["messages"]
        prefix = messages[-1]["content"] if body.get("continue_final_message") else ""
        rng = random.Random(body["seed"])
        return [policy.continue_one(messages[:1], prefix, rng) for _ in range(body.get("n", 1))]

    return respond


def test_a_run_from_a_config_file_writes_what_the_same_run_from_flags_writes(capsys, tmp_path, problems_file):
    with FakeEndpoint(_policy_server()) as server:
        flags = ["--policy", "served", "--backend", "openai", "--base-url", server.url, "--data", str(problems_file)]
        flags += ["--n", "4", "--val-problems", "2", "--keep-band", "0.1", "0.9", "--no-progress"]
        code, _, err = cli(capsys, "label", "mc", *flags, "--out", str(tmp_path / "flags"))
        assert code == 0, err
        code, out, err = cli(capsys, "label", "mc", *flags, "--out", str(tmp_path / "file"), "--print-config")
        assert code == 0, err
        (tmp_path / "mc.yaml").write_text(out)
        code, _, err = cli(capsys, "label", "mc", "--config", str(tmp_path / "mc.yaml"))
        assert code == 0, err

    def files(out):
        return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    assert files(tmp_path / "file") == files(tmp_path / "flags") and "band-0.1-0.9/train.jsonl" in files(
        tmp_path / "file"
    )
