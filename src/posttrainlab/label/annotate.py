"""SHARP annotation: an LLM judge marks the wrong fragments of each solution with ``<HAL>…</HAL>``.

The judge (seed 000, "Annotation") receives the problem and the solution (its steps joined by one
blank line, :func:`solution_text`) and returns the solution verbatim with the minimal wrong
fragments wrapped in ``<HAL>…</HAL>``, or the literal ``No hallucinations``. The card does not publish
its prompt; :data:`PROMPT_TEMPLATE` is ours, versioned and hashed into every record (the prompt and the
rows read, :func:`load_solutions`, are ``label.annotate_prompt``; this module is the run).

Every answer is verified, and repaired when it drifted from the source (``label.repair``); an answer
that cannot be repaired is asked for again, up to ``max_attempts`` answers (temperature 0 first, 0.4
after, as ``runners.judge_client.RetryPolicy``). Each record says how it ended (``status``):

=============  ==========================================================================
clean          the first answer said there is no error (the literal, or an untagged exact copy)
tagged         the first answer reproduced the solution exactly and marked >= 1 fragment
repaired       the first answer drifted from the solution and was aligned back to it
regenerated    the first answer was rejected; a later one was accepted (``repaired`` says how)
failed         no acceptable answer in ``max_attempts``: ``spans`` is null, never a clean row
=============  ==========================================================================

Why it is built this way (the same conventions as ``runners.judge``):

- **Resumable**: one JSON line per finished row in ``OUT/annotations.jsonl``, appended and flushed by
  the main thread only, each with its row ``index`` and a ``key`` (hash of question and steps).
  A restart skips finished rows and refuses a record whose key or model does not match (other data
  or another judge in the same folder); a last line cut by a kill is dropped and judged again.
  Failed rows stay failed on restart unless ``retry_failed`` (they are then removed and re-judged,
  so no row is ever written twice).
- **Concurrent**: a thread pool of ``num_threads`` requests; results are written as they finish and
  read back in row order, so 1 or 32 threads give the same files.
- **Endpoint faults** (connection refused, timeout, 408/409/429/5xx) are retried by the ``openai``
  client (``generation.endpoint``: its backoff, honouring ``Retry-After``); a fault that persists
  stops the run (exit 1) with the finished rows kept (``data.pool``). An outage never becomes a row.

Written by hand: the protocol is SHARP's; the HTTP client is the judge harness's, the run file
(``data.runfile``) and thread pool (``data.pool``) those of every resumable run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrainlab.data.formats.hal import HalMarkupError
from posttrainlab.data.jsonl import append_jsonl
from posttrainlab.data.pool import run_pool
from posttrainlab.data.runfile import finished_records, has_row_index
from posttrainlab.errors import BadInput, at_least_one
from posttrainlab.label.annotate_prompt import (
    PROMPT_MARKER,
    PROMPT_SHA256,
    PROMPT_TEMPLATE,
    PROMPT_VERSION,
    build_messages,
    load_solutions,
    row_key,
    solution_text,
)
from posttrainlab.label.repair import MIN_RATIO, Verdict, annotation_pieces, verify
from posttrainlab.runners.judge_client import (
    REJECTED_TEXT_CHARS,
    ChatClient,
    OpenAIChatClient,
    RetryPolicy,
    request_with_retries,
)

STATUSES = ("clean", "tagged", "repaired", "regenerated", "failed")
RUN_FILE = "annotations.jsonl"
DEFAULT_MODEL_URL = "http://127.0.0.1:8000/v1"


@dataclass(frozen=True)
class AnnotateConfig:
    """One annotation run (flag names of ``posttrain annotate``)."""

    data: str
    out: Path
    model_name: str
    model_url: str = DEFAULT_MODEL_URL
    api_key: str = "EMPTY"
    num_threads: int = 8
    max_attempts: int = 3
    max_tokens: int = 4096  # the answer repeats the solution, so it needs the solution's length and more
    timeout_s: float = 600.0
    min_ratio: float = MIN_RATIO
    limit: int | None = None
    retry_failed: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def check(self) -> None:
        at_least_one(True, num_threads=self.num_threads, max_attempts=self.max_attempts, max_tokens=self.max_tokens)
        if not 0 < self.min_ratio <= 1:
            raise BadInput(f"--min-ratio {self.min_ratio}: must be in (0, 1]")
        at_least_one(True, limit=self.limit)
        if not self.model_name:
            raise BadInput("--model-name is empty: give the name the server serves")


def _status(attempt: int, verdict: Verdict) -> str:
    if attempt > 0:
        return "regenerated"
    if verdict.how == "repaired":
        return "repaired"
    return "tagged" if verdict.spans else "clean"


def annotate_row(
    client: ChatClient,
    row: dict[str, Any],
    *,
    max_attempts: int = 3,
    max_tokens: int = 4096,
    min_ratio: float = MIN_RATIO,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Ask until an answer verifies (or is repaired), at most ``max_attempts`` answers; the outcome fields.

    Raises ``EndpointError`` when the endpoint keeps failing (module docstring).
    """
    policy = policy or RetryPolicy()
    source = solution_text(row["steps"])
    messages = build_messages(row["question"], row["steps"])
    rejected: list[dict[str, Any]] = []
    retries = 0
    for attempt in range(max_attempts):
        temperature = policy.first_temperature if attempt == 0 else policy.retry_temperature
        completion, used = request_with_retries(client, messages, temperature, max_tokens, policy, sleep)
        retries += used
        text = completion.text
        if completion.problem:
            verdict = Verdict(None, "rejected", completion.problem)
        else:
            verdict = verify(text, source, min_ratio=min_ratio)
        pieces = None
        if verdict.ok:
            try:  # cannot fail for spans verify trimmed, unless a step holds the separator itself
                pieces = annotation_pieces(row["steps"], verdict.spans or [])
            except HalMarkupError as e:
                verdict = Verdict(None, "rejected", f"cannot cut the annotation into steps: {e}")
        if not verdict.ok:
            reason = verdict.reason or "rejected"
            if completion.finish_reason == "length":
                reason += " (cut at --max-tokens)"
            rejected.append({"reason": reason, "text": None if text is None else text[:REJECTED_TEXT_CHARS]})
            continue
        spans = verdict.spans or []
        return {
            "status": _status(attempt, verdict),
            "spans": [list(s) for s in spans],
            "hallucination_annotation": pieces,
            "n_spans": len(spans),
            "verified": verdict.how,
            "repair": {"reason": verdict.reason, "ratio": round(verdict.ratio, 4)}
            if verdict.how == "repaired"
            else None,
            "attempts": attempt + 1,
            "rejected": rejected,
            "http_retries": retries,
            "response": text,
        }
    return {
        "status": "failed",
        "spans": None,
        "hallucination_annotation": None,
        "n_spans": None,
        "verified": "rejected",
        "repair": None,
        "attempts": max_attempts,
        "rejected": rejected,
        "http_retries": retries,
        "response": None,
    }


def make_record(index: int, row: dict[str, Any], outcome: dict[str, Any], model_name: str) -> dict[str, Any]:
    """One line of the run file (field order fixed)."""
    return {
        "index": index,
        "key": row_key(row["question"], row["steps"]),
        "model": model_name,
        "prompt_version": PROMPT_VERSION,
        "id": row["id"],
        "source": row["source"],
        "source_split": row["source_split"],
        "sample_index": row["sample_index"],
        "question": row["question"],
        "steps": row["steps"],
        **outcome,
    }


def _finished(
    path: Path, rows: list[dict[str, Any]], model_name: str, *, retry_failed: bool = False
) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Finished records by row index (``data.runfile.finished_records``); failed ones removed when retrying."""

    def check(rec: dict[str, Any]) -> str | None:
        if not has_row_index(rec):
            return "no row index"
        return None if rec.get("status") in STATUSES else f"unknown status {rec.get('status')!r}"

    return finished_records(
        path,
        rows,
        check=check,
        key_of=lambda row: row_key(row["question"], row["steps"]),
        model_name=model_name,
        is_failed=lambda rec: rec["status"] == "failed",
        retry_failed=retry_failed,
        mismatch="the data (other data in the same --out?)",
        hint="use another --out",
        again="annotated",
    )


@dataclass
class AnnotateRun:
    """What a run did: its run file, the records in row order, and how many rows it annotated now."""

    run_file: Path
    records: list[dict[str, Any]]
    annotated: int
    resumed: int
    elapsed_s: float
    notes: list[str]

    @property
    def status_counts(self) -> dict[str, int]:
        return {s: sum(1 for r in self.records if r["status"] == s) for s in STATUSES}


def run_annotate(
    cfg: AnnotateConfig, client: ChatClient | None = None, *, progress: Callable[[int, int], None] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None, sleep: Callable[[float], None] = time.sleep,
) -> AnnotateRun:  # fmt: skip
    """Annotate every unfinished row into ``cfg.out/annotations.jsonl`` (module docstring).

    ``client``: any ``judge_client.ChatClient`` (default: the ``openai`` client on ``cfg.model_url``).
    ``progress(done, total)`` after each record; ``on_record(record)`` after each line is written (an
    exception there stops the run as a kill would).
    """
    cfg.check()
    rows, skipped = load_solutions(cfg.data, cfg.limit)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    run_file = out / RUN_FILE
    done, notes = _finished(run_file, rows, cfg.model_name, retry_failed=cfg.retry_failed)
    if skipped:
        notes.append(f"{skipped} solution(s) without any step skipped (nothing to annotate)")
    pending = [i for i in range(len(rows)) if i not in done]
    resumed = len(rows) - len(pending)
    if client is None and pending:
        retries = cfg.retry.http_retries
        client = OpenAIChatClient(
            cfg.model_url, cfg.model_name, api_key=cfg.api_key, timeout_s=cfg.timeout_s, max_retries=retries
        )
    policy = RetryPolicy(
        answer_retries=cfg.max_attempts - 1,
        first_temperature=cfg.retry.first_temperature,
        retry_temperature=cfg.retry.retry_temperature,
        http_retries=cfg.retry.http_retries,
        backoff_s=cfg.retry.backoff_s,
        backoff_max_s=cfg.retry.backoff_max_s,
    )

    def one(i: int) -> dict[str, Any]:
        assert client is not None
        outcome = annotate_row(
            client,
            rows[i],
            max_attempts=cfg.max_attempts,
            max_tokens=cfg.max_tokens,
            min_ratio=cfg.min_ratio,
            policy=policy,
            sleep=sleep,
        )
        return make_record(i, rows[i], outcome, cfg.model_name)

    written: set[int] = set()

    def write(record: dict[str, Any]) -> None:
        append_jsonl(run_file, record)
        written.add(record["index"])
        done[record["index"]] = record
        if progress is not None:
            progress(resumed + len(written), len(rows))
        if on_record is not None:
            on_record(record)

    def salvage(i: int, record: dict[str, Any]) -> None:
        if i not in written:
            append_jsonl(run_file, record)
            written.add(i)

    start = time.perf_counter()
    run_pool(
        pending, one, lambda _i, record: write(record), salvage, threads=cfg.num_threads, name="annotate",
        run_file=run_file,
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    records = [done[i] for i in range(len(rows))]
    from posttrainlab.data.cards.kinds import write_folder_card

    judge = {"model": cfg.model_name, "url": cfg.model_url, "prompt_sha256": PROMPT_SHA256,
             "max_attempts": cfg.max_attempts, "max_tokens": cfg.max_tokens, "min_ratio": cfg.min_ratio}  # fmt: skip
    write_folder_card(out, "annotations", {"data": str(cfg.data), "judge": judge})  # README.md, the dataset card
    return AnnotateRun(run_file, records, len(written), resumed, elapsed, notes)


__all__ = [
    "PROMPT_MARKER",
    "PROMPT_SHA256",
    "PROMPT_TEMPLATE",
    "PROMPT_VERSION",
    "STATUSES",
    "AnnotateConfig",
    "AnnotateRun",
    "annotate_row",
    "build_messages",
    "load_solutions",
    "run_annotate",
    "solution_text",
]
