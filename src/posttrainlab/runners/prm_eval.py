"""``posttrain eval prm``: score a step-labelled corpus with a PRM and report how well it finds the errors.

``run(model, data, out)`` reads the corpus, scores every solution once with
``posttrainlab.prm.PRM.score_batch`` (per-step P(correct)), computes ``eval.prm_metrics.prm_metrics``
and writes into ``out``:

- ``scores.jsonl``: one row per solution: ``index`` (and ``id`` when the input has one), ``question``,
  ``steps``, ``labels``, ``scores``, ``gold_first_error``, ``predicted_first_error`` (at the threshold);
- ``reliability.png``: the reliability diagram of the step scores;
- ``metrics.json`` last (its presence marks a finished run); each file is written atomically.

**Inputs.** Any step-level format that holds step labels (``data.formats.STEP_FORMATS``), told apart
by the first row's keys or named with ``fmt``; a local ``.jsonl``/``.json``/``.parquet`` file, an
``hf://`` path, or an arith-prm folder (``DIR`` = its ``heldout`` split, ``DIR:SPLIT`` another;
checksums checked). Each row is read by its format's ``to_steps`` into a ``StepRow`` (the reader PRM
training uses too, without its cut). Which steps are scored:

- ``step`` (and arith-prm): the steps of the row (the view already ends at the first error);
- ``math-shepherd`` (list form or ``ки`` text): every step with its label (a correct step may follow a
  wrong one: Math-Shepherd keeps them all);
- ``processbench``: the steps up to and including ``label`` (the later ones carry no label); flat or
  PRM800K ``ratings``: every step, -1 = wrong, 0 and +1 = correct (``ratings_to_labels``);
- ``span`` (SHARP): every piece of ``model_answer``, 0 where a ``<HAL>`` span touches it
  (``span_piece_labels``; the step view would cut after the first 0);
- ``policy-samples``: what ``posttrain eval policy`` wrote (its ``--out`` folder, or the ``samples.jsonl`` in it)
  on arith-v1: each problem's sampled solutions (``--samples K``), or its greedy response when it was not sampled,
  every line labelled exactly (``every_step_labels``; a solution without an answer line ends with the explicit
  ``(no answer)`` step labelled 0, as the quickstart's PRM is trained), each row with the problem's ``id``: the PRM on
  a policy's own samples, e.g. an RL policy's, to see whether it learned errors the PRM passes
  (docs/process-vs-outcome.md). ``limit`` counts problems.

A causal PRM's score at step k depends only on the steps up to k, so scoring a solution cut after its
first error gives the same scores there as scoring it whole. Faults are ``BadInput`` naming the file and
row: an unknown format, a bad row, a PRM that returns a wrong number of scores or one outside [0, 1].

Written by hand: it is the glue between the format readers, the PRM scorer and the metric functions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from posttrainlab.data.formats.registry import FORMATS, STEP_FORMATS
from posttrainlab.data.formats.step import StepRow
from posttrainlab.errors import BadInput
from posttrainlab.eval.step_metrics import (
    first_error_from_labels,
    predicted_first_error,
)
from posttrainlab.progress import progress_bar
from posttrainlab.run_layout import METRICS, RELIABILITY_PNG, SCORES
from posttrainlab.runners.settings import PRMEvalSettings

ARITH_PRM_DEFAULT_SPLIT = "heldout"
#: an ``eval policy`` output read as step rows (module docstring); beside ``STEP_FORMATS``
POLICY_SAMPLES = "policy-samples"
EVAL_FORMATS = (*STEP_FORMATS, POLICY_SAMPLES)
#: Solutions per ``score_batch`` call; the progress bar advances once per chunk.
CHUNK = 256


class StepScorer(Protocol):
    """What ``posttrainlab.prm.PRM`` offers: per-step P(correct), one list per solution."""

    def score(self, question: str, steps: Sequence[str]) -> list[float]: ...

    def score_batch(self, items: Sequence[tuple[str, Sequence[str]]], batch_size: int = ...) -> list[list[float]]: ...


def detect_format(row: dict[str, Any]) -> str | None:
    """The step-level format a row is in, from its keys; ``None`` when none fits.

    >>> detect_format({"question": "q", "steps": ["a"], "step_labels": [1]})
    'step'
    >>> detect_format({"prompt": "q", "completions": ["a"], "labels": [True]}), detect_format({"problem": "p"})
    ('math-shepherd', 'processbench')
    """
    if not isinstance(row, dict):
        return None
    if "step_labels" in row:
        return "step"
    if "hallucination_annotation" in row:
        return "span"
    if "completions" in row or ("input" in row and isinstance(row.get("label"), str)):
        return "math-shepherd"
    if "problem" in row or "ratings" in row or isinstance(row.get("label"), dict):
        return "processbench"
    if {"prompt", "answer", "response"} <= row.keys():
        return POLICY_SAMPLES
    return None


def policy_sample_rows(row: dict[str, Any]) -> list[StepRow]:
    """One ``eval policy`` row as step rows, one per solution (module docstring); ``ValueError`` when its prompt is no
    arith-v1 problem. Solutions without a line are left out (nothing to score).

    >>> rows = policy_sample_rows({"id": "t-1", "prompt": "What is 156 * 7?", "answer": 1092, "response": "x",
    ...                            "samples": [{"response": "156 * 8 = 1248\\nAnswer: 1248"}, {"response": ""}]})
    >>> [(r.steps, r.labels, r.id) for r in rows]
    [(['156 * 8 = 1248', 'Answer: 1248'], [0, 0], 't-1')]
    """
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.data.arith.prm_labels import every_step_labels
    from posttrainlab.data.arith.steps import parse_question, split_steps

    problem = parse_question(str(row["prompt"]))
    if problem is None:
        raise ValueError("its prompt is no arith-v1 problem, so its steps have no exact labels")
    question, out = question_of(str(row["prompt"])), []
    for sample in row.get("samples") or [{"response": row["response"]}]:
        steps = split_steps(str(sample["response"]))
        if steps:
            steps, labels = every_step_labels(problem, steps, "explicit")
            out.append(StepRow(question=question, steps=steps, labels=labels, id=row.get("id")))
    return out


def to_eval_row(row: dict[str, Any], fmt: str) -> StepRow:
    """The steps to score and their labels (the format's ``to_steps``) and the row's ``id``; ``ValueError`` if bad.

    >>> to_eval_row({"problem": "p", "steps": ["a", "b", "c"], "label": 1}, "processbench")
    StepRow(question='p', steps=['a', 'b'], labels=[1, 0], spans=None, id=None)
    >>> to_eval_row({"prompt": "q", "completions": ["a", "b"], "labels": [False, True]}, "math-shepherd").labels
    [0, 1]
    """
    if fmt not in STEP_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(STEP_FORMATS)}")
    steps = FORMATS[fmt].to_steps(row)
    if isinstance(row, dict) and isinstance(row.get("id"), str | int):
        steps = replace(steps, id=row["id"])
    return steps


def _source(data: str) -> tuple[str, str | None]:
    """The file (or ``hf://`` path) to read, and the arith-prm split when ``data`` names one; an ``eval policy``
    folder (``samples.jsonl`` and no ``manifest.json``) is its ``samples.jsonl``."""
    from posttrainlab.data.loading import has_manifest, row_source
    from posttrainlab.run_layout import SAMPLES

    folder = Path(str(data))
    if folder.is_dir() and (folder / SAMPLES).is_file() and not has_manifest(folder):
        return str(folder / SAMPLES), None

    found = row_source(str(data), config="step", default_split=ARITH_PRM_DEFAULT_SPLIT)
    return found.path, found.split


def read_eval_rows(data: str, fmt: str | None = None, limit: int | None = None) -> tuple[list[StepRow], str, str]:
    """``(rows, format, source)``: the first ``limit`` rows of ``data`` ready to score."""
    from posttrainlab.data.formats.readers import iter_rows

    if fmt is not None and fmt not in EVAL_FORMATS:
        raise BadInput(f"--format {fmt}: choose one of {', '.join(EVAL_FORMATS)} (mc-value holds no step labels)")
    source, _ = _source(data)
    rows: list[StepRow] = []
    for index, raw in enumerate(iter_rows(source)):
        if limit is not None and index >= limit:
            break
        if fmt is None:
            fmt = detect_format(raw)
            if fmt is None:
                keys = ", ".join(sorted(raw)) if isinstance(raw, dict) else type(raw).__name__
                raise BadInput(f"{source}: row 0 ({keys}) is in no step-level format; pass --format")
        try:
            rows.extend(policy_sample_rows(raw) if fmt == POLICY_SAMPLES else [to_eval_row(raw, fmt)])
        except (ValueError, KeyError, TypeError) as e:
            raise BadInput(f"{source}: row {index}: {e} (format {fmt})") from None
    if not rows:
        raise BadInput(f"{source}: no rows to evaluate")
    return rows, fmt or "step", source


def load_scorer(model: str | os.PathLike, *, dtype: str = "float32", device: str | None = None) -> StepScorer:
    """``posttrainlab.prm.PRM.from_pretrained(model)``; a missing local folder is ``BadInput`` at once.
    ``baseline:POLICY``: the policy's own verifier (``prm.baseline``)."""
    from posttrainlab.models.loading import check_folder, is_local
    from posttrainlab.prm.baseline import PolicyVerifier, baseline_policy, is_baseline

    path = baseline_policy(model) if is_baseline(model) else str(model)
    if is_local(path):
        check_folder(path)
    if is_baseline(model):
        return PolicyVerifier.from_pretrained(path, dtype=dtype, device=device)
    from posttrainlab.prm import PRM

    return PRM.from_pretrained(str(model), dtype=dtype, device=device)


def score_items(
    scorer: StepScorer,
    items: Sequence[tuple[str, Sequence[str]]],
    batch_size: int,
    *,
    progress: bool = True,
    what: str = "scoring",
) -> list[list[float]]:
    """Step scores of every ``(question, steps)``, checked: one float in [0, 1] per step.

    Items without steps are not sent to the scorer and get ``[]``. Repeated items (the same question
    and steps: best-of-N samples of one problem often coincide, about half of them at N = 16 on the
    tiny policy) are scored once and share their scores.
    """
    if batch_size < 1:
        raise BadInput(f"batch_size={batch_size}: must be at least 1")
    scores: list[list[float]] = [[] for _ in items]
    first: dict[tuple[str, tuple[str, ...]], int] = {}
    repeats: list[tuple[int, int]] = []  # (item, the earlier item it repeats)
    todo = []
    for i, (question, steps) in enumerate(items):
        if not steps:
            continue
        key = (question, tuple(steps))
        if key in first:
            repeats.append((i, first[key]))
        else:
            first[key] = i
            todo.append(i)
    with progress_bar(progress) as bar:
        task = bar.add_task(what, total=len(todo))
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start : start + CHUNK]
            got = scorer.score_batch([(items[i][0], list(items[i][1])) for i in chunk], batch_size=batch_size)
            if len(got) != len(chunk):
                raise BadInput(f"the PRM returned {len(got)} score lists for {len(chunk)} solutions")
            for i, s in zip(chunk, got, strict=True):
                s = [float(x) for x in s]
                if len(s) != len(items[i][1]):
                    raise BadInput(f"solution {i}: the PRM returned {len(s)} scores for {len(items[i][1])} steps")
                if any(not 0.0 <= x <= 1.0 for x in s):
                    raise BadInput(f"solution {i}: the PRM returned a score outside [0, 1]: {s}")
                scores[i] = s
            bar.advance(task, len(chunk))
    for i, j in repeats:
        scores[i] = list(scores[j])
    return scores


def score_rows(
    rows: Sequence[StepRow], scorer: StepScorer, batch_size: int = 16, progress: bool = True
) -> list[list[float]]:
    """Step scores of every row (``score_items`` over ``(question, steps)``)."""
    return score_items(scorer, [(r.question, r.steps) for r in rows], batch_size, progress=progress)


def score_records(rows: Sequence[StepRow], scores: Sequence[Sequence[float]], threshold: float) -> Iterable[dict]:
    """The ``scores.jsonl`` rows."""
    for i, (row, s) in enumerate(zip(rows, scores, strict=True)):
        yield {
            "index": i,
            **({} if row.id is None else {"id": row.id}),
            "question": row.question,
            "steps": row.steps,
            "labels": row.labels,
            "scores": list(s),
            "gold_first_error": first_error_from_labels(row.labels),
            "predicted_first_error": predicted_first_error(s, threshold),
        }


def run(
    model: str | os.PathLike,
    data: str | os.PathLike,
    out_dir: str | os.PathLike,
    settings: PRMEvalSettings | None = None,
    *,
    progress: bool = True,
    scorer: StepScorer | None = None,
) -> dict[str, Any]:
    """Score ``data`` with the PRM at ``model`` and write the outputs into ``out_dir``; return the metrics.

    ``settings``: ``runners.settings.PRMEvalSettings`` (its defaults when ``None``). ``scorer`` (anything with
    ``score_batch``) replaces the PRM loaded from ``model``.
    """
    from posttrainlab.data.atomic import check_writable
    from posttrainlab.data.jsonl import write_json, write_jsonl
    from posttrainlab.eval.prm_metrics import prm_metrics
    from posttrainlab.eval.within_problem import by_problem_id
    from posttrainlab.provenance import provenance
    from posttrainlab.runners.prm_plots import reliability_png

    opts = PRMEvalSettings() if settings is None else settings
    opts.check()
    threshold, batch_size = opts.threshold, opts.batch_size
    out = check_writable(out_dir)  # a file in the path, an unwritable place: refused before the scoring
    if scorer is None and is_missing_local(model):
        raise BadInput(f"{model}: no such model folder")
    rows, fmt, source = read_eval_rows(str(data), opts.format, opts.limit)
    if scorer is None:
        scorer = load_scorer(model, dtype=opts.dtype, device=opts.device)
    start = time.perf_counter()
    scores = score_rows(rows, scorer, batch_size, progress)
    seconds = time.perf_counter() - start
    try:
        metrics = prm_metrics([r.labels for r in rows], scores, threshold=threshold, sweep=opts.sweep)
    except ValueError as e:
        raise BadInput(f"{source}: {e}") from None
    result: dict[str, Any] = {"model": str(model), "data": str(data), "source": source, "format": fmt}
    result.update(metrics)
    # right vs wrong solutions of the same problem (rows grouped by id; null when no id repeats)
    result["within_problem"] = by_problem_id([r.id for r in rows], [r.labels for r in rows], scores)
    result["scoring"] = {
        "batch_size": batch_size,
        "seconds": seconds,
        "solutions_per_s": len(rows) / seconds if seconds > 0 else None,
    }
    result["provenance"] = provenance()
    write_jsonl(out / SCORES, score_records(rows, scores, threshold))
    png = reliability_png(metrics["calibration"])
    if png is not None:
        from posttrainlab.data.atomic import atomic_path

        with atomic_path(out / RELIABILITY_PNG) as tmp:
            tmp.write_bytes(png)
    write_json(out / METRICS, result, ensure_ascii=False)
    return result


def is_missing_local(model: str | os.PathLike) -> bool:
    from posttrainlab.models.loading import is_local
    from posttrainlab.prm.baseline import baseline_policy, is_baseline

    path = baseline_policy(model) if is_baseline(model) else str(model)
    return is_local(path) and not Path(path).expanduser().is_dir()


def check_prm(model: str | os.PathLike) -> None:
    """``BadInput`` now when the local ``model`` is missing or holds no PRM checkpoint, read from its JSON files
    without torch (``prm.spec.check_prm_folder``); a Hub id is left to ``load_scorer``. Best-of-N and beam
    search call it before they sample, so a policy folder given as the PRM costs no sampling."""
    from posttrainlab.models.loading import is_local
    from posttrainlab.prm.baseline import is_baseline
    from posttrainlab.prm.spec import check_prm_folder

    if is_missing_local(model):
        raise BadInput(f"{model}: no such model folder (PRM)")
    if is_local(str(model)) and not is_baseline(model):  # baseline:POLICY scores with a policy: no PRM to check
        check_prm_folder(model)


def check_models(policy: str | os.PathLike, prm: str | os.PathLike, *, load_policy: bool, load_prm: bool) -> None:
    """What best-of-N and beam search refuse before any model loads: a missing policy folder (when the policy is to be
    loaded) and a PRM that is missing or no PRM (``check_prm``; when it is to be loaded), so neither costs sampling."""
    if load_policy and is_missing_local(policy):
        raise BadInput(f"{policy}: no such model folder (policy)")
    if load_prm:
        check_prm(prm)


__all__ = ["EVAL_FORMATS", "POLICY_SAMPLES", "StepScorer", "check_models", "detect_format", "policy_sample_rows",
           "read_eval_rows", "run", "score_items", "to_eval_row"]  # fmt: skip
