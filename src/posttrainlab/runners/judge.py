"""Judge runs: the Math-Shepherd-614 protocol (seed card 001) against any OpenAI-compatible endpoint.

``run_judge`` reads Math-Shepherd rows (``prompt, completions, labels``; Parquet, JSON Lines, ``hf://``),
asks the judge about each row (:mod:`posttrainlab.runners.judge_client`) from a thread pool
(:mod:`posttrainlab.data.pool`), and appends one JSON line per finished record to
``<output-dir>/<run>.jsonl`` (read back by :mod:`posttrainlab.data.runfile`). Then it reads the file back and
writes ``<run>_metric.json`` atomically (:mod:`posttrainlab.eval.judge_metrics`).

Why it is built this way:

- **Resumable** (docs/design.md "Reliability conventions"): a network run of 614 rows x up to 8,000 tokens
  takes long and dies for dull reasons. The run name is a pure function of the model name and the data
  file's name (plus ``--run-tag`` for repeated runs), so a restart finds its file; each record carries
  its row ``index`` and a ``key`` (hash of the row), finished indices are skipped, and a record whose key
  does not match the data is refused instead of scored against the wrong row. Records are appended by
  the main thread only, one flushed line each, so none is written twice; a line cut by a kill is dropped
  on restart (its row is judged again).
- **An invalid answer aborts** the run (``on_invalid="abort"``, the card's behaviour): the rows finished
  so far stay in the file and the run resumes from them. ``on_invalid="record"`` writes the row with
  ``hallucination_list: null`` and ``failed: true`` instead; failed rows are left out of the metrics and
  counted beside them (``failed_rows``), and ``retry_failed=True`` judges them again on a later start.
- **Same metrics for 1 or 32 threads**: records are scored in data order whatever order they finished in.
- **The data file is checked**: its SHA-256 is compared with the card's value when it has the card's
  614 rows; a ``max_samples`` run is marked ``smoke_run`` in its metric file.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from posttrainlab.data.formats.math_shepherd import as_list_form, check_ms_row
from posttrainlab.data.formats.readers import SUFFIXES, iter_rows
from posttrainlab.data.jsonl import append_jsonl, write_json
from posttrainlab.data.manifest import sha256_file
from posttrainlab.data.pool import run_pool
from posttrainlab.data.runfile import finished_records, has_row_index
from posttrainlab.errors import BadInput, PosttrainError
from posttrainlab.eval.judge_metrics import check_record, judge_metrics
from posttrainlab.runners.judge_client import (
    PROMPT_SHA256,
    PROMPT_VERSION,
    ChatClient,
    JudgeAnswer,
    OpenAIChatClient,
    ask_judge,
    build_messages,
)
from posttrainlab.runners.settings import JudgeSettings

CARD_ROWS = 614
CARD_SHA256 = "e01fabbc80b99f01307aa9095b9e186f13cae392ed0bff983dcbdd61ee0d1087"


class JudgeAborted(PosttrainError):
    """A row got no valid answer and the run was told to abort (exit 1); the finished rows are kept."""


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "x"


def run_name(model_name: str, data_file: str, run_tag: str | None = None) -> str:
    """The run's file stem, a pure function of its inputs so that a restart finds the same file.

    >>> run_name("Qwen/Qwen2.5-7B-Instruct", "data/math_shepherd_614_test_20260327.parquet")
    'math_shepherd_614_test_20260327__Qwen-Qwen2.5-7B-Instruct'
    >>> run_name("judge", "hf://OverwhelmingFit/SOPO-Math-Shepherd-614:test", "r3")
    'SOPO-Math-Shepherd-614-test__judge__r3'
    """
    name = data_file.rstrip("/").rsplit("/", 1)[-1]
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    parts = [_safe(name), _safe(model_name)] + ([_safe(run_tag)] if run_tag else [])
    return "__".join(parts)


def row_key(row: dict[str, Any]) -> str:
    """A short hash of a row's content, stored in its record to catch a run file resumed on other data.

    >>> row_key({"prompt": "q", "completions": ["a"], "labels": [True]})
    '09496609452259a8'
    """
    canonical = json.dumps([row["prompt"], row["completions"], row["labels"]], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_math_shepherd(data_file: str) -> list[dict[str, Any]]:
    """All rows of a Math-Shepherd file in the list form; ``BadInput`` naming the file and the bad row."""
    rows = []
    for i, row in enumerate(iter_rows(data_file)):
        reason = check_ms_row(row)
        if reason is not None:
            raise BadInput(f"{data_file}: row {i}: {reason}")
        rows.append(as_list_form(row))
    if not rows:
        raise BadInput(f"{data_file}: no rows")
    return rows


def data_info(data_file: str, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The data file's identity and counts for the metric file, and warnings (the card's checksum).

    The card's file: 614 rows, 1,794 correct and 1,395 incorrect steps, 334 rows with an incorrect step.
    """
    local = not data_file.startswith("hf://")
    sha = sha256_file(data_file) if local else None
    n_rows = len(rows)
    info: dict[str, Any] = {
        "file": data_file,
        "rows": n_rows,
        "steps_correct": sum(sum(r["labels"]) for r in rows),
        "steps_incorrect": sum(len(r["labels"]) - sum(r["labels"]) for r in rows),
        "rows_with_error": sum(1 for r in rows if not all(r["labels"])),
        "sha256": sha,
        "card_sha256": CARD_SHA256,
    }
    warnings = []
    if n_rows != CARD_ROWS:
        info["card_check"] = f"not applicable ({n_rows} rows; the card's file has {CARD_ROWS})"
    elif sha is None:
        info["card_check"] = "unknown (not a local file)"
    elif sha == CARD_SHA256:
        info["card_check"] = "match"
    else:
        info["card_check"] = "differs"
        warnings.append(
            f"{data_file} has the card's {CARD_ROWS} rows but its sha256 {sha[:12]}... differs from the card's "
            f"{CARD_SHA256[:12]}...: not the published Math-Shepherd-614 file"
        )
    return info, warnings


@dataclass
class JudgeRun:
    """What a run did: its files, its metric JSON, and how many rows it judged now vs found done."""

    jsonl: Path
    metric_file: Path
    metrics: dict[str, Any]
    judged: int
    resumed: int
    elapsed_s: float
    warnings: list[str]

    @property
    def records_per_s(self) -> float:
        return self.judged / self.elapsed_s if self.elapsed_s > 0 else 0.0


def make_record(index: int, row: dict[str, Any], answer: JudgeAnswer, model_name: str) -> dict[str, Any]:
    """One line of the run file (field order fixed)."""
    return {
        "index": index,
        "key": row_key(row),
        "model": model_name,
        "prompt": row["prompt"],
        "completions": row["completions"],
        "labels": row["labels"],
        "response": answer.response,
        "hallucination_list": answer.hallucination_list,
        "attempts": answer.attempts,
        "failed": answer.error is not None,
        "error": answer.error,
        "rejected": answer.rejected,
        "http_retries": answer.http_retries,
    }


def _finished(path: Path, rows: list[dict[str, Any]], cfg: JudgeSettings) -> tuple[dict[int, dict], list[str]]:
    """Finished judge records by index (``finished_records``); failed ones dropped when retrying them."""
    return finished_records(
        path,
        rows,
        check=lambda rec: check_record(rec) or (None if has_row_index(rec) else "no row index"),
        key_of=row_key,
        model_name=cfg.model_name,
        is_failed=lambda rec: rec["hallucination_list"] is None,
        retry_failed=cfg.retry_failed,
        mismatch=f"{cfg.data_file} (other data under the same run name?)",
        hint="use another --output-dir or --run-tag",
        again="judged",
    )


def run_judge(
    cfg: JudgeSettings, client: ChatClient | None = None, *, progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None, sleep: Callable[[float], None] = time.sleep,
) -> JudgeRun:  # fmt: skip
    """Judge every unfinished row, then write the metric file (module docstring).

    ``client``: any :class:`~posttrainlab.runners.judge_client.ChatClient` (default: the ``openai`` client on
    ``cfg.model_url``). ``progress(done, total)`` after each record; ``on_record(record)`` after each
    line is written (an exception there stops the run as a kill would).
    Raises :class:`JudgeAborted` on an answer that stays invalid under ``on_invalid="abort"``,
    :class:`~posttrainlab.errors.EndpointError` when the endpoint keeps failing.
    """
    cfg.check()
    rows = load_math_shepherd(cfg.data_file)
    info, warnings = data_info(cfg.data_file, rows)
    selected = rows[: cfg.max_samples] if cfg.max_samples else rows
    name = run_name(cfg.model_name, cfg.data_file, cfg.run_tag)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl, metric_file = out / f"{name}.jsonl", out / f"{name}_metric.json"
    done, notes = _finished(jsonl, rows, cfg)
    warnings += notes
    pending = [i for i in range(len(selected)) if i not in done]
    resumed = len(selected) - len(pending)
    if client is None:
        retries = cfg.retry.http_retries
        client = OpenAIChatClient(
            cfg.model_url, cfg.model_name, api_key=cfg.api_key, timeout_s=cfg.timeout_s, max_retries=retries
        )

    def judge_one(i: int) -> JudgeAnswer:
        messages = build_messages(selected[i]["prompt"], selected[i]["completions"])
        return ask_judge(client, messages, max_tokens=cfg.max_tokens, policy=cfg.retry, sleep=sleep)

    written: set[int] = set()

    def write(i: int, answer: JudgeAnswer) -> None:
        record = make_record(i, selected[i], answer, cfg.model_name)
        append_jsonl(jsonl, record)
        written.add(i)
        if progress is not None:
            progress(resumed + len(written), len(selected))
        if on_record is not None:
            on_record(record)

    def handle(i: int, answer: JudgeAnswer) -> None:
        if answer.error is not None and cfg.on_invalid == "abort":
            raise JudgeAborted(
                f"row {i}: {answer.error}; run aborted (an invalid answer is never scored as 'no hallucination'). "
                f"Finished rows are kept in {jsonl}: run the same command again to resume, "
                f"or pass --on-invalid record to record such rows as failed"
            )
        write(i, answer)

    def salvage(i: int, answer: JudgeAnswer) -> None:
        if i not in written and (answer.error is None or cfg.on_invalid == "record"):
            append_jsonl(jsonl, make_record(i, selected[i], answer, cfg.model_name))
            written.add(i)

    start = time.perf_counter()
    run_pool(pending, judge_one, handle, salvage, threads=cfg.num_threads, name="judge", run_file=jsonl)
    elapsed = time.perf_counter() - start

    done, _ = _finished(jsonl, rows, replace(cfg, retry_failed=False))
    records = [done[i] for i in range(len(selected)) if i in done]
    metrics = {
        **judge_metrics(records),
        "smoke_run": cfg.max_samples is not None and len(selected) < len(rows),
        "max_samples": cfg.max_samples,
        "run": name,
        "model_name": cfg.model_name,
        "model_url": cfg.model_url,
        "data": info,
        "settings": {
            "num_threads": cfg.num_threads,
            "max_tokens": cfg.max_tokens,
            "on_invalid": cfg.on_invalid,
            "timeout_s": cfg.timeout_s,
            "answer_retries": cfg.retry.answer_retries,
            "temperatures": [cfg.retry.first_temperature, cfg.retry.retry_temperature],
            "prompt_version": PROMPT_VERSION,
            "prompt_sha256": PROMPT_SHA256,
        },
        "attempts": {
            "answers_requested": sum(r["attempts"] for r in records),
            "rows_retried": sum(1 for r in records if r["attempts"] > 1),
            "http_retries": sum(r.get("http_retries", 0) for r in records),
        },
        "warnings": warnings,
    }
    metrics = _ordered(metrics)
    write_json(metric_file, metrics, ensure_ascii=False)
    return JudgeRun(jsonl, metric_file, metrics, len(written), resumed, elapsed, warnings)


_FIRST_KEYS = ("test_data_size", "smoke_run", "failed_rows", "records", "metrics", "disclosure")


def _ordered(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metric file's keys in reading order: the headline numbers first."""
    return {**{k: metrics[k] for k in _FIRST_KEYS if k in metrics}, **metrics}


def recompute(filepath: str | Path) -> tuple[Path, dict[str, Any]]:
    """Recompute every metric from a run file alone into ``<run>_recomputed_metric.json`` beside it.

    Rows need only ``completions, labels, hallucination_list`` (``null`` for a failed row); rows with an
    ``index`` are scored in index order and a repeated index counts once. ``_metric.json`` is not touched.
    """
    path = Path(filepath)
    if not path.is_file():
        raise BadInput(f"{path}: no such file")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
        fault = check_record(record)
        if fault is not None:
            raise BadInput(f"{path}:{lineno}: {fault}")
        records.append(record)
    if not records:
        raise BadInput(f"{path}: no records")
    notes = []
    if all(isinstance(r.get("index"), int) for r in records):
        by_index: dict[int, dict[str, Any]] = {}
        for r in records:
            by_index.setdefault(r["index"], r)
        if len(by_index) < len(records):
            notes.append(f"{len(records) - len(by_index)} duplicate records ignored (first of each index kept)")
        records = [by_index[i] for i in sorted(by_index)]
    metrics = judge_metrics(records)
    metrics["smoke_run"] = None  # unknown from the records alone
    metrics["recomputed_from"] = {"file": str(path), "sha256": sha256_file(path)}
    metrics["warnings"] = notes
    out = path.with_name(f"{path.stem}_recomputed_metric.json")
    write_json(out, _ordered(metrics), ensure_ascii=False)
    return out, metrics
