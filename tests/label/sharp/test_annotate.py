"""The annotation runner (label/annotate.py): statuses, retries, resume without duplicates, threads, server."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from pipeline_doubles import ProgramClient, StubClient

from posttrainlab.data.jsonl import read_jsonl, write_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.label.annotate import AnnotateConfig, load_solutions, run_annotate
from posttrainlab.label.sharp_build import build_sharp
from posttrainlab.runners.judge_client import EndpointError, RetryPolicy

Q = "What is 351 - 148 + 56?"
RIGHT = ["351 - 148 = 203", "203 + 56 = 259", "Answer: 259"]
WRONG = ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"]
FAST = RetryPolicy(backoff_s=0.0, backoff_max_s=0.0)


def gen_rows(n: int = 6) -> list[dict]:
    """Two samples per problem ``a - 148 + 56``: sample 0 right, sample 1 off by one from step 1 on."""
    rows = []
    for i in range(n):
        a, wrong = 351 + i // 2, i % 2
        r1, r2 = a - 148, a - 148 + 56 + wrong
        steps = [f"{a} - 148 = {r1}", f"{r1} + 56 = {r2}", f"Answer: {r2}"]
        rows.append({"id": f"p{i // 2}", "source": "arith-v1", "source_split": "test", "sample_index": wrong,
                     "question": f"What is {a} - 148 + 56?", "steps": steps})  # fmt: skip
    return rows


def write_gen(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "gen" / "generations.jsonl"
    write_jsonl(path, rows)
    return path.parent


def cfg(tmp_path: Path, data: Path, **kw) -> AnnotateConfig:
    return AnnotateConfig(data=str(data), out=tmp_path / "ann", model_name="judge", retry=FAST, **kw)


def test_statuses(tmp_path):
    rows = [
        {"id": "clean", "question": Q, "steps": RIGHT},
        {"id": "tagged", "question": Q, "steps": WRONG},
        {"id": "repaired", "question": Q, "steps": WRONG + ["extra line here"]},
        {"id": "regenerated", "question": Q, "steps": WRONG + ["second line"]},
        {"id": "failed", "question": Q, "steps": WRONG + ["third line"]},
    ]
    good = "351 - 148 = 203\n\n203 + 56 = <HAL>260</HAL>\n\nAnswer: <HAL>260</HAL>"

    def script(solution: str, attempt: int):
        if solution == "\n\n".join(RIGHT):
            return "No hallucinations"
        if solution == "\n\n".join(WRONG):
            return good
        if solution.endswith("extra line here"):
            return good.replace("\n\n", "\n", 1) + "\n\nextra line here"  # a lost blank line: repaired
        if solution.endswith("second line"):
            return "I think step 2 is wrong." if attempt == 0 else good + "\n\nsecond line"
        return "203 + 56 = <HAL>259</HAL>"  # never reproduces the solution

    run = run_annotate(cfg(tmp_path, write_gen(tmp_path, rows), max_attempts=3), StubClient(script))
    by_id = {r["id"]: r for r in run.records}
    assert {k: r["status"] for k, r in by_id.items()} == {k: k for k in by_id}
    assert by_id["failed"]["spans"] is None and by_id["failed"]["attempts"] == 3
    assert len(by_id["failed"]["rejected"]) == 3
    assert by_id["regenerated"]["attempts"] == 2 and by_id["regenerated"]["rejected"][0]["reason"]
    assert by_id["repaired"]["repair"]["ratio"] >= 0.95
    assert by_id["tagged"]["hallucination_annotation"] == [
        "351 - 148 = 203",
        "203 + 56 = <HAL>260</HAL>",
        "Answer: <HAL>260</HAL>",
    ]
    summary = build_sharp(run.records, tmp_path / "sharp", test_share=0.0)
    assert summary["failed"] == 1 and summary["kept"] == 4  # the failed row is never written
    spans = read_jsonl(tmp_path / "sharp" / "all" / "span.jsonl")
    assert [r["model_answer"][-1] for r in spans] == ["Answer: 259", "Answer: 260", "extra line here", "second line"]


def test_http_faults_are_retried_then_stop_the_run_keeping_finished_rows(tmp_path):
    rows = gen_rows(4)
    data = write_gen(tmp_path, rows)
    flaky = {"\n\n".join(rows[1]["steps"])}

    def script(solution: str, attempt: int):
        if solution in flaky and attempt < 2:
            return EndpointError("HTTP 503", transient=True)
        return "No hallucinations"

    client = StubClient(script)
    run = run_annotate(cfg(tmp_path, data), client)
    assert [r["status"] for r in run.records] == ["clean"] * 4
    assert run.records[1]["http_retries"] == 2 and run.records[1]["attempts"] == 1

    # the other rows are answered before row 1 gives up: which queued rows a stopping run had started is otherwise a
    # race between the pool's threads and its shutdown (it failed once in a fresh-clone suite: rows [0, 2] kept)
    answered, others_done = [], threading.Event()

    def down(solution: str, attempt: int):
        if solution in flaky:
            others_done.wait(timeout=30)
            return EndpointError("cannot connect", transient=True)
        answered.append(solution)
        if len(answered) == 3:
            others_done.set()
        return "No hallucinations"

    with pytest.raises(EndpointError, match="row 1: cannot connect"):
        run_annotate(cfg(tmp_path / "b", data), StubClient(down))
    kept = read_jsonl(tmp_path / "b" / "ann" / "annotations.jsonl")
    assert sorted(r["index"] for r in kept) == [0, 2, 3]


def test_resume_skips_finished_rows_and_never_duplicates(tmp_path):
    rows = gen_rows(6)
    data = write_gen(tmp_path, rows)
    seen = []

    def stop_after_two(record):
        seen.append(record["index"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_annotate(cfg(tmp_path, data, num_threads=1), ProgramClient(), on_record=stop_after_two)
    run_file = tmp_path / "ann" / "annotations.jsonl"
    with open(run_file, "a", encoding="utf-8") as f:
        f.write('{"index": 5, "key": "cut by a ki')  # a line cut by a kill
    client = ProgramClient()
    run = run_annotate(cfg(tmp_path, data, num_threads=3), client)
    assert run.resumed == 2 and run.annotated == 4 and client.calls == 4
    indices = [r["index"] for r in read_jsonl(run_file)]
    assert sorted(indices) == list(range(6))
    again = run_annotate(cfg(tmp_path, data), ProgramClient())
    assert again.annotated == 0 and [r["index"] for r in again.records] == list(range(6))


def test_resume_refuses_other_data_or_another_judge(tmp_path):
    rows = gen_rows(2)
    data = write_gen(tmp_path, rows)
    run_annotate(cfg(tmp_path, data), ProgramClient())
    with pytest.raises(BadInput, match="made by model 'judge'"):
        run_annotate(AnnotateConfig(data=str(data), out=tmp_path / "ann", model_name="other"), ProgramClient())
    rows[1]["steps"] = ["351 - 148 = 204"]
    write_gen(tmp_path, rows)
    with pytest.raises(BadInput, match="row 1 does not match the data"):
        run_annotate(cfg(tmp_path, data), ProgramClient())


def test_retry_failed_asks_again_without_duplicating(tmp_path):
    data = write_gen(tmp_path, gen_rows(2))
    run_annotate(cfg(tmp_path, data, max_attempts=1), StubClient(lambda s, k: "garbage"))
    run = run_annotate(cfg(tmp_path, data), ProgramClient())
    assert [r["status"] for r in run.records] == ["failed", "failed"]  # kept as failed unless asked
    run = run_annotate(cfg(tmp_path, data, retry_failed=True), ProgramClient())
    assert [r["status"] for r in run.records] == ["clean", "tagged"]
    assert len(read_jsonl(tmp_path / "ann" / "annotations.jsonl")) == 2


def test_threads_do_not_change_the_records(tmp_path, mixed_policy, arith_dir):
    from posttrainlab.label.generate import generation_row, load_problems

    problems = load_problems(f"{arith_dir}:test", limit=20)
    texts = mixed_policy.generate([[{"role": "user", "content": p["question"]}] for p in problems], n=3)
    rows = [generation_row(p, j, t, "auto") for p, ts in zip(problems, texts, strict=True) for j, t in enumerate(ts)]
    data = write_gen(tmp_path, rows)
    outs = []
    for threads in (1, 6):
        run = run_annotate(
            AnnotateConfig(data=str(data), out=tmp_path / f"t{threads}", model_name="j", num_threads=threads),
            ProgramClient(),
        )
        outs.append([json.dumps(r) for r in run.records])
    assert outs[0] == outs[1]
    assert {json.loads(r)["status"] for r in outs[0]} == {"clean", "tagged"}


def test_empty_solutions_are_skipped_and_bad_rows_refused(tmp_path):
    rows = gen_rows(2) + [{"id": "e", "question": Q, "steps": []}]
    loaded, skipped = load_solutions(write_gen(tmp_path, rows))
    assert len(loaded) == 2 and skipped == 1
    write_jsonl(tmp_path / "bad.jsonl", [{"question": Q}])
    with pytest.raises(BadInput, match="row 0: no 'steps'"):
        load_solutions(tmp_path / "bad.jsonl")


def test_through_the_server(tmp_path):
    """``posttrain serve --judge arith``'s app in a thread, and the real openai client."""
    pytest.importorskip("fastapi")
    from posttrainlab.serve.app import ServerThread, create_app
    from posttrainlab.serve.program_judge import ArithProgramJudge

    data = write_gen(tmp_path, gen_rows(6))
    with ServerThread(create_app(ArithProgramJudge(), "arith-judge")) as server:
        config = AnnotateConfig(data=str(data), out=tmp_path / "ann", model_name="arith-judge", model_url=server.url)
        run = run_annotate(config)
    assert [r["status"] for r in run.records] == ["clean", "tagged"] * 3
    assert run.records[1]["hallucination_annotation"][1] == "203 + 56 = <HAL>260</HAL>"


def test_a_span_view_file_can_be_annotated_again(tmp_path):
    span = [{"question": Q, "model_answer": RIGHT, "hallucination_annotation": ["No hallucinations"]}]
    write_jsonl(tmp_path / "span.jsonl", span)
    (row,), skipped = load_solutions(tmp_path / "span.jsonl")
    assert row["steps"] == RIGHT and row["id"] == "row-0" and skipped == 0
    run = run_annotate(
        AnnotateConfig(data=str(tmp_path / "span.jsonl"), out=tmp_path / "a", model_name="j"), ProgramClient()
    )
    assert run.records[0]["status"] == "clean"


def test_cli_refuses_bad_flags_in_one_line(tmp_path, capsys):
    from posttrainlab.cli import main

    for args in (
        ["annotate", "--model-name", "j", "--data", str(tmp_path), "--out", str(tmp_path / "o"), "--select", "best"],
        ["data", "sharp-build", "--annotations", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o")],
        ["annotate", "--model-name", "j", "--data", str(tmp_path), "--out", str(tmp_path / "o")],
    ):
        with pytest.raises(SystemExit) as e:
            main(args)
        assert e.value.code == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("posttrain: error:") and "\n" not in err, err
