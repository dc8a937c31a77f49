"""``posttrain eval best-of-n``: does a PRM pick the right solution out of n samples of a policy?

``run(policy, prm, data, out)`` samples ``n`` solutions per arith-v1 problem (default: all 500 ``test``
problems) once, grades each with the arith grader, scores each with the PRM (per-step P(correct),
steps = the solution's non-empty lines, question = the prompt's problem text, as in arith-prm), and for
every n' in ``ns`` selects one of the **first n'** samples per problem with each selector:

- ``prm_min`` / ``prm_last`` / ``prm_product`` / ``prm_mean``: the sample with the highest aggregated
  step score (minimum, last step, product, mean of its step scores);
- ``majority``: the most frequent parsed answer (self-consistency; Wang et al. 2023);
- ``prm_vote``: PRM-weighted vote: each answer's weight is the sum of its samples' aggregated scores,
  with the aggregation ``vote_aggregation`` (default ``min``), recorded in ``bon.json``;
- ``oracle`` (reference, not a selector): pass@n', whether any of the first n' samples is correct.

**Tie rules** (every selector is deterministic): a PRM selector takes the lowest sample index among
equal aggregated scores. A vote counts only samples whose answer is in the required form (grader
outcome ``correct`` or ``wrong_answer``); among answers with equal count (or equal summed weight,
compared exactly) it takes the answer that appears first, and the selected sample is that answer's
first sample. When no sample has an answer, sample 0 is selected (and it is wrong). A solution with no
non-empty line has no step: its aggregated score is 0.0, the lowest a probability can be.

A selected sample counts as correct when the arith grader grades it correct; accuracy at each n' is a
share of problems with a 95% Wilson interval (``eval.intervals``). Outputs in ``out``:

- ``samples.jsonl`` (the cache): per problem ``id, category, answer, prompt, samples`` (response and
  grade), with ``sampling.json`` beside it; a rerun whose sampling settings, data file (SHA-256) and
  policy weights (file names, sizes, modification times) match reuses them instead of sampling again;
- ``scores.jsonl``: per problem, each sample's steps, step scores and aggregated scores, and the index
  each selector chose at each n';
- ``bon.json`` (written last) and ``best_of_n.png`` (accuracy against n', one line per selector).

Written by hand: the selectors are a few lines each, and their tie rules must be exact and documented.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.aggregation import AGGREGATIONS, aggregate
from posttrainlab.eval.intervals import proportion
from posttrainlab.eval.within_problem import within_problem_by_aggregation

SELECTORS = tuple(f"prm_{a}" for a in AGGREGATIONS) + ("majority", "prm_vote")


def argmax_first(values: Sequence[float]) -> int:
    """Index of the largest value, the lowest index among ties.

    >>> argmax_first([0.2, 0.7, 0.7, 0.1])
    1
    """
    if not values:
        raise ValueError("no values to choose from")
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def vote(answers: Sequence[int | None], weights: Sequence[float] | None = None) -> int | None:
    """Index of the sample a (weighted) vote selects; ``None`` when no sample has an answer.

    Each non-``None`` answer collects 1 (or its sample's weight); the answer with the largest total
    wins, ties going to the answer that appears first; the selected sample is that answer's first one.

    >>> vote([5, 7, 7, 5, None])        # 5 and 7 tie with 2 votes: 5 appears first
    0
    >>> vote([5, 7, 7, 5], [0.1, 0.3, 0.2, 0.1])   # 7 weighs 0.5, 5 weighs 0.2
    1
    >>> vote([None, None]) is None
    True
    """
    if weights is not None and len(weights) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(weights)} weights")
    totals: dict[int, float] = {}
    first: dict[int, int] = {}
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        totals[answer] = totals.get(answer, 0.0) + (1.0 if weights is None else weights[i])
        first.setdefault(answer, i)
    if not totals:
        return None
    winner = max(totals, key=lambda a: (totals[a], -first[a]))
    return first[winner]


@dataclass(frozen=True)
class Candidates:
    """The samples of one problem: graded correct or not, parsed answer (``None``: none in the required
    form) and per-step PRM scores, in sample order."""

    correct: Sequence[bool]
    answers: Sequence[int | None]
    step_scores: Sequence[Sequence[float]]

    def __post_init__(self):
        if not len(self.correct) == len(self.answers) == len(self.step_scores):
            raise ValueError("correct, answers and step_scores must have one entry per sample")


def select(c: Candidates, n: int, selector: str, vote_aggregation: str = "min") -> int:
    """Index (into the first ``n`` samples) of the one ``selector`` picks (tie rules: module docstring).

    >>> c = Candidates([False, True, True], [4, 5, 5], [[0.9, 0.2], [0.6, 0.7], [0.5]])
    >>> [select(c, 3, s) for s in SELECTORS]   # product: 0.5 beats 0.6 * 0.7 = 0.42
    [1, 1, 2, 1, 1, 1]
    >>> select(c, 1, "majority")
    0
    """
    if not 1 <= n <= len(c.correct):
        raise ValueError(f"n={n}: need 1 <= n <= {len(c.correct)} samples")
    if selector.startswith("prm_") and selector[4:] in AGGREGATIONS:
        return argmax_first([aggregate(s, selector[4:]) for s in c.step_scores[:n]])
    if selector == "majority":
        chosen = vote(c.answers[:n])
    elif selector == "prm_vote":
        chosen = vote(c.answers[:n], [aggregate(s, vote_aggregation) for s in c.step_scores[:n]])
    else:
        raise ValueError(f"unknown selector {selector!r}; choose one of {', '.join(SELECTORS)}")
    return 0 if chosen is None else chosen


def selections(c: Candidates, ns: Sequence[int], vote_aggregation: str = "min") -> dict[str, dict[str, int]]:
    """``{selector: {str(n): chosen index}}`` for one problem."""
    return {s: {str(n): select(c, n, s, vote_aggregation) for n in ns} for s in SELECTORS}


def best_of_n_metrics(
    problems: Sequence[Candidates], ns: Sequence[int], vote_aggregation: str = "min"
) -> dict[str, Any]:
    """Accuracy of every selector and the oracle at every n, each ``{"value", "ci95", "correct", "n"}``.

    >>> a = Candidates([False, True], [4, 5], [[0.9], [0.4]])
    >>> b = Candidates([True, True], [3, 3], [[0.2], [0.8]])
    >>> m = best_of_n_metrics([a, b], [1, 2])
    >>> m["selectors"]["prm_min"]["2"]["value"], m["oracle"]["1"]["value"], m["oracle"]["2"]["value"]
    (0.5, 0.5, 1.0)
    """
    if not problems:
        raise ValueError("no problems")
    picks = [selections(c, ns, vote_aggregation) for c in problems]
    out: dict[str, Any] = {"selectors": {}, "oracle": {}}
    for s in SELECTORS:
        out["selectors"][s] = {
            str(n): proportion(
                sum(bool(c.correct[p[s][str(n)]]) for c, p in zip(problems, picks, strict=True)), len(problems)
            )
            for n in ns
        }
    for n in ns:
        out["oracle"][str(n)] = proportion(sum(any(c.correct[:n]) for c in problems), len(problems))
    n_samples = sum(len(c.correct) for c in problems)
    out["sample_accuracy"] = proportion(sum(sum(map(bool, c.correct)) for c in problems), n_samples)
    out["within_problem"] = within_problem_by_aggregation(  # right vs wrong samples of one problem, all N of them
        [i for i, c in enumerate(problems) for _ in c.correct],
        [bool(x) for c in problems for x in c.correct],
        [s for c in problems for s in c.step_scores],
    )
    return out


def parse_ns(text: str | Sequence[int] | None, n: int) -> list[int]:
    """The n values to report: given (comma-separated or a list), else the powers of 2 up to ``n`` and ``n``.

    >>> parse_ns("1,2,4", 8), parse_ns(None, 12)
    ([1, 2, 4], [1, 2, 4, 8, 12])
    """
    if text is None:
        ns = [2**i for i in range(n.bit_length()) if 2**i <= n] + [n]
    elif isinstance(text, str):
        try:
            ns = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise BadInput(f"--ns {text}: expected comma-separated integers, e.g. 1,2,4,8,16") from None
    else:
        ns = [int(x) for x in text]
    ns = sorted(set(ns))
    if not ns or ns[0] < 1 or ns[-1] > n:
        raise BadInput(f"ns={ns}: every n must be between 1 and the number of samples {n}")
    return ns


# ---- the run ------------------------------------------------------------------------------------------


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

    meta, samples = out / "sampling.json", out / "samples.jsonl"
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


def _sample(backend, records: list[dict], settings: dict[str, Any]) -> list[dict]:
    from posttrainlab.generation.sampling import sample_answers
    from posttrainlab.grading.arith import ArithGrader

    grader = ArithGrader()
    completions = sample_answers(
        backend,
        records,
        settings["n"],
        f"best-of-N: sampling N={settings['n']}",
        temperature=settings["temperature"],
        top_p=settings["top_p"],
        max_new_tokens=settings["max_new_tokens"],
        seed=settings["seed"],
    )
    rows = []
    for r, texts in zip(records, completions, strict=True):
        grades = [grader.grade(t, r["answer"]) for t in texts]
        samples = [
            {"response": t, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed}
            for t, g in zip(texts, grades, strict=True)
        ]
        rows.append(
            {"id": r["id"], "category": r["category"], "answer": r["answer"], "prompt": r["prompt"], "samples": samples}
        )
    return rows


def vote_answer(sample: dict) -> int | None:
    """The answer a graded sample votes for: its parsed answer when in the required form, else ``None``."""
    return sample["parsed"] if sample["outcome"] in ("correct", "wrong_answer") else None


def run(
    policy: str | os.PathLike,
    prm: str | os.PathLike,
    data: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    n: int = 16,
    ns: Sequence[int] | str | None = None,
    temperature: float = 0.8,
    top_p: float = 1.0,
    max_new_tokens: int = 48,
    seed: int = 0,
    limit: int | None = None,
    split: str | None = None,
    batch_size: int = 32,
    prm_batch_size: int = 16,
    vote_aggregation: str = "min",
    dtype: str = "float32",
    device: str | None = None,
    progress: bool = True,
    backend=None,
    scorer=None,
) -> dict[str, Any]:
    """Sample (or reuse), grade, score, select; write the outputs into ``out_dir`` and return ``bon.json``.

    ``backend`` (a ``SamplingBackend``) replaces the policy loaded from ``policy``; ``scorer`` (with
    ``score_batch``) the PRM loaded from ``prm``. ``ns`` defaults to the powers of 2 up to ``n``, and
    ``n`` (1, 2, 4, 8, 16 for the default ``n = 16``).
    """
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.data.arith.prm_labels import with_no_answer_step
    from posttrainlab.data.arith.steps import split_steps
    from posttrainlab.data.atomic import atomic_path, check_writable, write_text
    from posttrainlab.data.jsonl import write_jsonl
    from posttrainlab.data.manifest import sha256_file
    from posttrainlab.eval.prm_eval import check_prm, is_missing_local, load_scorer, score_items
    from posttrainlab.eval.prm_plots import best_of_n_png
    from posttrainlab.generation.transformers_backend import check_sampling
    from posttrainlab.provenance import provenance

    if n < 1:
        raise BadInput(f"n={n}: need at least one sample per problem")
    ns = parse_ns(ns, n)
    if temperature <= 0:
        raise BadInput(f"temperature={temperature}: best-of-n needs temperature > 0 (greedy gives n equal samples)")
    check_sampling(n, temperature, top_p, max_new_tokens)
    if vote_aggregation not in AGGREGATIONS:
        raise BadInput(f"vote aggregation {vote_aggregation!r}: choose one of {', '.join(AGGREGATIONS)}")
    if limit is not None and limit < 1:
        raise BadInput(f"limit={limit}: must be at least 1")
    out = check_writable(out_dir)  # a file in the path, an unwritable place: before the sampling, not after
    if backend is None and is_missing_local(policy):
        raise BadInput(f"{policy}: no such model folder (policy)")
    if scorer is None:
        check_prm(prm)  # missing, or not a PRM (a policy folder): refused before the sampling it would waste
    path, records = read_problems(str(data), split, limit)
    settings = {
        "policy": str(policy),
        "policy_weights": _weights_stamp(str(policy)) if backend is None else getattr(backend, "name", "custom"),
        "data": str(path),
        "data_sha256": sha256_file(path),
        "limit": limit,
        "n": n,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "batch_size": batch_size,
    }

    rows = _read_cache(out, settings, records)
    reused = rows is not None
    sample_seconds = 0.0
    if rows is None:
        if backend is None:
            from posttrainlab.generation.transformers_backend import TransformersBackend

            backend = TransformersBackend.from_pretrained(policy, batch_size=batch_size, progress=progress, dtype=dtype)
        start = time.perf_counter()
        rows = _sample(backend, records, settings)
        sample_seconds = time.perf_counter() - start
        write_jsonl(out / "samples.jsonl", rows)
        write_text(out / "sampling.json", json.dumps(settings, indent=2) + "\n")

    if scorer is None:
        scorer = load_scorer(prm, dtype=dtype, device=device)
    marker = getattr(getattr(scorer, "spec", None), "no_answer_step", "")  # a PRM trained with it gets it too
    steps = [[with_no_answer_step(split_steps(s["response"]), marker) for s in r["samples"]] for r in rows]
    items = [(question_of(r["prompt"]), st) for r, per in zip(rows, steps, strict=True) for st in per]
    start = time.perf_counter()
    flat = score_items(scorer, items, prm_batch_size, progress=progress, what="PRM scoring")
    score_seconds = time.perf_counter() - start
    problems = []
    for i, r in enumerate(rows):
        step_scores = flat[i * n : (i + 1) * n]
        problems.append(
            Candidates([s["correct"] for s in r["samples"]], [vote_answer(s) for s in r["samples"]], step_scores)
        )

    result: dict[str, Any] = {
        "policy": str(policy),
        "prm": str(prm),
        "data": str(data),
        "split": path.stem,
        "problems": len(rows),
        "n": n,
        "ns": ns,
        "vote_aggregation": vote_aggregation,
        "tie_rule": (
            "PRM selectors: highest aggregated score, lowest sample index on ties; votes: required-form answers "
            "only, ties to the answer seen first, its first sample; no answer at all: sample 0"
        ),
    }
    result.update(best_of_n_metrics(problems, ns, vote_aggregation))
    result["sampling"] = {
        **{k: settings[k] for k in ("temperature", "top_p", "max_new_tokens", "seed", "batch_size")},
        "reused_cache": reused,
        "seconds": sample_seconds,
        "samples": len(rows) * n,
    }
    result["scoring"] = {"batch_size": prm_batch_size, "seconds": score_seconds}
    result["provenance"] = provenance(seeds={"sampling": seed})

    def score_rows():
        for r, c, per in zip(rows, problems, steps, strict=True):
            yield {
                "id": r["id"],
                "samples": [
                    {"steps": st, "scores": list(sc), **{a: aggregate(sc, a) for a in AGGREGATIONS}}
                    for st, sc in zip(per, c.step_scores, strict=True)
                ],
                "selected": selections(c, ns, vote_aggregation),
            }

    write_jsonl(out / "scores.jsonl", score_rows())
    png = best_of_n_png(result)
    if png is not None:
        with atomic_path(out / "best_of_n.png") as tmp:
            tmp.write_bytes(png)
    write_text(out / "bon.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    return result


__all__ = [
    "AGGREGATIONS",
    "SELECTORS",
    "Candidates",
    "aggregate",
    "argmax_first",
    "best_of_n_metrics",
    "parse_ns",
    "read_problems",
    "run",
    "select",
    "selections",
    "vote",
    "vote_answer",
]
