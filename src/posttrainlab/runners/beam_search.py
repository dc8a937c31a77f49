"""``posttrain eval beam-search``: PRM-guided step-level beam search on arith-v1, beside best-of-N.

``run(policy, prm, data, out)`` searches every problem (default: all 500 ``test`` problems) with
``runners.beam_algorithm``'s beam search (search-and-learn's ``beam_search``: ``beams`` beams, ``proposals`` one-step
continuations each per round, the PRM's aggregated step score choosing the survivors), grades each
problem's answer (its best-scored finished beam) with the arith grader, and counts the tokens the search
generated, so that it can be set beside best-of-N **at an equal generated-token budget**: the defaults
(4 beams x 4 proposals, 48 tokens per solution, best-of-N's ``max_new_tokens``) sample about as many tokens
as best-of-N with N = 16. Given a best-of-N run (``best_of_n=DIR``), its tokens per problem are counted
from its ``samples.jsonl`` with the policy's tokenizer (:func:`best_of_n_tokens`) and written beside.

Outputs in ``out`` (a folder holding other files is refused, docs/design.md "Reliability conventions"),
each written atomically (``data.atomic``):

- ``outcomes.jsonl``: per problem ``id, category, correct, answer, parsed, outcome, response, score,
  tokens`` (the answer's grade and PRM score; ``tokens``: generated for the problem, pruned proposals
  included), ``rounds``, ``majority`` and ``prm_vote`` (best-of-N's votes over the finished beams: the
  grade of the beam each chose) and ``beams`` (every finished beam: response, step scores, score, why it
  finished, its tokens, its grade);
- ``beam.json`` last: the settings, accuracy overall and per category with 95% Wilson intervals
  (``eval.policy.policy_metrics``, ``eval.intervals``), the votes' accuracy, ``tokens_per_problem`` (mean)
  and ``best_of_n_tokens_per_problem`` when a best-of-N folder is given, finish reasons, timings.

Seeded and deterministic: beam k of round r of a problem samples with ``derive_seed(seed, id, r, k)``
(``runners.beam_algorithm``), and every choice breaks ties by index.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.run_layout import BEAM, OUTCOMES, SAMPLES, SAMPLING
from posttrainlab.runners.beam_algorithm import BackendProposer, Search, StepProposer, pick, search
from posttrainlab.runners.settings import BeamSettings

OUTPUTS = (OUTCOMES, BEAM)
#: the search's settings, in the order ``beam.json`` lists them (then ``no_answer_step``, then the sampling's)
SEARCH_KEYS = ("beams", "proposals", "max_steps", "max_new_tokens", "max_step_tokens", "aggregation", "distinct")


def best_of_n_samples(folder: str | os.PathLike, ids: Sequence[str]) -> tuple[int, list[list[str]]]:
    """``(max_new_tokens, texts)`` of a best-of-N run: its ``sampling.json``'s limit and, per problem whose id is in
    ``ids``, its samples' texts. Read without any model, so a folder that is no best-of-N output (a missing one, an
    ``eval policy`` folder, one without these problems) is refused before the search, not after it."""
    from posttrainlab.data.jsonl import iter_jsonl

    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such folder (--best-of-n: a posttrain eval best-of-n output)")
    samples, meta = folder / SAMPLES, folder / SAMPLING
    if not (samples.is_file() and meta.is_file()):
        raise BadInput(f"{folder}: no best-of-n run here (samples.jsonl and sampling.json; posttrain eval best-of-n)")
    try:
        limit = int(json.loads(meta.read_text(encoding="utf-8"))["max_new_tokens"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise BadInput(f"{meta}: not a best-of-n sampling.json (no max_new_tokens)") from None
    wanted, texts = set(ids), []
    for lineno, row in enumerate(iter_jsonl(samples), start=1):
        if row.get("id") not in wanted:
            continue
        got = row.get("samples")
        responses = [x.get("response") if isinstance(x, dict) else None for x in (got if isinstance(got, list) else [])]
        if not isinstance(got, list) or not all(isinstance(r, str) for r in responses):
            raise BadInput(f"{samples}:{lineno}: not a best-of-n row (a samples list of responses)")
        texts.append(responses)
    if not texts:
        raise BadInput(f"{samples}: none of the {len(wanted)} problems searched is in this best-of-n run")
    return limit, texts


def best_of_n_tokens(
    folder: str | os.PathLike,
    count_tokens: Callable[[str], int],
    ids: Sequence[str],
    samples: tuple[int, list[list[str]]] | None = None,
) -> dict:
    """Mean generated tokens per problem of a best-of-N run, over its problems whose id is in ``ids``.

    A sample's tokens are its text's tokens plus the eos that ended it, unless it ran to the run's
    ``max_new_tokens`` (its ``sampling.json``): ``min(tokens(text) + 1, max_new_tokens)``; a problem's
    tokens are the sum over its samples, as beam search counts every proposal it sampled. ``samples``: what
    ``best_of_n_samples`` read already.
    """
    limit, texts = samples if samples is not None else best_of_n_samples(folder, ids)
    per_problem = [sum(min(count_tokens(t) + 1, limit) for t in row) for row in texts]
    mean = sum(per_problem) / len(per_problem)
    n = len(texts[-1])
    return {"folder": str(folder), "problems": len(per_problem), "n": n, "max_new_tokens": limit, "mean": mean}


def _grade(grader, beam, answer) -> dict[str, Any]:
    g = grader.grade(beam.response, answer)
    return {"response": beam.response, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed}


def outcome_row(s: Search, record: dict, grader) -> dict[str, Any]:
    """The outcomes.jsonl row of a searched problem: its answer's grade, score and tokens, votes, beams."""
    from posttrainlab.eval.best_of_n import vote, vote_answer

    graded = [_grade(grader, b, record["answer"]) for b in s.finished]
    best = pick(s)
    answers = [vote_answer(g) for g in graded]
    votes = {"majority": vote(answers), "prm_vote": vote(answers, [b.score for b in s.finished])}
    row = {"id": s.id, "category": record["category"], "answer": record["answer"], **graded[best]}
    row.update(score=s.finished[best].score, tokens=s.tokens, rounds=s.rounds, candidates=s.candidates)
    for name, chosen in votes.items():
        chosen = best if chosen is None else chosen  # no answer in the required form: the PRM's choice
        row[name] = {"beam": chosen, "correct": graded[chosen]["correct"], "parsed": graded[chosen]["parsed"]}
    row["beams"] = [
        {**g, "scores": list(b.scores), "score": b.score, "finished": b.finished, "tokens": b.tokens}
        for b, g in zip(s.finished, graded, strict=True)
    ]
    return row


def beam_metrics(rows: Sequence[dict]) -> dict[str, Any]:
    """Accuracy of the PRM's choice (overall, per category, outcomes: ``policy_metrics``), of the votes, and
    the search's tokens, rounds and finish reasons."""
    from posttrainlab.eval.intervals import proportion
    from posttrainlab.eval.policy import policy_metrics

    n = len(rows)
    out = policy_metrics(list(rows))
    out["selectors"] = {"prm": out["accuracy"]}
    for name in ("majority", "prm_vote"):
        out["selectors"][name] = proportion(sum(bool(r[name]["correct"]) for r in rows), n)
    reasons: dict[str, int] = {}
    for r in rows:
        for b in r["beams"]:
            reasons[b["finished"]] = reasons.get(b["finished"], 0) + 1
    out["tokens_per_problem"] = sum(r["tokens"] for r in rows) / n
    out["rounds_per_problem"] = sum(r["rounds"] for r in rows) / n
    out["candidates_scored"] = sum(r["candidates"] for r in rows)
    out["finish_reasons"] = reasons
    return out


def run(
    policy: str | os.PathLike, prm: str | os.PathLike, data: str | os.PathLike, out_dir: str | os.PathLike,
    settings: BeamSettings | None = None, *, best_of_n: str | os.PathLike | None = None, progress: bool = True,
    backend=None, proposer: StepProposer | None = None, scorer=None,
) -> dict[str, Any]:  # fmt: skip
    """Search, grade and write the outputs into ``out_dir``; return ``beam.json``'s dict.

    ``settings``: ``runners.settings.BeamSettings`` (its defaults when ``None``); its ``split`` defaults to the one
    ``data`` names (``DIR:SPLIT``), else ``test``. ``best_of_n``: a best-of-N output folder whose tokens per problem
    are counted beside. ``backend`` (a ``TransformersBackend``) or ``proposer`` (a ``StepProposer``, with
    ``count_tokens`` for ``best_of_n``) replaces the policy loaded from ``policy``; ``scorer`` (with
    ``score_batch``) the PRM loaded from ``prm``.
    """
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.data.atomic import check_output_folder
    from posttrainlab.data.jsonl import write_json, write_jsonl
    from posttrainlab.generation.prompts import as_messages
    from posttrainlab.grading.arith import ArithGrader
    from posttrainlab.prm.spec import is_orm
    from posttrainlab.progress import progress_bar
    from posttrainlab.provenance import provenance
    from posttrainlab.runners.best_of_n import read_problems, result_head
    from posttrainlab.runners.prm_eval import check_models, load_scorer, score_items

    opts = BeamSettings() if settings is None else settings
    opts.check()
    out = check_output_folder(out_dir, OUTPUTS.__contains__, what="beam search output")
    check_models(policy, prm, load_policy=backend is None and proposer is None, load_prm=scorer is None)
    path, records = read_problems(str(data), opts.split, opts.limit)
    # a folder that is no best-of-N run is refused before the models load and the search runs, not after
    bon_samples = None if best_of_n is None else best_of_n_samples(best_of_n, [str(r["id"]) for r in records])

    if proposer is None:
        if backend is None:
            from posttrainlab.generation.transformers_backend import TransformersBackend

            backend = TransformersBackend.from_pretrained(
                policy, batch_size=opts.batch_size, progress=False, dtype=opts.dtype
            )
        proposer = BackendProposer(backend, temperature=opts.temperature, top_p=opts.top_p)
    if scorer is None:
        scorer = load_scorer(prm, dtype=opts.dtype, device=opts.device)
    if opts.aggregation != "last" and is_orm(scorer):  # an ORM's value of a prefix is its last step's
        raise BadInput(f"{prm}: an outcome reward model scores a prefix by its last step: use aggregation last, "
                       f"not {opts.aggregation}")  # fmt: skip
    # a PRM trained with arith-prm's explicit missing-answer step is asked about it on finished beams (beam_algorithm)
    no_answer_step = getattr(getattr(scorer, "spec", None), "no_answer_step", "")
    clock = {"sampling": 0.0, "scoring": 0.0}

    class _Timed:
        def propose(self, requests, n, max_new):
            start = time.perf_counter()
            try:
                return proposer.propose(requests, n, max_new)
            finally:
                clock["sampling"] += time.perf_counter() - start

    def score(items):
        start = time.perf_counter()
        got = score_items(scorer, items, opts.prm_batch_size, progress=False)
        clock["scoring"] += time.perf_counter() - start
        return got

    searches = [Search(str(r["id"]), as_messages(r["prompt"]), question_of(r["prompt"])) for r in records]
    bon = None
    if best_of_n is not None:  # before the search: a wrong folder fails at once
        count = getattr(proposer, "count_tokens", None)
        if count is None:
            raise BadInput("best_of_n: the step sampler cannot count tokens (it has no count_tokens)")
        bon = best_of_n_tokens(best_of_n, count, [s.id for s in searches], bon_samples)
    start = time.perf_counter()
    with progress_bar(progress) as bar:
        task = bar.add_task("beam search, round 1", total=len(searches))

        def on_round(round_: int, left: int) -> None:
            bar.update(task, completed=len(searches) - left, description=f"beam search, round {round_ + 2}")

        search(searches, opts, _Timed(), score, no_answer_step=no_answer_step, on_round=on_round)
    seconds = time.perf_counter() - start

    grader = ArithGrader()
    rows = [outcome_row(s, r, grader) for s, r in zip(searches, records, strict=True)]
    result: dict[str, Any] = {
        **result_head(policy, prm, data, path, len(rows)),
        "settings": {
            **{k: getattr(opts, k) for k in SEARCH_KEYS},
            "no_answer_step": no_answer_step,
            **{k: getattr(opts, k) for k in ("temperature", "top_p", "seed", "limit", "batch_size")},
        },
        "answer_rule": (
            "the finished beam with the highest score (aggregation of its step scores), ties to the one finished "
            "first; majority / prm_vote: best-of-n's votes over the finished beams, else the PRM's choice"
        ),
    }
    result.update(beam_metrics(rows))
    if bon is not None:
        result["best_of_n_tokens_per_problem"] = bon.pop("mean")
        result["best_of_n"] = bon
    result["seconds"] = {"search": seconds, **clock}
    result["provenance"] = provenance(seeds={"search": opts.seed})
    write_jsonl(out / OUTCOMES, rows)
    write_json(out / BEAM, result, ensure_ascii=False)
    return result


__all__ = ["OUTPUTS", "SEARCH_KEYS", "beam_metrics", "best_of_n_samples", "best_of_n_tokens", "outcome_row", "run"]
