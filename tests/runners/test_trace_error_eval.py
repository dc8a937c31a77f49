"""Trace error through ``eval policy`` (metrics.json, samples.jsonl), ``eval compare`` and the report's section.

``ProgramBackend`` answers arith-v1 problems with responses of known trace (tests/arith_traces.py), decided by the
problem's position i in the request: greedy, i % 4 == 0 the right answer through a wrong step (``wstep``), i % 4 ==
1 a wrong answer, else the reference solution; each of the K = 3 samples ``clean``, ``wstep``, ``wrong``. On 8
problems: greedy 6 right answers, 2 through a wrong step (i = 0, 4): 2/6; sampled, pooled: 16 right samples, 8 of
them through a wrong step: 1/2. The tiny-model run checks the keys and that every number is its rows'.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arith_traces import A_GREEDY, A_SAMPLES, B_GREEDY, B_SAMPLES, KINDS, eval_rows
from cli_capture import cli
from posttrainlab.data.arith.steps import first_error, parse_question, split_steps
from posttrainlab.eval.intervals import wilson_interval
from posttrainlab.report import load_run
from posttrainlab.report.trace_error import section
from posttrainlab.runners.policy import evaluate_policy
from posttrainlab.runners.settings import PolicyEvalSettings


class ProgramBackend:
    name = "program"

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        out = []
        for i, messages in enumerate(prompts):
            p = parse_question(messages[-1]["content"])
            if n == 1 and temperature == 0:
                kind = "wstep" if i % 4 == 0 else "wrong" if i % 4 == 1 else "clean"
                out.append([KINDS[kind](p)])
            else:
                out.append([KINDS[k](p) for k in ("clean", "wstep", "wrong")][:n])
        return out


def rows_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def test_eval_policy_writes_trace_error_by_hand(arith_dir, tmp_path):
    out = tmp_path / "eval"
    settings = PolicyEvalSettings(limit=8, samples=3, preference_split=None)
    metrics = evaluate_policy("program", f"{arith_dir}:test", out, settings, backend=ProgramBackend(), progress=False)
    assert json.loads((out / "metrics.json").read_text()) == metrics
    t = metrics["trace_error"]
    assert (t["value"], t["trace_error_count"], t["right_answers"]) == (2 / 6, 2, 6)
    assert t["ci95"] == list(wilson_interval(2, 6))
    assert sum(c["right_answers"] for c in t["per_category"].values()) == 6
    assert list(t["per_category"]) == list(metrics["per_category"])
    s = metrics["sampled"]["trace_error"]
    assert (s["value"], s["trace_error_count"], s["right_answers"], s["samples"]) == (0.5, 8, 16, 24)
    assert "ci95" not in s and s["pooled"] == "over all K samples of every problem"
    rows = rows_of(out)
    assert [r["wrong_step"] for r in rows] == [True, True, False, False] * 2
    assert [r["correct"] for r in rows] == [True, False, True, True] * 2
    assert all([x["wrong_step"] for x in r["samples"]] == [False, True, True] for r in rows)
    assert all(r["n_trace_errors"] == 1 for r in rows)


def test_eval_policy_on_other_data_writes_no_trace_error(tmp_path):
    """Prompts that are no arith-v1 problem have no exact step labels: no key, no row field."""

    class Fixed:
        name = "fixed"

        def generate(self, prompts, *, n=1, **_):
            return [["Answer: 5"] * n for _ in prompts]

    data = tmp_path / "other.jsonl"
    data.write_text(json.dumps({"id": "q", "prompt": "How many legs has a dog?", "answer": 4}) + "\n")
    metrics = evaluate_policy("fixed", str(data), tmp_path / "e", PolicyEvalSettings(samples=2, preference_split=None),
                              backend=Fixed(), progress=False)  # fmt: skip
    assert "trace_error" not in metrics and "trace_error" not in metrics["sampled"]
    assert "wrong_step" not in rows_of(tmp_path / "e")[0]


def test_tiny_model_run_writes_the_keys(arith_dir, tiny_policy, tmp_path):
    """A real (untrained) policy: the keys are there and every count is the one its rows give, by first_error."""
    out = tmp_path / "eval"
    settings = PolicyEvalSettings(limit=6, samples=2, max_new_tokens=10, batch_size=6, preference_split=None)
    metrics = evaluate_policy(tiny_policy, f"{arith_dir}:test", out, settings, progress=False)
    rows = rows_of(out)
    assert set(metrics["trace_error"]) == {"value", "ci95", "trace_error_count", "right_answers", "per_category"}
    assert set(metrics["sampled"]["trace_error"]) == {"value", "trace_error_count", "right_answers", "per_category",
                                                      "pooled", "samples"}  # fmt: skip

    def bad(row: dict, response: str) -> bool:
        steps = split_steps(response)
        return not steps or first_error(parse_question(row["prompt"]), steps) != -1

    assert all(isinstance(r["wrong_step"], bool) and r["wrong_step"] == bad(r, r["response"]) for r in rows)
    right = [r for r in rows if r["correct"]]
    t = metrics["trace_error"]
    assert (t["right_answers"], t["trace_error_count"]) == (len(right), sum(r["wrong_step"] for r in right))
    assert t["value"] == (t["trace_error_count"] / len(right) if right else None)
    samples = [(r, s) for r in rows for s in r["samples"]]
    assert all(s["wrong_step"] == bad(r, s["response"]) for r, s in samples)
    s = metrics["sampled"]["trace_error"]
    assert s["samples"] == 12 and s["right_answers"] == sum(x["correct"] for _, x in samples)


@pytest.fixture
def run_folder(tmp_path) -> Path:
    """A run folder made before trace error existed: eval/{base,sft,grpo,grpo-s1}, rows without wrong_step and
    metrics.json without trace_error; eval/other holds another dataset's rows. SFT is tests/arith_traces.py's A,
    GRPO its B (tests/eval/test_trace_error.py works their numbers out)."""
    root = tmp_path / "run"
    for name, rows in (("base", eval_rows(["wrong"] * 6)), ("sft", eval_rows(A_GREEDY, A_SAMPLES)),
                       ("grpo", eval_rows(B_GREEDY, B_SAMPLES)), ("grpo-s1", eval_rows(B_GREEDY))):  # fmt: skip
        folder = root / "eval" / name
        folder.mkdir(parents=True)
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        correct = sum(r["correct"] for r in rows)
        (folder / "metrics.json").write_text(json.dumps({"n": 6, "accuracy": {"value": correct / 6, "n": 6}}))
    other = root / "eval" / "other"
    other.mkdir()
    (other / "samples.jsonl").write_text(json.dumps({"id": "q", "prompt": "Dogs?", "response": "4", "correct": 1}))
    return root


def test_report_section_on_an_old_run_folder(run_folder):
    assert "trace_error" not in load_run(run_folder).metrics["sft"]  # the old metrics still load
    md = section(run_folder)
    lines = md.splitlines()
    assert lines[0] == "## Trace error"
    table = {line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ") for line in lines if "|" in line}
    assert list(table)[2:] == ["base", "SFT", "GRPO"]  # header, rule, then the methods; no seed, no other dataset
    assert table["base"][1:] == ["– (0/0)"] + ["–"] * 7  # no right answer, no samples, not paired
    assert table["SFT"][1].startswith("60.0% [") and table["SFT"][1].endswith("(3/5)")
    assert table["SFT"][5] == "22.2% (2/9)"
    grpo = table["GRPO"]
    assert grpo[1].startswith("16.7% [") and grpo[1].endswith("(1/6)")
    assert grpo[2].startswith("-40.0 [") and grpo[3:5] == ["5", "0.625"]
    assert grpo[5] == "27.3% (3/11)" and grpo[6].startswith("-10.0 [") and grpo[7] == "5"
    assert float(grpo[8]) == pytest.approx(0.778, abs=0.001)  # tests/eval/test_trace_error.py's closed form


def test_report_section_without_arith_folders(tmp_path):
    assert section(tmp_path) == ""


def test_eval_compare_prints_and_writes_trace_error(capsys, run_folder, tmp_path):
    a, b = run_folder / "eval" / "sft", run_folder / "eval" / "grpo"
    code, out, err = cli(capsys, "eval", "compare", str(a), str(b), "--out", str(tmp_path / "cmp"))
    assert code == 0, err
    text = " ".join(out.split())
    assert "trace error B − A = -40.0 points [" in text
    assert "p = 0.625: not significant at 0.05 (A 60.0%, B 20.0% with a wrong step among the 5 problems" in text
    assert "sampled trace error B − A = -10.0 [" in text and "over the 5 problems both sample a right answer" in text
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert saved["trace_error"]["greedy"]["overall"]["mcnemar_p"] == 0.625
    assert saved["trace_error"]["sampled"]["pooled_b"] == 3 / 11
