"""``posttrain eval policy`` and ``eval judge`` on the command line: results not overwritten without ``--overwrite``,
checks before torch, the shared names (``--out``/``--output-dir``, ``--data``/``--data-file``)."""

from __future__ import annotations

import json

import pytest
from fresh_cli import fresh

from cli_capture import cli


def _holding_results(folder):
    folder.mkdir()
    (folder / "metrics.json").write_text('{"earlier": true}\n')
    return folder


def test_eval_policy_refuses_a_folder_holding_results(capsys, tmp_path):
    out = _holding_results(tmp_path / "eval")
    code, _, err = cli(capsys, "eval", "policy", "--model", "m", "--data", "d", "--out", str(out))
    assert code == 2 and err.startswith(f"posttrain: error: {out} already holds eval results (metrics.json from ")
    assert err.strip().endswith("pass --overwrite to replace them, or choose another --out")
    assert json.loads((out / "metrics.json").read_text()) == {"earlier": True}
    code, _, err = cli(capsys, "eval", "policy", "--model", "m", "--data", str(tmp_path / "d"), "--out", str(out),
                       "--overwrite")  # fmt: skip
    assert code == 2 and "d: no such file or folder" in err  # past the results check, to the next one


def test_eval_policy_overwrite_replaces_the_results(capsys, arith_dir, tiny_model, tmp_path):
    """A real (tiny, untrained) run: the second run is refused, the third with --overwrite replaces metrics.json."""
    args = ["eval", "policy", "--model", str(tiny_model), "--data-file", f"{arith_dir}:dev", "--output-dir",
            str(tmp_path / "e"), "--limit", "2", "--max-new-tokens", "2", "--preference-split", "none",
            "--no-progress"]  # fmt: skip
    assert cli(capsys, *args)[0] == 0
    metrics = tmp_path / "e" / "metrics.json"
    metrics.write_text('{"edited": true}\n')
    assert cli(capsys, *args)[0] == 2
    assert json.loads(metrics.read_text()) == {"edited": True}
    code, _, err = cli(capsys, *args, "--overwrite")
    assert code == 0, err
    assert json.loads(metrics.read_text())["n"] == 2


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--model", "m", "--dtype", "f8"], "Invalid value for '--dtype': 'f8' is not one of 'float32', 'bfloat16'"),
        (["--model", "{tmp}/nomodel"], "--model {tmp}/nomodel: no such model folder"),
        (["--model", "{tmp}/nomodel", "--split", "tset"], "unknown split 'tset'"),  # the data first, as before
    ],
)
def test_eval_policy_checks_before_torch(arith_dir, tmp_path, extra, fragment):
    args = [a.format(tmp=tmp_path) for a in extra]
    r = fresh("eval", "policy", "--data", str(arith_dir), "--out", str(tmp_path / "o"), "--threads", "1", *args)
    assert r.code == 2 and fragment.format(tmp=tmp_path) in r.line and not r.torch


def test_eval_judge_takes_the_shared_names(capsys, tmp_path):
    code, _, err = cli(capsys, "eval", "judge", "--data", str(tmp_path / "rows.jsonl"), "--model-name", "m",
                       "--out", str(tmp_path / "o"), "--concurrency", "2")  # fmt: skip
    assert code == 2 and "rows.jsonl: no such file" in err  # parsed: refused at the data


def test_eval_judge_lists_on_invalid_choices(capsys, tmp_path):
    code, _, err = cli(capsys, "eval", "judge", "--data-file", "x.jsonl", "--model-name", "m", "--on-invalid", "skip")
    assert code == 2 and "'skip' is not one of 'abort', 'record'" in err
