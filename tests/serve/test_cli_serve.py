"""``posttrain serve`` as a command: flag errors, and the judge harness run end to end against it.

The verb runs in-process in a thread (its ``run_server`` swapped for one the test can stop), so the
test pays for importing torch once; everything before uvicorn (flag checks, binding, loading the model
from its folder, printing the URL) is the real code.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from cli_capture import cli
from posttrainlab.cli import main

MS_SMALL = Path(__file__).resolve().parents[1] / "assets" / "judge" / "ms_small.jsonl"


@contextmanager
def serving(monkeypatch, *args: str):
    """``posttrain serve ARGS --port 0`` in a background thread; yields ``(url, app)`` once it listens."""
    import uvicorn

    from posttrainlab.serve import app as serve_app
    from posttrainlab.serve.server import uvicorn_config

    state: dict = {}

    def run_server(app, sock, **_):
        state["app"], state["url"] = app, serve_app.url_of(sock)
        state["server"] = uvicorn.Server(uvicorn_config(app, log_level="warning", access_log=False))
        state["server"].run(sockets=[sock])

    def target():
        try:
            main(["serve", *args, "--port", "0"])
        except SystemExit as e:
            state["exit"] = e.code
        except BaseException as e:  # surfaced below
            state["exit"] = e

    monkeypatch.setattr(serve_app, "run_server", run_server)
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not (state.get("server") and state["server"].started):
        assert thread.is_alive() and time.monotonic() < deadline, f"server did not start: {state.get('exit')}"
        time.sleep(0.02)
    try:
        yield state["url"], state["app"]
    finally:
        state["server"].should_exit = True
        thread.join(30)
    assert state.get("exit") in (0, None), state.get("exit")


def test_judge_harness_against_posttrain_serve_then_recompute(tmp_path, tiny_dir, monkeypatch, capsys):
    """An untrained model answers no valid JSON: with --on-invalid record the run still finishes."""
    with serving(monkeypatch, "--model", str(tiny_dir), "--served-model-name", "tiny", "--threads", "1") as (url, app):
        assert f"serving 'tiny' at {url}" in capsys.readouterr().out
        code, out, err = cli(
            capsys, "eval", "judge", "--data-file", str(MS_SMALL), "--model-name", "tiny", "--model-url", url,
            "--on-invalid", "record", "--max-tokens", "8", "--num-threads", "8", "--output-dir", str(tmp_path),
        )  # fmt: skip
        batcher = app.state.batcher
    assert code == 0, err
    assert "test_data_size 0, failed rows 8" in " ".join(out.split())
    run = tmp_path / "ms_small__tiny.jsonl"
    records = [json.loads(line) for line in run.read_text().splitlines()]
    assert len(records) == 8 and all(r["failed"] and r["attempts"] == 4 for r in records)
    assert all(len(r["rejected"]) == 4 and r["rejected"][0]["reason"] for r in records)
    metric = json.loads((tmp_path / "ms_small__tiny_metric.json").read_text())
    assert metric["failed_rows"] == 8 and metric["model_url"] == url
    # 8 rows x 4 answers = 32 requests from 8 threads; the server batched them into fewer generate calls
    assert batcher.prompts == 32 and batcher.calls < 32
    code, out, err = cli(capsys, "eval", "judge", "--filepath", str(run))
    assert code == 0, err
    assert (tmp_path / "ms_small__tiny_recomputed_metric.json").is_file()


def test_program_judge_is_served_under_its_name(monkeypatch, capsys):
    with serving(monkeypatch, "--judge", "arith", "--judge-noise", "0.2") as (url, _app):
        client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["arith-judge"]
        reply = client.chat.completions.create(model="arith-judge", messages=[{"role": "user", "content": "hi"}])
        assert isinstance(reply.choices[0].message.content, str)


def test_missing_program_judge_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "posttrainlab.serve.program_judge", None)  # import fails
    code, _, err = cli(capsys, "serve", "--judge", "arith", "--port", "0")
    assert code == 1 and "--judge arith: the program judge cannot be loaded" in err
    assert len(err.strip().splitlines()) == 1


def test_busy_port_is_one_line_exit_2(tiny_dir, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli(capsys, "serve", "--model", str(tiny_dir), "--port", str(port))
    assert code == 2 and f"127.0.0.1:{port}: cannot listen there" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--model", "/no/such/model"], "/no/such/model: no such model folder"),
        ([], "give --model DIR to serve a model, or --judge arith"),
        (["--model", "m", "--judge", "arith"], "not both"),
        (["--judge", "llm"], "--judge 'llm': choose one of arith"),
        (["--judge", "arith", "--judge-noise", "1.5"], "--judge-noise 1.5: must be in [0, 1]"),
        (["--model", "m", "--judge-noise", "0.1"], "--judge-noise applies to --judge only"),
        (["--model", "m", "--max-batch-size", "0"], "--max-batch-size 0"),
        (["--model", "m", "--batch-wait-ms", "-1"], "--batch-wait-ms -1"),
        (["--model", "m", "--port", "70000"], "--port 70000"),
    ],
)
def test_bad_usage_is_one_line_exit_2(capsys, args, fragment):
    code, _, err = cli(capsys, "serve", *args)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
