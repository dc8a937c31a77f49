"""``posttrain eval prm`` and ``eval best-of-n``: results not overwritten without ``--overwrite`` (best-of-n's sample
cache is no result: a folder holding only the cache is reused as before), choices in ``--help``, checks before
torch."""

from __future__ import annotations

import pytest
from fresh_cli import fresh

from cli_capture import cli


@pytest.mark.parametrize("verb, results", [("prm", "metrics.json"), ("best-of-n", "bon.json")])
def test_a_folder_holding_results_is_refused_unless_overwrite(capsys, tmp_path, verb, results):
    out = tmp_path / "eval"
    out.mkdir()
    (out / results).write_text("{}\n")
    models = ["--model", str(tmp_path / "nomodel")] if verb == "prm" else [
        "--policy", str(tmp_path / "nomodel"), "--prm", str(tmp_path / "noprm")]  # fmt: skip
    args = ["eval", verb, *models, "--data", str(tmp_path / "d.jsonl"), "--out", str(out)]
    code, _, err = cli(capsys, *args)
    assert code == 2 and err.startswith(f"posttrain: error: {out} already holds eval results ({results} from ")
    assert (out / results).read_text() == "{}\n"
    code, _, err = cli(capsys, *args, "--overwrite")
    assert code == 2 and "nomodel: no such model folder" in err  # past the results check, to the next one


def test_best_of_n_reuses_a_folder_holding_only_its_sample_cache(capsys, tmp_path):
    out = tmp_path / "bon"
    out.mkdir()
    (out / "samples.jsonl").write_text("")
    (out / "sampling.json").write_text("{}\n")
    code, _, err = cli(capsys, "eval", "best-of-n", "--policy", str(tmp_path / "nomodel"), "--prm", "p",
                       "--data", "d", "--output-dir", str(out))  # fmt: skip
    assert code == 2 and "--policy" in err and "nomodel: no such model folder" in err


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["prm", "--model", "m", "--format", "mc-value"], "'mc-value' is not one of 'step', 'span', 'math-shepherd'"),
        (
            ["best-of-n", "--policy", "p", "--prm", "q", "--vote-aggregation", "max"],
            "'max' is not one of 'min', 'last', 'product', 'mean'",
        ),
        (["prm", "--model", "{tmp}/nomodel"], "--model {tmp}/nomodel: no such model folder"),
        (["best-of-n", "--policy", "{tmp}", "--prm", "{tmp}/noprm"], "--policy {tmp}: no such model folder (no config"),
    ],
)
def test_bad_choices_and_paths_before_torch(tmp_path, args, fragment):
    args = [a.format(tmp=tmp_path) for a in args]
    r = fresh("eval", *args, "--data-file", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o"), "--threads", "1")
    assert r.code == 2 and fragment.format(tmp=tmp_path) in r.line and not r.torch
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("verb", ["prm", "best-of-n"])
def test_a_policy_folder_given_as_the_prm_is_refused_before_torch(tmp_path, verb):
    """best-of-n used to sample every problem, then refuse the PRM; now its config.json (no prm_config.json, a causal
    LM) is read first (prm.spec.check_prm_folder): one line, exit 2, no torch, nothing written."""
    policy = tmp_path / "sft"
    policy.mkdir()
    (policy / "config.json").write_text('{"architectures": ["Qwen2ForCausalLM"]}')
    (tmp_path / "d.jsonl").write_text('{"prompt": "What is 1 + 2?", "answer": 3}\n')
    flag = "--model" if verb == "prm" else "--prm"
    models = ["--model", str(policy)] if verb == "prm" else ["--policy", str(policy), "--prm", str(policy)]
    data = ["--data", str(tmp_path / "d.jsonl")]
    r = fresh("eval", verb, *models, *data, "--out", str(tmp_path / "o"), "--threads", "1")
    assert r.code == 2 and f"{flag} {policy}: not a PRM checkpoint (Qwen2ForCausalLM and no prm_config.json" in r.line
    assert not r.torch and not (tmp_path / "o").exists()
