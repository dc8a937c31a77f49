"""Rejection-sampling fine-tuning, or expert iteration (``posttrain train rft``): sample, keep the right answers, SFT.

    posttrain train rft --config configs/arith/rft.yaml model=runs/sft
    posttrain train rft --config configs/arith/rft.yaml rejection.filter=process rounds=2

One round (Yuan et al. 2023, "Scaling Relationship on Learning Mathematical Reasoning with Large Language Models";
expert iteration when repeated, Anthony et al. 2017):

1. ``rejection.k`` answers per prompt of ``dataset`` (arith-v1's RL prompts) are sampled from ``model`` and graded
   (``train.policy_samples``);
2. a sample is **accepted** when ``filter`` says so: ``answer``, the arith grader grades it correct; ``process``,
   that and every step exactly right too (``data.arith.steps.first_error`` is -1: each calculation line is the
   reference program's, in its order, with the right result, and the answer line is right). A correct answer reached
   through a wrong step (``352 - 6 = 288`` on an ``11 * 10 - 6`` problem) passes ``answer`` and fails ``process``;
   no other library can check steps exactly;
3. per prompt, each distinct accepted response (exact text) once, in sample order, at most ``per_prompt``, with
   the prompt's ``pass_rate`` (the share of its k samples whose answer is right); they are written to
   ``OUT/rft_samples.jsonl`` with their counts in ``OUT/rft_samples.json`` and reused by a resumed run;
   ``max_pass_rate`` < 1 then keeps only the prompts whose pass rate is at most it (``frontier``): 0.875 with k 8
   drops the prompts the policy solved every time, so the steps go to the problems it still gets wrong (the
   "SFT continued" control spends them on its SFT data, most of which the policy already solves);
4. ``round(sft_ratio x accepted)`` rows of ``sft_data`` (the original SFT data; drawn at random with ``optim.seed``,
   at most all of them) are mixed back in, and the model is fine-tuned on the mix as ``train.sft`` does (loss on the
   completion only), with the recipe's ``optim``.

``rounds`` R > 1: round r < R trains into ``OUT/round-<r>`` (a one-round RFT run of its own, from the model of round
r - 1, sampling with ``rejection.seed + r - 1``), the last round into ``OUT`` itself. A finished round, or run, of
the same recipe is reused, not trained again.
"""

from __future__ import annotations

import math
import random
from copy import deepcopy
from pathlib import Path

from posttrainlab.data.arith.steps import exact_trace
from posttrainlab.errors import BadInput
from posttrainlab.train.common import (
    RECIPE,
    SUMMARY,
    Start,
    check_run,
    checked_records,
    load_records,
    run_rows,
    run_trainer,
)
from posttrainlab.train.recipes import RejectionConfig, RFTRecipe

SAMPLES = "rft_samples"  # OUT/rft_samples.jsonl (the accepted samples) and OUT/rft_samples.json (settings, counts)


def config_class():
    """``trl.SFTConfig``: RFT fine-tunes with TRL's SFTTrainer (``posttrain train`` checks ``trainer_args`` on it)."""
    from posttrainlab.train.sft import config_class as sft_config

    return sft_config()


def round_folder(out: str | Path, r: int) -> Path:
    return Path(out) / f"round-{r}"


def problems_of(records: list[dict]) -> list:
    """Each record's arith-v1 problem, read back from its question (``data.arith.steps.parse_question``); ``BadInput``
    naming the first record that is not one: ``filter: process`` checks steps against the problem's program."""
    from posttrainlab.data.arith.steps import parse_question

    problems = [parse_question(r["prompt"]) for r in records]
    for r, p in zip(records, problems, strict=True):
        if p is None:
            raise BadInput(f"rejection.filter=process: record {r.get('id')!r} is not an arith-v1 problem (its steps "
                           "cannot be checked); use filter=answer")  # fmt: skip
    return problems


def accept(record: dict, samples: list[dict], cfg: RejectionConfig, problem=None) -> list[dict]:
    """The kept samples of one prompt (module docstring, steps 2 and 3), as SFT rows with their provenance.

    ``samples``: graded samples (``{"response", "correct", ...}``); ``problem`` (``filter: process``) the record's
    arith-v1 problem. Ids are ``<record id>-<sample index>``.
    """
    kept: list[dict] = []
    seen: set[str] = set()
    pass_rate = sum(s["correct"] for s in samples) / len(samples)
    for i, s in enumerate(samples):
        if cfg.per_prompt is not None and len(kept) >= cfg.per_prompt:
            break
        if not s["correct"] or s["response"] in seen:
            continue
        if cfg.filter == "process" and not exact_trace(problem, s["response"]):
            continue
        seen.add(s["response"])
        kept.append({"id": f"{record['id']}-{i}", "source_id": record["id"], "category": record.get("category"),
                     "prompt": record["prompt"], "response": s["response"],
                     "pass_rate": pass_rate})  # fmt: skip
    return kept


def frontier(rows: list[dict], max_pass_rate: float) -> list[dict]:
    """The kept ``rows`` of prompts whose pass rate is at most ``max_pass_rate`` (all of them at 1); ``BadInput`` when
    ``rows`` were kept by a version that did not record pass rates (``--overwrite`` samples again).

    >>> [r["id"] for r in frontier([{"id": "a", "pass_rate": 1.0}, {"id": "b", "pass_rate": 0.5}], 0.875)]
    ['b']
    """
    if max_pass_rate >= 1:
        return rows
    if any("pass_rate" not in r for r in rows):
        raise BadInput(f"max_pass_rate={max_pass_rate}: the kept samples in {SAMPLES}.jsonl carry no pass rate (kept "
                       "by an older version); run again with --overwrite to sample them again")  # fmt: skip
    return [r for r in rows if r["pass_rate"] <= max_pass_rate]


def rejection_rows(records: list[dict], graded: list[list[dict]], cfg: RejectionConfig) -> tuple[list[dict], dict]:
    """``(rows, counts)``: every prompt's kept samples, and what was sampled and kept (``rft_samples.json``).

    ``counts``: prompts, samples, their outcomes, ``correct`` (answer right), ``exact`` (answer and every step right;
    counted for both filters), ``kept`` and the prompts with a kept sample.
    """
    from posttrainlab.data.arith.steps import parse_question
    from posttrainlab.train.policy_samples import outcome_counts

    problems = problems_of(records) if cfg.filter == "process" else [parse_question(r["prompt"]) for r in records]
    rows: list[dict] = []
    with_kept = n_exact = 0
    for record, samples, problem in zip(records, graded, problems, strict=True):
        mine = accept(record, samples, cfg, problem)
        rows += mine
        with_kept += bool(mine)
        if problem is not None:
            n_exact += sum(s["correct"] and exact_trace(problem, s["response"]) for s in samples)
    counts = {
        "prompts": len(records),
        "samples": sum(len(s) for s in graded),
        "sample_outcomes": outcome_counts(graded),
        "correct": sum(s["correct"] for samples in graded for s in samples),
        "exact": n_exact,
        "kept": len(rows),
        "prompts_with_kept": with_kept,
        "filter": cfg.filter,
    }
    return rows, counts


def sft_share(kept: int, ratio: float, available: int) -> int:
    """How many SFT rows join ``kept`` accepted samples: ``floor(ratio * kept + 0.5)``, at most ``available``.

    >>> sft_share(7, 1.0, 100), sft_share(5, 0.5, 100), sft_share(10, 3.0, 12), sft_share(4, 0.0, 9)
    (7, 3, 12, 0)
    """
    return min(available, math.floor(ratio * kept + 0.5))


def mixed_rows(kept: list[dict], sft_records: list[dict], ratio: float, seed: int) -> list[dict]:
    """The fine-tuning set: the ``kept`` samples, then ``sft_share`` rows of ``sft_records`` drawn without replacement
    by ``random.Random(seed)`` (each ``{"prompt", "response"}``, ``source: sft``)."""
    n = sft_share(len(kept), ratio, len(sft_records))
    drawn = random.Random(seed).sample(range(len(sft_records)), n)
    mixed = [{**{k: v for k, v in row.items() if k != "pass_rate"}, "source": "policy"} for row in kept]
    for i in drawn:
        r = sft_records[i]
        mixed.append({"id": r.get("id"), "category": r.get("category"), "prompt": r["prompt"],
                      "response": r["response"], "source": "sft"})  # fmt: skip
    return mixed


def _train_round(recipe: RFTRecipe, start: Start, backend, recorded: RFTRecipe) -> Path:
    """One round into ``recipe.output_dir``: sample ``recipe.model`` (or reuse), keep, mix, fine-tune; ``recorded`` is
    the recipe ``recipe.yaml`` keeps (the whole run's, for the last round of several)."""
    from posttrainlab.train.policy_samples import Kept
    from posttrainlab.train.sft import build_trainer

    records = checked_records(recipe)
    sft_records = load_records(recipe.sft_data)
    if recipe.rejection.filter == "process":
        problems_of(records)  # before any model loads
    samples = Kept(SAMPLES, lambda rs, g: rejection_rows(rs, g, recipe.rejection))
    kept, counts = run_rows(recipe, start, recipe.rejection, samples, records, backend, recorded)
    kept = frontier(kept, recipe.max_pass_rate)
    if not kept:
        raise BadInput(
            f"rft: no sample kept from {counts['prompts']} prompts x {recipe.rejection.k} ({counts['correct']} "
            f"correct, {counts['exact']} with every step right; filter={recipe.rejection.filter}, max_pass_rate="
            f"{recipe.max_pass_rate}); try a larger rejection.k, a higher temperature, filter=answer or a higher "
            "max_pass_rate"
        )
    if recipe.max_pass_rate < 1:
        prompts = len({r["source_id"] for r in kept})
        print(f"rft: {len(kept)} samples of {prompts} prompts solved at most {recipe.max_pass_rate:.0%} of the time",
              flush=True)  # fmt: skip
    rows = mixed_rows(kept, sft_records, recipe.sft_ratio, recipe.optim.seed)
    print(f"rft: fine-tuning on {len(kept)} accepted samples + {len(rows) - len(kept)} rows of "
          f"{recipe.sft_data.split}", flush=True)  # fmt: skip
    trainer, n = build_trainer(recipe, rows)
    return run_trainer(trainer, recorded, "rft", n, start)


def _finished(folder: Path, start: Start) -> bool:
    """A run of this very recipe finished in ``folder``: nothing to train (a finished round is reused)."""
    return (folder / SUMMARY).is_file() and not start.overwrite and not start.changes


def round_recipe(recipe: RFTRecipe, r: int, model: str) -> RFTRecipe:
    """Round ``r`` of ``recipe``: one round from ``model``, sampling with ``rejection.seed + r - 1``, into
    ``OUT/round-<r>`` (the last round: ``OUT`` itself)."""
    one = deepcopy(recipe)
    one.model, one.rounds = model, 1
    one.rejection.seed += r - 1
    if r < recipe.rounds:
        one.output_dir = str(round_folder(recipe.output_dir, r))
    return one


def train_rft(recipe: RFTRecipe, existing: str = "check", backend=None) -> Path:
    """Check the run folder, the models and the data, then run every round (module docstring); the model is saved in
    ``recipe.output_dir``. ``backend`` (a ``SamplingBackend``) replaces the model sampled in every round."""
    from posttrainlab.config import save_config

    start = check_run(recipe, existing)
    out = Path(recipe.output_dir)
    if _finished(out, start):
        print(f"rft: {out} is finished with this recipe (--overwrite trains it again)", flush=True)
        return out
    checked_records(recipe)
    load_records(recipe.sft_data)
    if recipe.rounds > 1 and not (out / RECIPE).is_file():
        out.mkdir(parents=True, exist_ok=True)  # the round folders inside are this run's from now on
        save_config(recipe, out / RECIPE)
    model = recipe.model
    for r in range(1, recipe.rounds):
        one = round_recipe(recipe, r, model)
        how = "overwrite" if start.overwrite else existing
        sub = check_run(one, how)
        if _finished(Path(one.output_dir), sub):
            print(f"rft: round {r}/{recipe.rounds} is done ({one.output_dir})", flush=True)
        else:
            print(f"rft: round {r}/{recipe.rounds} from {model}", flush=True)
            _train_round(one, sub, backend, one)
        model = one.output_dir
    return _train_round(round_recipe(recipe, recipe.rounds, model), start, backend, recipe)


__all__ = ["accept", "frontier", "mixed_rows", "rejection_rows", "round_recipe", "sft_share", "train_rft"]
