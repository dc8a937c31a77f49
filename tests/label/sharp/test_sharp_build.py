"""Views and splits (label/sharp_build.py), and ``posttrain annotate`` / ``posttrain data sharp-build``."""

from __future__ import annotations

import json

from pipeline_doubles import MixedPolicy, ProgramClient
from typer.testing import CliRunner

from posttrainlab.cli import app
from posttrainlab.data.formats.sharp import join_step_span, validate_span
from posttrainlab.data.formats.step import validate_step
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.label.annotate import AnnotateConfig, run_annotate
from posttrainlab.label.generate import GenerateConfig, run_generate
from posttrainlab.label.sharp_build import build_views, contamination_warnings, held_out_problems, select


def record(pid, sample, status="tagged", source_split="train", steps=("a = 1", "b = 2"), ann=None):
    ann = list(ann if ann is not None else steps)
    return {
        "id": pid,
        "source": "s",
        "source_split": source_split,
        "sample_index": sample,
        "status": status,
        "question": f"q{pid}",
        "steps": list(steps),
        "hallucination_annotation": None if status == "failed" else ann,
        "n_spans": sum("<HAL>" in a for a in ann),
    }


def test_split_is_by_problem_and_deterministic():
    keys = [("s", str(i)) for i in range(50)]
    test = held_out_problems(keys, 0.1, seed=0)
    assert len(test) == 5 and test == held_out_problems(list(reversed(keys)), 0.1, seed=0)
    assert test != held_out_problems(keys, 0.1, seed=1)
    assert len(held_out_problems(keys[:3], 0.1, 0)) == 1 and held_out_problems(keys[:1], 0.1, 0) == set()
    assert held_out_problems(keys, 0.0, 0) == set()
    records = [record(str(i), j) for i in range(30) for j in range(4)]
    views, summary = build_views(records, test_share=0.2, seed=7)
    train_q = {r["question"] for r in views["train"]["span"]}
    test_q = {r["question"] for r in views["test"]["span"]}
    assert not train_q & test_q and len(test_q) == 6 and len(views["test"]["span"]) == 24
    assert summary["splits"]["all"]["rows"] == 120 and summary["splits"]["train"]["problems"] == 24


def test_selection_failed_rows_and_first_error_histogram():
    records = [
        record("1", 1, ann=["a = 1", "b = <HAL>2</HAL>"]),
        record("1", 0, status="clean"),
        record("2", 0, status="failed"),
        record("2", 1, ann=["<HAL>a = 1</HAL>", "b = 2"]),
        record("3", 2, status="clean"),
    ]
    assert [(r["id"], r["sample_index"]) for r in select(records, "one-per-problem")] == [
        ("1", 0),
        ("2", 0),
        ("3", 2),
    ]
    views, summary = build_views(records, test_share=0.0)
    assert summary["failed"] == 1 and summary["kept"] == 4
    assert summary["splits"]["all"]["first_error_histogram"] == {"0": 1, "1": 1}
    assert summary["splits"]["all"]["clean_share"] == 0.5
    assert [m["first_error"] for m in views["all"]["meta"]] == [1, -1, 0, -1]
    views, summary = build_views(records, selection="one-per-problem", test_share=0.0)
    # problem 2's sample 0 failed, so its lowest annotated sample (1) is kept
    assert [(m["id"], m["sample_index"]) for m in views["all"]["meta"]] == [("1", 0), ("2", 1), ("3", 2)]


def test_contamination_warning():
    assert contamination_warnings([record("1", 0)]) == []
    (warning,) = contamination_warnings([record("1", 0, source_split="test"), record("2", 0, source_split="test")])
    assert "2 rows" in warning and "'test' split of s" in warning


def test_cli_annotate_and_sharp_build_over_the_server(tmp_path, arith_dir):
    """generate (a policy with known errors) -> annotate through ``posttrain serve``'s app -> views."""
    from posttrainlab.serve.app import ServerThread, create_app
    from posttrainlab.serve.program_judge import ArithProgramJudge

    gen = tmp_path / "gen"
    run_generate(GenerateConfig(model="mixed", data=f"{arith_dir}:test", out=gen, limit=30), MixedPolicy())
    runner = CliRunner()
    with ServerThread(create_app(ArithProgramJudge(), "arith-judge")) as server:
        args = ["annotate", "--model-name", "arith-judge", "--model-url", server.url, "--data", str(gen)]
        res = runner.invoke(app, [*args, "--out", str(tmp_path / "ann"), "--num-threads", "4"])
    assert res.exit_code == 0, res.output
    assert "annotated 120 rows now" in res.output and "failed 0" in res.output
    assert "'test' split of arith-v1" in res.output  # the contamination warning
    sharp = tmp_path / "ann" / "sharp"
    summary = json.loads((sharp / "summary.json").read_text())
    assert 0.3 < summary["splits"]["all"]["clean_share"] < 0.7
    for split in ("all", "train", "test"):
        spans, steps = read_jsonl(sharp / split / "span.jsonl"), read_jsonl(sharp / split / "step.jsonl")
        assert not list(validate_span(spans)) and not list(validate_step(steps))
        assert all(reason is None for *_, reason in join_step_span(steps, spans))
    assert len(read_jsonl(sharp / "test" / "meta.jsonl")) == 12  # 3 problems x 4 samples
    res = runner.invoke(app, ["data", "sharp-build", "--annotations", str(tmp_path / "ann"), "--out",
                              str(tmp_path / "one"), "--select", "one-per-problem", "--test-share", "0.2"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(read_jsonl(tmp_path / "one" / "all" / "span.jsonl")) == 30
    # the same run file, annotated again by a noisy judge, compared with data agree
    noisy = run_annotate(
        AnnotateConfig(data=str(gen), out=tmp_path / "noisy", model_name="noisy"),
        ProgramClient(ArithProgramJudge(noise=0.3, seed=1)),
    )
    from posttrainlab.label.sharp_build import build_sharp

    build_sharp(noisy.records, tmp_path / "noisy" / "sharp", test_share=0.1)
    res = runner.invoke(
        app,
        ["data", "agree", str(sharp / "all" / "span.jsonl"), str(tmp_path / "noisy/sharp/all/span.jsonl"), "--json"],
    )
    assert res.exit_code == 0, res.output
    assert 0.2 < json.loads(res.output)["step_kappa"] < 0.95
