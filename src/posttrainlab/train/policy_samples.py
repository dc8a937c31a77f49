"""``k`` answers per prompt from a training run's starting policy, graded, kept beside the run and reused on resume.

What RFT's samples (``train.rft``) and GRPO's prompt filter (``train.grpo``) share; DPO's on-policy pairs do the same
for their own rows (``label.policy_pairs``). ``graded_samples`` samples with any ``SamplingBackend``
(``generation.sampling.sample_answers``) and grades every answer with the arith grader; ``sampled_rows`` loads the
policy (or takes the backend given), makes the rows once and writes ``OUT/<name>.jsonl`` then ``OUT/<name>.json``
(``settings``, ``counts``, ``backend``, ``seconds``), each atomically, the summary last. A later run whose settings
(the sampling values, the policy, the records' hash) equal the summary's reuses the rows instead of sampling again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput

#: ``make(records, graded) -> (rows, counts)``: what a run keeps of its graded samples
Make = Callable[[list[dict], list[list[dict]]], tuple[list[dict], dict[str, Any]]]


def graded_samples(records: list[dict], cfg, backend, label: str) -> list[list[dict]]:
    """``cfg.k`` answers per record (a ``train.recipes.SamplingSettings``), each ``{"response", "correct",
    "outcome", "parsed"}`` as the arith grader sees it against the record's ``answer``."""
    from posttrainlab.generation.sampling import sample_answers
    from posttrainlab.grading.arith import ArithGrader

    sampling = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens}
    completions = sample_answers(backend, records, cfg.k, label, seed=cfg.seed, **sampling)
    grader = ArithGrader()
    out = []
    for record, answers in zip(records, completions, strict=True):
        grades = [grader.grade(a, record["answer"]) for a in answers]
        out.append([{"response": a, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed}
                    for a, g in zip(answers, grades, strict=True)])  # fmt: skip
    return out


def settings_of(cfg, policy: str, dataset, records: list[dict], **extra: Any) -> dict[str, Any]:
    """What the rows depend on: the sampling values, ``extra``, the policy, the data and a hash of the records."""
    digest = hashlib.sha256()
    for r in records:
        digest.update(json.dumps([r.get("id"), r["prompt"], r["answer"]], sort_keys=True, default=str).encode())
    return {**asdict(cfg), **extra, "policy": policy, "data": dataset.path, "split": dataset.split,
            "limit": dataset.limit, "records_sha256": digest.hexdigest()}  # fmt: skip


def reusable(out: Path, name: str, settings: dict[str, Any]) -> list[dict] | None:
    """The rows in ``out/<name>.jsonl`` when ``out/<name>.json``'s settings equal ``settings`` and the file is whole."""
    from posttrainlab.data.jsonl import read_jsonl

    try:
        summary = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
        if summary.get("settings") != settings:
            return None
        rows = read_jsonl(out / f"{name}.jsonl")
    except (OSError, json.JSONDecodeError, BadInput):
        return None
    return rows if len(rows) == summary.get("counts", {}).get("rows") else None


def sampled_rows(
    records: list[dict], cfg, policy: str, out: Path, name: str, make: Make, *, settings: dict[str, Any],
    backend=None, reuse: bool = True, trust_remote_code: bool = False,
) -> tuple[list[dict], dict[str, Any]]:  # fmt: skip
    """``(rows, counts)``: reused from ``out/<name>.jsonl`` (``reuse`` and equal ``settings``), or sampled from
    ``policy`` (or ``backend``), graded and turned into rows by ``make``, then written (module docstring).

    A model loaded here is freed before this returns, so the trainer loads into the memory it held.
    """
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.jsonl import write_jsonl

    out = Path(out)
    if reuse and (rows := reusable(out, name, settings)) is not None:
        counts = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))["counts"]
        print(f"{name}: reusing {len(rows)} rows from {out / (name + '.jsonl')}", flush=True)
        return rows, counts
    owned = backend is None
    if owned:
        from posttrainlab.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend.from_pretrained(
            policy, batch_size=cfg.batch_size, trust_remote_code=trust_remote_code
        )
    start = time.perf_counter()
    graded = graded_samples(records, cfg, backend, f"{name}: sampling k={cfg.k}")
    seconds = time.perf_counter() - start
    backend_name = getattr(backend, "name", type(backend).__name__)
    if owned:
        del backend
        from posttrainlab.models.loading import free_memory

        free_memory()
    rows, counts = make(records, graded)
    counts = {"rows": len(rows), **counts}
    (out / f"{name}.json").unlink(missing_ok=True)  # no summary may vouch for a rows file it did not describe
    write_jsonl(out / f"{name}.jsonl", rows)
    summary = {"settings": settings, "counts": counts, "backend": backend_name, "seconds": round(seconds, 3)}
    write_text(out / f"{name}.json", json.dumps(summary, indent=2) + "\n")
    print(f"{name}: {len(rows)} rows from {len(records)} prompts x {cfg.k} samples in {seconds:.1f} s", flush=True)
    return rows, counts


def outcome_counts(graded: list[list[dict]]) -> dict[str, int]:
    """How many samples got each grader outcome, sorted by outcome."""
    from collections import Counter

    return dict(sorted(Counter(s["outcome"] for samples in graded for s in samples).items()))


__all__ = ["graded_samples", "outcome_counts", "reusable", "sampled_rows", "settings_of"]
