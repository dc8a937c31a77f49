"""``posttrain eval best-of-n``: does a PRM pick the right solution out of n samples of a policy?

``run(policy, prm, data, out)`` samples ``n`` solutions per arith-v1 problem (default: all 500 ``test``
problems) once, grades each with the arith grader, scores each with the PRM (per-step P(correct),
steps = the solution's non-empty lines, question = the prompt's problem text, as in arith-prm), and for
every n' in ``ns`` selects one of the **first n'** samples per problem with each selector of
``eval.best_of_n`` (its docstring has the selectors and their tie rules). Outputs in ``out``:

- ``samples.jsonl`` (the cache): per problem ``id, category, answer, prompt, samples`` (response and
  grade), with ``sampling.json`` beside it; a rerun whose sampling settings, data file (SHA-256) and
  policy weights (file names, sizes, modification times) match reuses them instead of sampling again;
- ``scores.jsonl``: per problem, each sample's steps, step scores and aggregated scores, and the index
  each selector chose at each n';
- ``bon.json`` (written last) and ``best_of_n.png`` (accuracy against n', one line per selector).

**Process vs outcome** (``orm``): an outcome reward model (``prm_config.json`` ``"orm": true``) scores the same
samples beside the PRM, so the comparison costs no second sampling. Its score of a sample is its last step's
(with its own ``no_answer_step``, if any); ``scores.jsonl`` holds it as ``orm`` (and its step values as
``orm_scores``), the selectors ``orm`` and ``orm_vote`` join the PRM's, ``bon.json``'s ``paired`` compares them at
every n' (``eval.best_of_n.paired_by_n``), and ``process_vs_outcome.png`` draws them (``report.orm_curves``). An
ORM given as the PRM is read the same way (``orm``, ``orm_vote`` and ``majority``, no ``prm_*``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.aggregation import AGGREGATIONS, aggregate
from posttrainlab.eval.best_of_n import Candidates, best_of_n_metrics, parse_ns, selections, vote_answer
from posttrainlab.run_layout import BON, BON_PNG, PVO_PNG, SAMPLES, SAMPLING, SCORES
from posttrainlab.runners.settings import BestOfNSettings


def _weights_stamp(policy: str) -> list[list[Any]] | None:
    """Names, sizes and modification times of a local policy's weight files (the cache key's model part)."""
    folder = Path(policy)
    if not folder.is_dir():
        return None
    return [
        [p.name, p.stat().st_size, p.stat().st_mtime_ns]
        for p in sorted(folder.iterdir())
        if p.suffix in (".safetensors", ".json") and p.is_file()
    ]


def _read_cache(out: Path, settings: dict[str, Any], records: list[dict]) -> list[dict] | None:
    """The cached samples.jsonl rows when sampling.json matches ``settings`` and the ids match."""
    from posttrainlab.data.jsonl import read_jsonl

    meta, samples = out / SAMPLING, out / SAMPLES
    if not (meta.is_file() and samples.is_file()):
        return None
    try:
        if json.loads(meta.read_text(encoding="utf-8")) != settings:
            return None
        rows = read_jsonl(samples)
    except (OSError, json.JSONDecodeError, BadInput):
        return None
    if [r.get("id") for r in rows] != [r["id"] for r in records]:
        return None
    if any(len(r.get("samples", [])) != settings["n"] for r in rows):
        return None
    return rows


def read_problems(data: str, split: str | None, limit: int | None) -> tuple[Path, list[dict]]:
    """``(file, records)`` of the problems to answer (``data.problems.read_split``: ``prompt`` and ``answer``
    required, split ``test`` by default), each with an ``id`` (else its index) and a ``category`` (else ``None``)."""
    from posttrainlab.data.problems import read_split

    path, found = read_split(data, split, required=("prompt", "answer"), limit=limit, default_split="test",
                             what="problems")  # fmt: skip
    return path, [{"id": r.get("id", str(i)), "category": r.get("category"), **r} for i, r in enumerate(found)]


def result_head(policy, prm, data, split_file: Path, problems: int) -> dict[str, Any]:
    """The first keys of ``bon.json`` and ``beam.json``: the policy, the PRM and the problems they ran on."""
    return {"policy": str(policy), "prm": str(prm), "data": str(data), "split": split_file.stem, "problems": problems}


def _sample(backend, records: list[dict], settings: dict[str, Any]) -> list[dict]:
    from posttrainlab.generation.sampling import sample_answers
    from posttrainlab.grading.arith import graded_answers

    completions = sample_answers(backend, records, settings["n"], f"best-of-N: sampling N={settings['n']}",
                                 temperature=settings["temperature"], top_p=settings["top_p"],
                                 max_new_tokens=settings["max_new_tokens"], seed=settings["seed"])  # fmt: skip
    return [{"id": r["id"], "category": r["category"], "answer": r["answer"], "prompt": r["prompt"],
             "samples": graded_answers(texts, r["answer"])}
            for r, texts in zip(records, completions, strict=True)]  # fmt: skip


def _check_orm(prm, orm, *, load_prm: bool, load_orm: bool) -> None:
    """Before any sampling: ``orm`` a local ORM folder (``prm.spec.is_orm_folder``), and ``prm`` no ORM beside it."""
    from posttrainlab.models.loading import is_local
    from posttrainlab.prm.spec import is_orm_folder
    from posttrainlab.runners.prm_eval import check_prm

    if load_orm:
        check_prm(orm)
        if is_local(str(orm)) and not is_orm_folder(orm):
            raise BadInput(f"{orm}: not an outcome reward model (its prm_config.json lacks \"orm\": true; train one "
                           "with supervision outcome: posttrain train orm)")  # fmt: skip
    if load_prm and is_local(str(prm)) and is_orm_folder(prm):
        raise BadInput(f"{prm}: an ORM given as the PRM beside the ORM {orm}; give a PRM, or the ORM alone")


def _orm_of(scorer, orm_scorer, prm, orm) -> str | None:
    """Which model is the ORM once loaded (``None``: none); ``BadInput`` for a second model that is no ORM or two."""
    from posttrainlab.prm.spec import is_orm

    if orm_scorer is None:
        return str(prm) if is_orm(scorer) else None
    if not is_orm(orm_scorer):
        raise BadInput(f'{orm}: not an outcome reward model (its prm_config.json lacks "orm": true)')
    if is_orm(scorer):
        raise BadInput(f"{prm}: an ORM given as the PRM beside the ORM {orm}; give a PRM, or the ORM alone")
    return "custom" if orm is None else str(orm)  # custom: an orm_scorer without a path


def run(
    policy: str | os.PathLike, prm: str | os.PathLike, data: str | os.PathLike, out_dir: str | os.PathLike,
    settings: BestOfNSettings | None = None, *, progress: bool = True, backend=None, scorer=None,
    orm: str | os.PathLike | None = None, orm_scorer=None,
) -> dict[str, Any]:  # fmt: skip
    """Sample (or reuse), grade, score, select; write the outputs into ``out_dir`` and return ``bon.json``.

    ``settings``: ``runners.settings.BestOfNSettings`` (its defaults when ``None``); its ``ns`` defaults to the
    powers of 2 up to ``n``, and ``n`` (1, 2, 4, 8, 16 for the default ``n = 16``). ``backend`` (a
    ``SamplingBackend``) replaces the policy loaded from ``policy``; ``scorer`` (with ``score_batch``) the PRM
    loaded from ``prm``. ``orm``: an outcome reward model scoring the same samples (module docstring);
    ``orm_scorer`` replaces the one loaded from it (its ``spec.orm`` must be true).
    """
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.data.arith.prm_labels import with_no_answer_step
    from posttrainlab.data.arith.steps import split_steps
    from posttrainlab.data.atomic import atomic_path, check_writable
    from posttrainlab.data.jsonl import write_json, write_jsonl
    from posttrainlab.data.manifest import sha256_file
    from posttrainlab.provenance import provenance
    from posttrainlab.runners.prm_eval import check_models, load_scorer, score_items
    from posttrainlab.runners.prm_plots import best_of_n_png

    opts = BestOfNSettings() if settings is None else settings
    opts.check()
    n, seed, vote_aggregation, prm_batch_size = opts.n, opts.seed, opts.vote_aggregation, opts.prm_batch_size
    ns = parse_ns(opts.ns, n)
    out = check_writable(out_dir)  # a file in the path, an unwritable place: before the sampling, not after
    check_models(policy, prm, load_policy=backend is None, load_prm=scorer is None)
    if orm is not None:
        _check_orm(prm, orm, load_prm=scorer is None, load_orm=orm_scorer is None)
    path, records = read_problems(str(data), opts.split, opts.limit)
    sampling = {
        "policy": str(policy),
        "policy_weights": _weights_stamp(str(policy)),
        "data": str(path),
        "data_sha256": sha256_file(path),
        "limit": opts.limit,
        "n": n,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
        "max_new_tokens": opts.max_new_tokens,
        "seed": seed,
        "batch_size": opts.batch_size,
    }
    if backend is not None:  # a backend of its own (vllm-server, ray, a stand-in): samples only it reuses
        sampling["backend"] = getattr(backend, "name", "custom")

    if scorer is None:  # loaded, so checked (a truncated checkpoint is refused), before any sampling, not after it
        scorer = load_scorer(prm, dtype=opts.dtype, device=opts.device)
    rows = _read_cache(out, sampling, records)
    reused = rows is not None
    sample_seconds = 0.0
    if rows is None:
        if backend is None:
            from posttrainlab.generation.transformers_backend import TransformersBackend

            backend = TransformersBackend.from_pretrained(
                policy, batch_size=opts.batch_size, progress=progress, dtype=opts.dtype
            )
        start = time.perf_counter()
        rows = _sample(backend, records, sampling)
        sample_seconds = time.perf_counter() - start
        write_jsonl(out / SAMPLES, rows)
        write_json(out / SAMPLING, sampling)

    if orm is not None and orm_scorer is None:
        orm_scorer = load_scorer(orm, dtype=opts.dtype, device=opts.device)
    orm_path = _orm_of(scorer, orm_scorer, prm, orm)

    def scored(model, what: str) -> tuple[list[list[list[str]]], list[list[list[float]]], float]:
        """Each sample's steps (with the model's own missing-answer step) and their scores, per problem."""
        marker = getattr(getattr(model, "spec", None), "no_answer_step", "")  # a PRM trained with it gets it too
        steps = [[with_no_answer_step(split_steps(s["response"]), marker) for s in r["samples"]] for r in rows]
        items = [(question_of(r["prompt"]), st) for r, per in zip(rows, steps, strict=True) for st in per]
        start = time.perf_counter()
        flat = score_items(model, items, prm_batch_size, progress=progress, what=what)
        return steps, [flat[i * n : (i + 1) * n] for i in range(len(rows))], time.perf_counter() - start

    first_is_orm = orm_scorer is None and orm_path is not None  # the --prm model is the ORM
    steps, step_scores, score_seconds = scored(scorer, "ORM scoring" if first_is_orm else "PRM scoring")
    orm_step_scores, orm_seconds = None, None
    if orm_scorer is not None:
        _, orm_step_scores, orm_seconds = scored(orm_scorer, "ORM scoring")
    elif first_is_orm:
        orm_step_scores, step_scores = step_scores, None
    problems = []
    for i, r in enumerate(rows):
        finals = None if orm_step_scores is None else [aggregate(s, "last") for s in orm_step_scores[i]]
        problems.append(Candidates([s["correct"] for s in r["samples"]], [vote_answer(s) for s in r["samples"]],
                                   None if step_scores is None else step_scores[i], finals))  # fmt: skip

    result: dict[str, Any] = {
        **result_head(policy, prm, data, path, len(rows)),
        **({} if orm_path is None else {"orm": orm_path}),
        "n": n,
        "ns": ns,
        "vote_aggregation": vote_aggregation,
        "tie_rule": (
            "PRM (and ORM) selectors: highest aggregated score, lowest sample index on ties; votes: required-form "
            "answers only, ties to the answer seen first, its first sample; no answer at all: sample 0"
        ),
    }
    result.update(best_of_n_metrics(problems, ns, vote_aggregation))
    result["sampling"] = {
        **{k: sampling[k] for k in ("temperature", "top_p", "max_new_tokens", "seed", "batch_size")},
        "reused_cache": reused,
        "seconds": sample_seconds,
        "samples": len(rows) * n,
    }
    result["scoring"] = {"batch_size": prm_batch_size, "seconds": score_seconds,
                         **({} if orm_seconds is None else {"orm_seconds": orm_seconds})}  # fmt: skip
    result["provenance"] = provenance(seeds={"sampling": seed})

    def sample_row(i: int, j: int) -> dict[str, Any]:
        """One sample of ``scores.jsonl``: its steps and the PRM's step scores with their aggregates (an ORM given
        as the PRM: its step values), and an ORM's final score (``orm``; a second model's values: ``orm_scores``)."""
        first = step_scores[i][j] if step_scores is not None else orm_step_scores[i][j]
        row: dict[str, Any] = {"steps": steps[i][j], "scores": list(first)}
        if step_scores is not None:
            row |= {a: aggregate(first, a) for a in AGGREGATIONS}
            if orm_step_scores is not None:
                row["orm_scores"] = list(orm_step_scores[i][j])
        if orm_step_scores is not None:
            row["orm"] = problems[i].orm_scores[j]
        return row

    def score_rows():
        for i, (r, c) in enumerate(zip(rows, problems, strict=True)):
            yield {
                "id": r["id"],
                "samples": [sample_row(i, j) for j in range(n)],
                "selected": selections(c, ns, vote_aggregation),
            }

    write_jsonl(out / SCORES, score_rows())
    pngs = {BON_PNG: best_of_n_png(result)}
    if orm_path is not None:
        from posttrainlab.report.orm_curves import process_vs_outcome_png

        pngs[PVO_PNG] = process_vs_outcome_png(result)
    for name, png in pngs.items():
        if png is not None:
            with atomic_path(out / name) as tmp:
                tmp.write_bytes(png)
    write_json(out / BON, result, ensure_ascii=False)
    return result


__all__ = ["read_problems", "result_head", "run"]
