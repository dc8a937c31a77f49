"""The judge harness against a scripted OpenAI-compatible endpoint on loopback (``fake_openai``).

Covers the card's protocol (retries at temperature 0 then 0.4, abort on an answer that stays invalid),
endpoint faults (HTTP 500, 404, timeouts), resuming after a stop or a kill with no record lost or
doubled, 1 vs 32 threads, offline recompute, and judge-summary. The metric functions themselves are
tested in ``test_metrics_span.py``; here one hand-computed set of records checks the metric file layout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, Reply, by_problem, scripted

from cli_capture import cli
from posttrainlab.errors import BadInput
from posttrainlab.eval.judge_metrics import REQUIRED_FIELDS, judge_metrics, mean_std
from posttrainlab.runners import judge as judge_mod
from posttrainlab.runners.judge import (
    JudgeAborted,
    data_info,
    load_math_shepherd,
    recompute,
    run_judge,
    run_name,
)
from posttrainlab.runners.judge_client import (
    Completion,
    EndpointError,
    InvalidAnswer,
    OpenAIChatClient,
    RetryPolicy,
    ask_judge,
    build_messages,
    parse_hallucination_list,
)
from posttrainlab.runners.settings import JudgeSettings

DATA = Path(__file__).resolve().parents[1] / "assets" / "judge" / "ms_small.jsonl"
ROWS = load_math_shepherd(str(DATA))
PROBLEMS = [r["prompt"] for r in ROWS]
FAST = RetryPolicy(backoff_s=0.001, backoff_max_s=0.005)

# A judge that is right on some rows, raises a false alarm on a correct one (row 3), flags a correct
# step before the wrong one (row 5: the two span rules differ), copies with other spacing (row 7) and
# lists one span that is nowhere in the text (row 7).
ORACLE = {
    PROBLEMS[0]: [],
    PROBLEMS[1]: ["2 * 7 = 12."],
    PROBLEMS[2]: ["10 + 4 = 14 pens"],
    PROBLEMS[3]: ["5 * 6 = 30"],
    PROBLEMS[4]: ["The answer is: 15"],
    PROBLEMS[5]: ["Step 1: A third of 12 is 12 / 3 = 3."],
    PROBLEMS[6]: [],
    PROBLEMS[7]: ["60*3=160", "the train teleports"],
}


def oracle(delays: dict[int, float] | None = None, extra: dict[int, list[Reply]] | None = None):
    """Per-problem scripts: optional replies first (``extra``), then the oracle's answer."""
    delays, extra = delays or {}, extra or {}
    return by_problem(
        {p: [*extra.get(i, []), Reply.answer(ORACLE[p], delay=delays.get(i, 0.0))] for i, p in enumerate(PROBLEMS)}
    )


def config(tmp_path: Path, url: str, **kw) -> JudgeSettings:
    base = JudgeSettings(
        data_file=str(DATA), model_name="fake/judge", model_url=url, output_dir=tmp_path, num_threads=4, retry=FAST
    )
    return replace(base, **kw)


def judge(tmp_path: Path, responder, **kw):
    with FakeOpenAI(responder) as fake:
        cfg = config(tmp_path, fake.url, **kw)
        return run_judge(cfg), fake


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---- parsing the answer -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, spans",
    [
        ('{"hallucination list": ["2 * 7 = 12"]}', ["2 * 7 = 12"]),
        ('{"hallucination list": []}', []),
        ('The error is here.\n{"hallucination list": ["a = 3"]}\nHope this helps!', ["a = 3"]),
        ('```json\n{\n  "hallucination list": ["x"]\n}\n```', ["x"]),
        ('<think>maybe {"hallucination list": ["draft"]}</think>{"hallucination list": ["final"]}', ["final"]),
        ('Draft: {"hallucination list": ["a"]} Final: {"hallucination list": ["b"]}', ["b"]),
        ('Since \\frac{1}{2} is wrong: {"hallucination list": ["\\\\frac{1}{2}"]}', ["\\frac{1}{2}"]),
        ('{"answer": {"x": 1}, "hallucination list": ["y"]}', ["y"]),
    ],
)
def test_parse_accepts_json_inside_prose_and_fences(text, spans):
    assert parse_hallucination_list(text) == spans


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty answer"),
        ("   \n", "empty answer"),
        (None, "empty answer"),
        ("The solution is correct.", "no JSON object"),
        ('{"hallucination_list": []}', 'no "hallucination list" key (found keys: hallucination_list)'),
        ('{"Hallucination List": ["a"]}', 'no "hallucination list" key'),
        ('["a", "b"]', "no JSON object"),
        ('{"hallucination list": "2 * 7 = 12"}', "not a list of strings"),
        ('{"hallucination list": [12]}', "not a list of strings"),
        ('{"hallucination list": ["a", ', "no JSON object"),
    ],
)
def test_parse_rejects_what_is_not_a_list_under_the_right_key(text, reason):
    with pytest.raises(InvalidAnswer, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_hallucination_list(text)


def test_prompt_joins_steps_with_one_newline():
    (message,) = build_messages(ROWS[1]["prompt"], ROWS[1]["completions"])
    assert message["role"] == "user"
    assert "Problem:\nWhat is 2 * (3 + 4)?\n" in message["content"]
    assert message["content"].endswith("Solution:\n" + "\n".join(ROWS[1]["completions"]))
    assert '{"hallucination list": [' in message["content"]


# ---- retries (in memory, then over HTTP) ------------------------------------------------------------


class ListClient:
    """A ChatClient answering from a list; records the temperatures it was asked with."""

    def __init__(self, replies):
        self.replies, self.temperatures = list(replies), []

    def __call__(self, messages, *, temperature, max_tokens):
        self.temperatures.append(temperature)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def test_invalid_answers_are_retried_three_times_at_0_4_then_reported():
    client = ListClient([Completion("no json"), Completion('{"x": 1}'), Completion(""), Completion("nope", "length")])
    answer = ask_judge(client, [], max_tokens=10, policy=FAST)
    assert client.temperatures == [0.0, 0.4, 0.4, 0.4]
    assert answer.hallucination_list is None and answer.response is None and answer.attempts == 4
    assert [r["reason"] for r in answer.rejected] == [
        "no JSON object in the answer",
        'no "hallucination list" key (found keys: x)',
        "empty answer",
        "no JSON object in the answer (cut at --max-tokens)",
    ]
    assert answer.error == "no valid answer in 4 attempts (last: no JSON object in the answer (cut at --max-tokens))"


def test_endpoint_faults_are_retried_at_the_same_temperature_with_backoff():
    waits = []
    transient = EndpointError("HTTP 500", transient=True)
    client = ListClient(
        [transient, transient, Completion("prose"), transient, Completion('{"hallucination list": []}')]
    )
    answer = ask_judge(client, [], max_tokens=10, policy=RetryPolicy(backoff_s=1.0), sleep=waits.append)
    assert client.temperatures == [0.0, 0.0, 0.0, 0.4, 0.4]
    assert answer.hallucination_list == [] and answer.attempts == 2 and answer.http_retries == 3
    assert 0.5 <= waits[0] <= 1.0 and 1.0 <= waits[1] <= 2.0  # backoff 1 s, 2 s, times 0.5-1


def test_endpoint_fault_that_persists_or_is_permanent_raises():
    client = ListClient([EndpointError("HTTP 503", transient=True)] * 3)
    with pytest.raises(EndpointError, match=r"HTTP 503 \(after 3 tries\)"):
        ask_judge(client, [], max_tokens=10, policy=replace(FAST, http_retries=2))
    client = ListClient([EndpointError("HTTP 400: context too long")])
    with pytest.raises(EndpointError, match="context too long$"):
        ask_judge(client, [], max_tokens=10, policy=FAST)
    assert len(client.temperatures) == 1


def test_misbehaving_endpoint_prose_fences_wrong_keys_empty_body_then_valid(tmp_path):
    # one row; the endpoint answers badly in every way before a valid answer
    replies = [
        Reply(raw=b""),  # an empty HTTP body
        Reply.ok('{"hallucinations": ["x"]}'),  # wrong key
        Reply.ok("Step 1 looks fine to me."),  # prose, no JSON
        Reply.ok('Sure!\n```json\n{"hallucination list": []}\n```\nDone.'),  # prose around a fence: valid
    ]
    run, fake = judge(tmp_path, scripted(replies), max_samples=1, num_threads=1)
    (record,) = lines(run.jsonl)
    assert [b["temperature"] for b in fake.requests] == [0.0, 0.4, 0.4, 0.4]
    assert record["hallucination_list"] == [] and record["attempts"] == 4 and record["failed"] is False
    assert record["response"] == replies[3].content
    assert [r["reason"] for r in record["rejected"]] == [
        "HTTP 200 with an empty body",
        'no "hallucination list" key (found keys: hallucinations)',
        "no JSON object in the answer",
    ]
    assert run.metrics["smoke_run"] is True and run.metrics["test_data_size"] == 1


def test_http_500s_and_a_timeout_are_retried(tmp_path):
    replies = [Reply(status=500), Reply(status=502), Reply.answer([], delay=1.5), Reply.answer([])]
    run, fake = judge(tmp_path, scripted(replies), max_samples=1, num_threads=1, timeout_s=0.3)
    (record,) = lines(run.jsonl)
    assert len(fake.requests) == 4 and record["http_retries"] == 3 and record["attempts"] == 1
    assert [b["temperature"] for b in fake.requests] == [0.0] * 4
    assert run.metrics["attempts"]["http_retries"] == 3


@pytest.mark.parametrize("on_invalid", ["abort", "record"])
def test_endpoint_that_keeps_failing_aborts_in_either_mode(tmp_path, on_invalid):
    with pytest.raises(EndpointError, match=r"HTTP 500.*after 3 tries"):
        judge(
            tmp_path, scripted([], then=Reply(status=500)), num_threads=1, on_invalid=on_invalid,
            retry=replace(FAST, http_retries=2),
        )  # fmt: skip
    assert not (tmp_path / f"{run_name('fake/judge', str(DATA))}_metric.json").exists()
    assert not (tmp_path / f"{run_name('fake/judge', str(DATA))}.jsonl").exists()  # no row was finished


def test_wrong_model_name_is_not_retried_and_says_so(tmp_path):
    with pytest.raises(EndpointError, match="HTTP 404.*served model name"):
        judge(tmp_path, scripted([], then=Reply(status=404)), num_threads=1)


def test_unreachable_endpoint_is_an_endpoint_error():
    client = OpenAIChatClient("http://127.0.0.1:9/v1", "m", timeout_s=2)
    with pytest.raises(EndpointError, match="cannot connect") as e:
        client([{"role": "user", "content": "x"}], temperature=0.0, max_tokens=5)
    assert e.value.transient


# ---- abort, record, resume --------------------------------------------------------------------------


def test_answer_still_invalid_aborts_then_the_run_resumes(tmp_path):
    bad = {3: [Reply.ok("I think step 2 is wrong.")] * 4}
    with pytest.raises(JudgeAborted, match=r"row 3: no valid answer in 4 attempts.*run the same command again"):
        judge(tmp_path, oracle(extra=bad), num_threads=1)
    name = run_name("fake/judge", str(DATA))
    kept = lines(tmp_path / f"{name}.jsonl")
    indices = [r["index"] for r in kept]
    assert 3 not in indices and {0, 1, 2} <= set(indices) and len(set(indices)) == len(indices)
    assert not (tmp_path / f"{name}_metric.json").exists()  # nothing scored on a failed run

    run, fake = judge(tmp_path, oracle(), num_threads=1)
    assert len(fake.requests) == 8 - len(kept) and run.resumed == len(kept)
    assert sorted(r["index"] for r in lines(run.jsonl)) == list(range(8))
    assert run.metrics["test_data_size"] == 8 and run.metrics["failed_rows"] == 0


def test_record_mode_counts_the_failed_row_and_retry_failed_judges_it_again(tmp_path):
    bad = {3: [Reply.ok("no JSON here")] * 4}
    run, _ = judge(tmp_path, oracle(extra=bad), on_invalid="record")
    failed = [r for r in lines(run.jsonl) if r["failed"]]
    assert len(failed) == 1 and failed[0]["index"] == 3 and failed[0]["hallucination_list"] is None
    assert failed[0]["attempts"] == 4 and "no valid answer in 4 attempts" in failed[0]["error"]
    assert run.metrics["failed_rows"] == 1 and run.metrics["failed_indices"] == [3]
    assert run.metrics["test_data_size"] == 7 and run.metrics["records"] == 8

    again, fake = judge(tmp_path, oracle())  # a plain restart keeps the failed record
    assert len(fake.requests) == 0 and again.metrics["failed_rows"] == 1
    again, fake = judge(tmp_path, oracle(), retry_failed=True)
    assert len(fake.requests) == 1 and again.metrics["failed_rows"] == 0 and again.metrics["test_data_size"] == 8
    assert sorted(r["index"] for r in lines(again.jsonl)) == list(range(8))


def test_stopped_midway_resumes_with_no_record_lost_or_doubled(tmp_path):
    full, _ = judge(tmp_path / "full", oracle())

    class Killed(Exception):
        pass

    def stop_after_3(record, seen=[]):  # noqa: B006 (a counter that lives across calls)
        seen.append(record["index"])
        if len(seen) == 3:
            raise Killed

    with FakeOpenAI(oracle(delays={i: 0.02 * (i % 3) for i in range(8)})) as fake:
        with pytest.raises(Killed):
            run_judge(config(tmp_path, fake.url), on_record=stop_after_3)
    name = run_name("fake/judge", str(DATA))
    first = [r["index"] for r in lines(tmp_path / f"{name}.jsonl")]
    assert len(first) >= 3 and len(set(first)) == len(first)

    run, fake = judge(tmp_path, oracle())
    assert len(fake.requests) == 8 - len(first)
    indices = [r["index"] for r in lines(run.jsonl)]
    assert sorted(indices) == list(range(8))
    assert run.metrics["metrics"] == full.metrics["metrics"]


def test_killed_process_resumes_and_a_cut_last_line_is_dropped(tmp_path):
    name = run_name("fake/judge", str(DATA))
    jsonl = tmp_path / f"{name}.jsonl"
    with FakeOpenAI(oracle(delays=dict.fromkeys(range(8), 0.25))) as fake:
        cmd = [sys.executable, "-m", "posttrainlab", "eval", "judge", "--data-file", str(DATA)]
        cmd += ["--model-name", "fake/judge", "--model-url", fake.url, "--output-dir", str(tmp_path)]
        proc = subprocess.Popen([*cmd, "--num-threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and (not jsonl.exists() or len(lines(jsonl)) < 2):
                time.sleep(0.02)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    before = lines(jsonl)
    assert 2 <= len(before) < 8, proc.stderr.read()
    with open(jsonl, "ab") as f:  # a write cut by the kill: a line without its newline
        f.write(b'{"index": 7, "key": "1f0')

    run, fake = judge(tmp_path, oracle())
    assert any("dropped an unfinished last line" in w for w in run.warnings)
    assert len(fake.requests) == 8 - len(before)
    assert sorted(r["index"] for r in lines(jsonl)) == list(range(8))


def test_resume_refuses_a_run_file_from_other_data(tmp_path):
    run, _ = judge(tmp_path, oracle(), max_samples=2)
    records = sorted(lines(run.jsonl), key=lambda r: r["index"])  # threads finish in any order
    records[1]["labels"] = [not x for x in records[1]["labels"]]  # now it describes another row
    records[1]["key"] = "0000000000000000"
    run.jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(BadInput, match=r"record 2: row 1 does not match"):
        judge(tmp_path, oracle())


# ---- threads, recompute, layout ---------------------------------------------------------------------


def test_32_threads_give_the_same_metrics_as_1(tmp_path):
    delays = {i: 0.04 * ((7 - i) % 4) for i in range(8)}  # finish out of data order
    extra = {2: [Reply.ok("prose first")], 5: [Reply(status=500)]}
    one, _ = judge(tmp_path / "one", oracle(delays, extra), num_threads=1)
    many, _ = judge(tmp_path / "many", oracle(delays, extra), num_threads=32)
    assert [r["index"] for r in lines(one.jsonl)] == list(range(8))
    assert [r["index"] for r in lines(many.jsonl)] != list(range(8))  # written as they finished
    for key in ("test_data_size", "failed_rows", "metrics", "attempts"):
        assert one.metrics[key] == many.metrics[key]


def test_recompute_from_only_the_required_fields_matches_the_live_run(tmp_path):
    run, _ = judge(tmp_path, oracle(), num_threads=8)
    metric_bytes = run.metric_file.read_bytes()
    bare = tmp_path / "bare" / "saved.jsonl"
    bare.parent.mkdir()
    by_index = sorted(lines(run.jsonl), key=lambda r: r["index"])
    bare.write_text("".join(json.dumps({k: r[k] for k in REQUIRED_FIELDS}) + "\n" for r in by_index))
    out, metrics = recompute(bare)
    assert out == tmp_path / "bare" / "saved_recomputed_metric.json"
    assert json.loads(out.read_text())["metrics"] == run.metrics["metrics"]
    assert metrics["test_data_size"] == run.metrics["test_data_size"] == 8
    # the run's own file, with its extra fields, recomputes to the same numbers; _metric.json is untouched
    out2, metrics2 = recompute(run.jsonl)
    assert out2.name == f"{run.jsonl.stem}_recomputed_metric.json" and metrics2["metrics"] == run.metrics["metrics"]
    assert run.metric_file.read_bytes() == metric_bytes


def test_oracle_run_layout_and_the_rules_differ_where_expected(tmp_path):
    run, _ = judge(tmp_path, oracle())
    m = run.metrics
    assert list(m)[:5] == ["test_data_size", "smoke_run", "failed_rows", "records", "metrics"]
    a = m["metrics"]["All"]
    assert a["span_level"]["rule"] == "label-aligned" and a["span_level"]["reads_gold_labels"] is True
    assert a["span_level_gold_independent"]["reads_gold_labels"] is False
    assert set(a["case_level"]) >= {"precision", "recall", "f1", "accuracy"}
    # row 5 flags its correct step 0: gold-independent predicts from there, label-aligned from step 1
    assert a["span_level_gold_independent"]["fp"] > a["span_level"]["fp"]
    assert a["unlocated_spans"] == {"count": 1, "rows": 1, "spans": [{"index": 7, "span": "the train teleports"}]}
    assert a["span_locate_methods"] == {"exact": 5, "whitespace": 1}
    assert m["data"]["sha256"] and m["data"]["card_check"].startswith("not applicable")
    assert m["smoke_run"] is False and m["settings"]["max_tokens"] == 8000
    on_disk = json.loads(run.metric_file.read_text())
    assert on_disk == m


def test_judge_metrics_by_hand():
    """Three scored rows and a failed one.

    A "a=1\\nb=2\\nc=3" (starts 0, 4, 8), labels T F T: gold [4, 8) = 4 chars; span "a=1" at 0.
      label-aligned: 0 precedes the wrong step, so it moves forward to 4: pred [4, 11) -> tp 4, fp 3.
      gold-independent: step 0 -> pred [0, 11) -> tp 4, fp 7.
    B "x=5", labels T, no span: nothing predicted, no gold.
    C "p=1\\nq=2", labels F F: gold 4 + 3 = 7 chars; span "zzz" unlocated -> fn 7, still flagged.
    D failed (null list): left out, counted.
    label-aligned: tp 4, fp 3, fn 7 -> P 4/7, R 4/11, F1 8/18. gold-independent: P = R = F1 = 4/11.
    Case: A and C flawed and flagged, B neither -> all 1.0. First error: gold (1, -1, 0), predicted
    (0, -1, -1) -> accuracy on erroneous 0, on correct 1 -> F1 0.
    """
    records = [
        {
            "index": 0,
            "completions": ["a=1", "b=2", "c=3"],
            "labels": [True, False, True],
            "hallucination_list": ["a=1"],
        },
        {"index": 1, "completions": ["x=5"], "labels": [True], "hallucination_list": []},
        {"index": 2, "completions": ["p=1", "q=2"], "labels": [False, False], "hallucination_list": ["zzz"]},
        {"index": 3, "completions": ["r=1"], "labels": [False], "hallucination_list": None},
    ]
    m = judge_metrics(records)
    a = m["metrics"]["All"]
    assert (m["test_data_size"], m["records"], m["failed_rows"], m["failed_indices"]) == (3, 4, 1, [3])
    la, gi = a["span_level"], a["span_level_gold_independent"]
    assert (la["tp"], la["fp"], la["fn"]) == (4, 3, 7)
    assert la["precision"] == pytest.approx(4 / 7) and la["recall"] == pytest.approx(4 / 11)
    assert la["f1"] == pytest.approx(8 / 18)
    assert (gi["tp"], gi["fp"], gi["fn"]) == (4, 7, 7) and gi["f1"] == pytest.approx(4 / 11)
    assert {k: a["case_level"][k] for k in ("precision", "recall", "f1", "accuracy")} == dict.fromkeys(
        ("precision", "recall", "f1", "accuracy"), 1.0
    )
    fe = a["first_error"]
    assert (fe["accuracy_erroneous"], fe["accuracy_correct"], fe["f1"]) == (0.0, 1.0, 0.0)
    assert a["unlocated_spans"]["spans"] == [{"index": 2, "span": "zzz"}]


def test_card_checksum_is_checked_on_a_614_row_file(tmp_path, monkeypatch):
    big = tmp_path / "ms614.jsonl"
    # 76 cycles of the 8 rows plus rows 0-5: 8 wrong steps and 5 flawed rows a cycle, 6 and 4 in rows 0-5
    big.write_text("".join(json.dumps(ROWS[i % 8]) + "\n" for i in range(614)), encoding="utf-8")
    rows = load_math_shepherd(str(big))
    info, warnings = data_info(str(big), rows)
    assert info["card_check"] == "differs" and "differs from the card's" in warnings[0]
    assert (info["rows"], info["steps_incorrect"], info["rows_with_error"]) == (614, 8 * 76 + 6, 5 * 76 + 4)
    monkeypatch.setattr(judge_mod, "CARD_SHA256", info["sha256"])
    info, warnings = data_info(str(big), rows)
    assert info["card_check"] == "match" and warnings == []


# ---- the CLI -----------------------------------------------------------------------------------------


def test_cli_judge_then_recompute(tmp_path, capsys):
    with FakeOpenAI(oracle()) as fake:
        code, out, err = cli(
            capsys, "eval", "judge", "--data-file", str(DATA), "--model-name", "fake/judge", "--model-url", fake.url,
            "--output-dir", str(tmp_path), "--num-threads", "32",
        )  # fmt: skip
    assert code == 0, err
    flat = " ".join(out.split())
    assert "label-aligned (reads gold labels)" in flat and "test_data_size 8, failed rows 0" in flat
    assert "unlocated spans: 1 in 1 rows" in flat
    jsonl = tmp_path / f"{run_name('fake/judge', str(DATA))}.jsonl"
    code, out, err = cli(capsys, "eval", "judge", "--filepath", str(jsonl))
    assert code == 0, err
    assert (tmp_path / f"{jsonl.stem}_recomputed_metric.json").is_file()


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--filepath", "x.jsonl", "--data-file", "d.jsonl"], "do not combine it"),
        ([], "give --data-file and --model-name"),
        (["--data-file", "d.jsonl"], "give --data-file and --model-name"),
        (["--filepath", "nowhere.jsonl"], "nowhere.jsonl: no such file"),
        (
            ["--data-file", str(DATA), "--model-name", "m", "--on-invalid", "ignore"],
            "'--on-invalid': 'ignore' is not one of",
        ),
        (["--data-file", str(DATA), "--model-name", "m", "--num-threads", "0"], "--num-threads 0"),
    ],
)
def test_cli_bad_usage_is_one_line_and_exit_2(capsys, args, fragment):
    code, _, err = cli(capsys, "eval", "judge", *args)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1


def metric_file(path: Path, f1: float, accuracy: float, size: int = 614, **extra) -> Path:
    body = {
        "test_data_size": size,
        "smoke_run": False,
        "failed_rows": 0,
        "data": {"rows": 614, "sha256": "abc"},
        "metrics": {"All": {"span_level": {"f1": f1}, "case_level": {"accuracy": accuracy}}},
        **extra,
    }
    path.write_text(json.dumps(body))
    return path


def test_judge_summary_mean_and_sample_std_by_hand(tmp_path, capsys):
    """span F1 0.80, 0.90, 1.00: mean 0.90, std sqrt((0.01 + 0 + 0.01) / 2) = 0.10.
    case accuracy 0.5, 0.5, 0.8: mean 0.6, std sqrt((0.01 + 0.01 + 0.04) / 2) = sqrt(0.03)."""
    files = [metric_file(tmp_path / f"r{i}_metric.json", f1, acc) for i, (f1, acc) in enumerate(
        [(0.8, 0.5), (0.9, 0.5), (1.0, 0.8)])]  # fmt: skip
    out_json = tmp_path / "summary.json"
    code, out, err = cli(capsys, "eval", "judge-summary", *map(str, files), "--out", str(out_json))
    assert code == 0, err
    s = json.loads(out_json.read_text())
    assert s["runs"] == 3 and s["problems"] == []
    assert s["metrics"]["span_level.f1"]["mean"] == pytest.approx(0.9)
    assert s["metrics"]["span_level.f1"]["std"] == pytest.approx(0.1)
    assert s["metrics"]["case_level.accuracy"]["mean"] == pytest.approx(0.6)
    assert s["metrics"]["case_level.accuracy"]["std"] == pytest.approx(0.03**0.5)
    flat = " ".join(out.split())
    assert "label-aligned (reads gold labels)" in flat and "90.00" in flat and "10.00" in flat
    assert mean_std([0.5]) == (0.5, None)


def test_judge_summary_refuses_mismatched_or_smoke_runs_unless_told(tmp_path, capsys):
    a = metric_file(tmp_path / "a_metric.json", 0.8, 0.5)
    b = metric_file(tmp_path / "b_metric.json", 0.9, 0.5, size=600)
    c = metric_file(tmp_path / "c_metric.json", 0.9, 0.5, size=5, smoke_run=True)
    code, _, err = cli(capsys, "eval", "judge-summary", str(a), str(b))
    assert code == 2 and "test_data_size differs" in err and "scored 600 of the data file's 614 rows" in err
    assert "--accept-mismatch" in err
    code, _, err = cli(capsys, "eval", "judge-summary", str(a), str(c))
    assert code == 2 and "is a smoke run" in err
    code, out, err = cli(capsys, "eval", "judge-summary", str(a), str(b), "--accept-mismatch")
    assert code == 0 and "accepted mismatch: test_data_size differs" in " ".join(out.split())
