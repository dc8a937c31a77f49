"""``posttrain eval beam-search``: a real tiny policy and PRM end to end, and bad input as one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_cli import fresh

from posttrainlab.data.jsonl import read_jsonl

POSTTRAIN = [sys.executable, "-m", "posttrainlab"]


@pytest.fixture(scope="module")
def tiny_prm(tmp_path_factory, tiny_model) -> Path:
    """An untrained token-classification PRM on the tiny model, saved as ``posttrain train prm`` saves one."""
    from posttrainlab.prm.loading import load_for_training
    from posttrainlab.prm.spec import write_spec
    from tiny_models import one_torch_thread

    out = tmp_path_factory.mktemp("models") / "prm"
    with one_torch_thread():
        model, tokenizer, spec = load_for_training(tiny_model, head="token-cls")
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    write_spec(spec, out)
    return out


def test_a_real_tiny_policy_and_prm(arith_dir, tiny_model, tiny_prm, tmp_path, capsys):
    """3 problems, 2 beams x 2 proposals, 8 tokens a beam, an untrained PRM: shapes and budgets, not quality.

    Every finished beam stays within the step and beam budgets (a step at most 8 tokens, so a beam at most
    8 + 7 = 15); a problem's tokens are at least its finished beams' own; best-of-N's folder is counted.
    """
    from cli_capture import cli

    bon = tmp_path / "bon"
    bon.mkdir()
    rows = [{"id": f"test-{i:04d}", "samples": [{"response": "1 + 2 = 3"}]} for i in range(3)]
    (bon / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (bon / "sampling.json").write_text(json.dumps({"max_new_tokens": 48}), encoding="utf-8")
    out = tmp_path / "beam"
    args = ["eval", "beam-search", "--policy", str(tiny_model), "--prm", str(tiny_prm), "--data", str(arith_dir),
            "--out", str(out), "--beams", "2", "--proposals", "2", "--max-steps", "3", "--limit", "3",
            "--max-new-tokens", "8", "--max-step-tokens", "8", "--best-of-n", str(bon), "--no-progress",
            "--device", "cpu", "--threads", "1"]  # fmt: skip
    code, stdout, stderr = cli(capsys, *args)
    assert code == 0, stdout + stderr
    assert "best-scored beam" in stdout and "generated tokens per problem (best-of-1: 10.0)" in stdout
    b = json.loads((out / "beam.json").read_text(encoding="utf-8"))
    assert b["problems"] == 3 and b["settings"]["max_new_tokens"] == 8 and b["best_of_n_tokens_per_problem"] == 10.0
    outcomes = read_jsonl(out / "outcomes.jsonl")
    assert [r["id"] for r in outcomes] == ["test-0000", "test-0001", "test-0002"]
    for r in outcomes:
        assert {"id", "category", "correct", "answer", "parsed", "response", "score", "tokens"} <= set(r)
        assert 1 <= len(r["beams"]) <= 2 and 1 <= r["rounds"] <= 3
        assert r["tokens"] >= max(x["tokens"] for x in r["beams"])
        for x in r["beams"]:
            assert len(x["scores"]) == len([line for line in x["response"].splitlines() if line.strip()])
            assert all(0 <= s <= 1 for s in x["scores"]) and x["tokens"] <= 15
        assert r["score"] == max(x["score"] for x in r["beams"])
    assert b["tokens_per_problem"] == sum(r["tokens"] for r in outcomes) / 3


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--prm", "{nowhere}"], "{nowhere}: no such model folder (PRM)"),
        (["--aggregation", "product"], "aggregation 'product': choose one of last, min"),
        (["--beams", "0"], "beams=0: must be at least 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(arith_dir, tiny_model, tmp_path, flags, message):
    nowhere = str(tmp_path / "nowhere")
    given = [f.format(nowhere=nowhere) for f in flags]
    prm = given[1] if given[0] == "--prm" else str(tiny_model)  # a folder that exists unless the case is its
    argv = [*POSTTRAIN, "eval", "beam-search", "--policy", str(tiny_model), "--prm", prm, "--data", str(arith_dir),
            "--out", str(tmp_path / "o"), *(given if given[0] != "--prm" else [])]  # fmt: skip
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ")
    assert message.format(nowhere=nowhere) in lines[0]


# issue #25: every input is checked before torch is imported, and an earlier result is kept without --overwrite


def fake_models(root: Path) -> tuple[Path, Path]:
    """A policy folder and a PRM folder as far as their JSON files tell (nothing here loads their weights)."""
    for name, arch in (("sft", "Qwen2ForCausalLM"), ("prm", "Qwen2ForTokenClassification")):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps({"architectures": [arch]}))
    return root / "sft", root / "prm"


def beam_args(arith_dir, policy, prm, out, *extra) -> list[str]:
    return ["eval", "beam-search", "--policy", str(policy), "--prm", str(prm), "--data", str(arith_dir),
            "--out", str(out), "--limit", "3", "--threads", "1", *extra]  # fmt: skip


def test_an_earlier_result_is_kept_unless_overwrite(arith_dir, tmp_path):
    """beam.json and outcomes.jsonl used to be replaced silently; now the rule of eval best-of-n (check_results)."""
    policy, prm = fake_models(tmp_path)
    out = tmp_path / "beam"
    out.mkdir()
    (out / "outcomes.jsonl").write_text("earlier\n")
    r = fresh(*beam_args(arith_dir, policy, prm, out))
    assert r.code == 2 and f"{out} already holds eval results (outcomes.jsonl from " in r.line and not r.torch
    assert (out / "outcomes.jsonl").read_text() == "earlier\n"
    r = fresh(*beam_args(arith_dir, policy, tmp_path / "nowhere", out, "--overwrite"))
    assert r.code == 2 and "no such model folder (PRM)" in r.line  # past the results check, to the next one


def test_a_policy_folder_as_the_prm_is_refused_before_torch(arith_dir, tmp_path):
    policy, _ = fake_models(tmp_path)
    r = fresh(*beam_args(arith_dir, policy, policy, tmp_path / "o"))
    assert r.code == 2 and f"--prm {policy}: not a PRM checkpoint (Qwen2ForCausalLM" in r.line and not r.torch
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", ["eval-policy", "no-sampling-json", "other-problems"])
def test_a_folder_that_is_no_best_of_n_run_is_refused_before_torch(arith_dir, tmp_path, kind):
    """--best-of-n NOT_A_BON_FOLDER was refused only once the policy and the PRM were loaded (or, for an ``eval
    policy`` folder with a sampling.json, counted as 0 tokens): now before torch, nothing written."""
    policy, prm = fake_models(tmp_path)
    bon = tmp_path / "bon"
    bon.mkdir()
    ids = ["other-1"] if kind == "other-problems" else [f"test-{i:04d}" for i in range(3)]
    rows = [{"id": i, "response": "Answer: 3"} if kind != "other-problems" else {"id": i, "samples": []} for i in ids]
    (bon / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if kind != "no-sampling-json":
        (bon / "sampling.json").write_text(json.dumps({"max_new_tokens": 48}), encoding="utf-8")
    message = {"eval-policy": "samples.jsonl:1: not a best-of-n row", "no-sampling-json": "no best-of-n run here",
               "other-problems": "none of the 3 problems searched"}[kind]  # fmt: skip
    r = fresh(*beam_args(arith_dir, policy, prm, tmp_path / "o", "--best-of-n", str(bon)))
    assert r.code == 2 and r.line.startswith("posttrain: error: --best-of-n ") and message in r.line, r.line
    assert not r.torch and not (tmp_path / "o").exists()
