"""``k`` answers per prompt from a training run's starting policy, graded, kept beside the run and reused on resume.

What RFT's samples (``train.rft``), GRPO's prompt filter (``train.grpo``) and DPO's on-policy pairs
(``label.policy_pairs``) share. ``graded_samples`` samples with any ``SamplingBackend``
(``generation.sampling.sample_answers``) and grades every answer with the arith grader; ``sampled_rows`` loads the
policy (or takes the backend given), makes the rows once (``Kept.make``) and writes ``OUT/<name>.jsonl`` then
``OUT/<name>.json`` (``settings``, ``counts``, ``backend``, ``seconds``), each atomically, the summary last. A later
run whose settings (the sampling values, the policy, the records' hash) equal the summary's reuses the rows instead
of sampling again. ``train.common.run_rows`` does it for a training recipe: into its output_dir, from its starting
model.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput

#: ``make(records, graded) -> (rows, counts)``: what a run keeps of its graded samples
Make = Callable[[list[dict], list[list[dict]]], tuple[list[dict], dict[str, Any]]]


@dataclass(frozen=True)
class Kept:
    """What a run keeps of its graded samples (``make``), in ``OUT/<name>.jsonl`` and ``OUT/<name>.json``.

    ``say`` prefixes its messages (default: ``name``), which call a row ``noun``; ``count`` is the key of the counts
    that holds the number of rows (put first when ``make`` leaves it out); ``keys``, the record fields whose hash
    joins the reuse key; ``written(out)`` runs after the files are written (not when they are reused).
    """

    name: str
    make: Make
    say: str = ""
    noun: str = "rows"
    count: str = "rows"
    keys: tuple[str, ...] = ("id", "prompt", "answer")
    written: Callable[[Path], object] | None = None

    @property
    def prefix(self) -> str:
        return self.say or self.name


def graded_samples(records: list[dict], cfg, backend, label: str) -> list[list[dict]]:
    """``cfg.k`` answers per record (a ``train.recipes.SamplingSettings``), each ``{"response", "correct",
    "outcome", "parsed"}`` as the arith grader sees it against the record's ``answer``."""
    from posttrainlab.generation.sampling import sample_answers
    from posttrainlab.grading.arith import graded_answers

    sampling = {"temperature": cfg.temperature, "top_p": cfg.top_p, "max_new_tokens": cfg.max_new_tokens}
    completions = sample_answers(backend, records, cfg.k, label, seed=cfg.seed, **sampling)
    return [graded_answers(answers, r["answer"]) for r, answers in zip(records, completions, strict=True)]


def settings_of(cfg, policy: str, dataset, records: list[dict], keys: tuple[str, ...] = Kept.keys) -> dict[str, Any]:
    """What the rows depend on: the sampling values, the policy, the data and a hash of the records' ``keys``."""
    digest = hashlib.sha256()
    for r in records:
        digest.update(json.dumps([r.get(k) for k in keys], sort_keys=True, default=str).encode())
    return {**asdict(cfg), "policy": policy, "data": dataset.path, "split": dataset.split, "limit": dataset.limit,
            "records_sha256": digest.hexdigest()}  # fmt: skip


def reusable(out: Path, kept: Kept, settings: dict[str, Any]) -> tuple[list[dict], dict[str, Any]] | None:
    """``(rows, counts)`` of ``out/<name>.jsonl`` when ``out/<name>.json``'s settings equal ``settings`` and the rows
    file is whole."""
    from posttrainlab.data.jsonl import read_jsonl

    try:
        summary = json.loads((out / f"{kept.name}.json").read_text(encoding="utf-8"))
        if summary.get("settings") != settings:
            return None
        rows = read_jsonl(out / f"{kept.name}.jsonl")
    except (OSError, json.JSONDecodeError, BadInput):
        return None
    counts = summary.get("counts", {})
    return (rows, counts) if len(rows) == counts.get(kept.count) else None


def sampled_rows(
    records: list[dict], cfg, policy: str, out: Path, kept: Kept, *, settings: dict[str, Any], backend=None,
    reuse: bool = True, trust_remote_code: bool = False,
) -> tuple[list[dict], dict[str, Any]]:  # fmt: skip
    """``(rows, counts)``: reused from ``out/<name>.jsonl`` (``reuse`` and equal ``settings``), or sampled from
    ``policy`` (or ``backend``), graded and turned into rows by ``kept.make``, then written (module docstring).

    A model loaded here is freed before this returns, so the trainer loads into the memory it held; a ``backend``
    given with a ``close`` method (``vllm-server``'s) is closed, which stops the server it started.
    """
    from posttrainlab.data.jsonl import write_json, write_jsonl

    out, rows_file = Path(out), Path(out) / f"{kept.name}.jsonl"
    if reuse and (found := reusable(out, kept, settings)) is not None:
        print(f"{kept.prefix}: reusing {len(found[0])} {kept.noun} from {rows_file}", flush=True)
        return found
    owned = backend is None
    if owned:
        from posttrainlab.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend.from_pretrained(
            policy, batch_size=cfg.batch_size, trust_remote_code=trust_remote_code
        )
    start = time.perf_counter()
    graded = graded_samples(records, cfg, backend, f"{kept.prefix}: sampling k={cfg.k}")
    seconds = time.perf_counter() - start
    backend_name = getattr(backend, "name", type(backend).__name__)
    if owned:
        del backend
        from posttrainlab.models.loading import free_memory

        free_memory()
    elif callable(getattr(backend, "close", None)):
        backend.close()  # a served policy (vllm-server) lets go of its server before the trainer loads
    rows, counts = kept.make(records, graded)
    counts = counts if kept.count in counts else {kept.count: len(rows), **counts}
    (out / f"{kept.name}.json").unlink(missing_ok=True)  # no summary may vouch for a rows file it did not describe
    write_jsonl(rows_file, rows)
    summary = {"settings": settings, "counts": counts, "backend": backend_name, "seconds": round(seconds, 3)}
    write_json(out / f"{kept.name}.json", summary)
    if kept.written is not None:
        kept.written(out)
    print(f"{kept.prefix}: {len(rows)} {kept.noun} from {len(records)} prompts x {cfg.k} samples in {seconds:.1f} s",
          flush=True)  # fmt: skip
    return rows, counts


def outcome_counts(graded: list[list[dict]]) -> dict[str, int]:
    """How many samples got each grader outcome, sorted by outcome."""
    from collections import Counter

    return dict(sorted(Counter(s["outcome"] for samples in graded for s in samples).items()))


__all__ = ["Kept", "graded_samples", "outcome_counts", "reusable", "sampled_rows", "settings_of"]
