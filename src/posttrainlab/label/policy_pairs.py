"""On-policy DPO pairs (``preference.source: policy``): sample the policy, grade, pair correct with incorrect.

arith-v1's ``preference_train`` rejects are synthetic near-misses the policy would rarely write (off-policy); DPO
on them lost accuracy (issue #15). Here each prompt gets ``k`` answers sampled from the starting policy, graded
with the arith grader (``grade.correct``; a malformed or missing answer is incorrect and makes a rejected answer
too, its outcome kept), and pairs formed by ``pair_answers``:

- the distinct correct answers and the distinct incorrect ones, each in sample order; the i-th correct is paired
  with the i-th incorrect, at most ``pairs_per_prompt`` pairs;
- no correct answer: with ``chosen_fallback: reference`` the record's own ``chosen`` (arith-v1's reference
  solution) stands in for every chosen slot; with ``none`` the prompt gives no pair;
- no incorrect answer: no pair (a synthetic reject would bring back the off-policy pair this replaces).

``preference.source: step`` samples and grades the same way and pairs each wrong line with the reference's line
after the sample's own right prefix (Step-DPO; ``label.step_pairs``): those rows also carry ``prefix``, ``step`` and
``count``, and ``chosen_fallback`` does not apply.

``policy_pairs`` (and ``train.dpo``, through ``train.common.run_rows``) samples, pairs and writes them the
way every training run keeps its policy samples (``train.policy_samples.sampled_rows``, with ``pair_rows``):
``preference_pairs.jsonl`` (one pair a line: ``id, source_id, category, prompt, chosen, rejected, chosen_source,
rejected_outcome``) and ``preference_pairs.json`` (``settings``, ``counts``, timing) in the run's output_dir, both
atomically and the summary last (docs/design.md "Reliability conventions"), reused instead of sampling again when
the summary's ``settings`` equal this run's (a resumed run). ``pairs/`` then holds both as a dataset folder
(``train.jsonl``, ``preference_pairs.json``: hard links) with its card (``data.cards.kinds.publish_pairs``), since
the run folder's own ``README.md`` is the trainer's model card.

Written by hand: the pairing rule is a few lines whose order and fallbacks must be exact and documented.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.label.step_pairs import check_step_records, step_pair_counts, step_pairs

SOURCES = ("synthetic", "policy", "step")
FALLBACKS = ("reference", "none")
NAME = "preference_pairs"
PAIRS = f"{NAME}.jsonl"
SUMMARY = f"{NAME}.json"


def check_preference(cfg) -> None:
    """``BadInput`` (one line) for a ``PreferenceConfig`` (``train.recipes``) out of range; before any model loads."""
    from posttrainlab.generation.sampling import check_sampling

    if cfg.source not in SOURCES:
        raise BadInput(f"preference.source={cfg.source!r}: choose one of {', '.join(SOURCES)}")
    if cfg.source == "synthetic":
        return
    if cfg.source == "policy" and cfg.k < 2:
        raise BadInput(f"preference.k={cfg.k}: need at least 2 samples per prompt (a correct and an incorrect one)")
    if cfg.k < 1:
        raise BadInput(f"preference.k={cfg.k}: need at least 1 sample per prompt")
    if cfg.temperature <= 0:
        raise BadInput(f"preference.temperature={cfg.temperature}: must be > 0 (greedy gives k equal answers)")
    if cfg.pairs_per_prompt < 1:
        raise BadInput(f"preference.pairs_per_prompt={cfg.pairs_per_prompt}: must be at least 1")
    if cfg.chosen_fallback not in FALLBACKS:
        raise BadInput(f"preference.chosen_fallback={cfg.chosen_fallback!r}: choose one of {', '.join(FALLBACKS)}")
    if cfg.batch_size < 1:
        raise BadInput(f"preference.batch_size={cfg.batch_size}: must be at least 1")
    try:
        check_sampling(cfg.k, cfg.temperature, cfg.top_p, cfg.max_new_tokens)
    except BadInput as e:
        raise BadInput(f"preference.{e}") from None


def pair_answers(
    record: dict, answers: list[str], outcomes: list[str], pairs_per_prompt: int = 1, chosen_fallback: str = "reference"
) -> list[dict[str, Any]]:
    """The pairs of one prompt from its sampled ``answers`` and their grader ``outcomes`` (rules: module docstring).

    >>> r = {"id": "p0", "category": "addition", "prompt": "What is 1 + 1?", "chosen": "1 + 1 = 2\\nAnswer: 2"}
    >>> a = ["Answer: 3", "Answer: 2", "Answer: 2", "two", "Answer: 2 "]
    >>> o = ["wrong_answer", "correct", "correct", "missing_answer", "correct"]
    >>> [(p["chosen"], p["rejected"], p["rejected_outcome"]) for p in pair_answers(r, a, o, pairs_per_prompt=3)]
    [('Answer: 2', 'Answer: 3', 'wrong_answer'), ('Answer: 2 ', 'two', 'missing_answer')]
    >>> [p["chosen_source"] for p in pair_answers(r, ["Answer: 3", "x"], ["wrong_answer", "malformed"], 2)]
    ['reference', 'reference']
    >>> pair_answers(r, ["Answer: 3"], ["wrong_answer"], chosen_fallback="none")
    []
    """
    correct = list(dict.fromkeys(a for a, o in zip(answers, outcomes, strict=True) if o == "correct"))
    incorrect: dict[str, str] = {}
    for a, o in zip(answers, outcomes, strict=True):
        if o != "correct":
            incorrect.setdefault(a, o)
    source = "policy"
    if not correct and chosen_fallback == "reference":
        correct, source = [record["chosen"]] * pairs_per_prompt, "reference"
    pairs = []
    n = min(pairs_per_prompt, len(correct), len(incorrect))
    for i, (chosen, (rejected, outcome)) in enumerate(zip(correct[:n], list(incorrect.items())[:n], strict=True)):
        pairs.append(
            {
                "id": f"{record['id']}-{i}",
                "source_id": record["id"],
                "category": record.get("category"),
                "prompt": record["prompt"],
                "chosen": chosen,
                "rejected": rejected,
                "chosen_source": source,
                "rejected_outcome": outcome,
            }
        )
    return pairs


def pairs_of(records: list[dict], graded: list[list[dict]], cfg) -> tuple[list[dict], dict[str, Any]]:
    """The pairs of ``records`` from their graded samples (``train.policy_samples.graded_samples``), and the counts
    of ``preference_pairs.json`` (prompts, pairs, prompts without a correct / an incorrect answer, pairs whose chosen
    is the reference, outcomes of all samples and of the rejects)."""
    pairs: list[dict] = []
    sample_outcomes: Counter[str] = Counter()
    without_correct = without_incorrect = with_pairs = 0
    for record, samples in zip(records, graded, strict=True):
        answers, outcomes = [s["response"] for s in samples], [s["outcome"] for s in samples]
        sample_outcomes.update(outcomes)
        without_correct += "correct" not in outcomes
        without_incorrect += all(o == "correct" for o in outcomes)
        if cfg.source == "step":
            mine = step_pairs(record, answers, outcomes, cfg.pairs_per_prompt)
        else:
            mine = pair_answers(record, answers, outcomes, cfg.pairs_per_prompt, cfg.chosen_fallback)
        with_pairs += bool(mine)
        pairs += mine
    counts = {
        "prompts": len(records),
        "samples": len(records) * cfg.k,
        "pairs": len(pairs),
        "prompts_with_pairs": with_pairs,
        "prompts_without_correct": without_correct,
        "prompts_without_incorrect": without_incorrect,
        "reference_chosen": sum(p["chosen_source"] == "reference" for p in pairs),
        "sample_outcomes": dict(sorted(sample_outcomes.items())),
        "rejected_outcomes": dict(sorted(Counter(p["rejected_outcome"] for p in pairs).items())),
    }
    return pairs, counts | (step_pair_counts(pairs) if cfg.source == "step" else {})


def sample_pairs(records: list[dict], cfg, backend) -> tuple[list[dict], dict[str, Any]]:
    """Sample ``cfg.k`` answers per record with ``backend`` (a ``SamplingBackend``), grade and pair them:
    ``(pairs, counts)`` (``pairs_of``)."""
    from posttrainlab.train.policy_samples import graded_samples

    return pairs_of(records, graded_samples(records, cfg, backend, f"DPO pairs: sampling k={cfg.k}"), cfg)


def some_pairs(records: list[dict], graded: list[list[dict]], cfg) -> tuple[list[dict], dict[str, Any]]:
    """``pairs_of``; no pair at all is ``BadInput`` (before anything is written)."""
    pairs, counts = pairs_of(records, graded, cfg)
    if not pairs and cfg.source == "step":
        raise BadInput(f"preference.source=step: no wrong line in {counts['samples']} samples of {counts['prompts']} "
                       f"prompts; try a larger k or a higher temperature")  # fmt: skip
    if not pairs:  # source policy
        raise BadInput(
            f"preference.source=policy: no pair from {counts['prompts']} prompts (k={cfg.k}; "
            f"{counts['prompts_without_correct']} without a correct answer, {counts['prompts_without_incorrect']} "
            f"without an incorrect one); try chosen_fallback=reference, a larger k or a higher temperature"
        )
    return pairs, counts


def _publish(out: Path) -> None:
    from posttrainlab.data.cards.kinds import publish_pairs

    publish_pairs(out, PAIRS, SUMMARY)  # out/pairs/: the pairs as a dataset folder with its card


def pair_rows(cfg):
    """The ``train.policy_samples.Kept`` of on-policy pairs (``preference_pairs.jsonl``, ``preference_pairs.json``;
    the records' ``chosen`` joins the reuse key, and ``pairs/`` is published after each write)."""
    from posttrainlab.train.policy_samples import Kept

    return Kept(NAME, lambda records, graded: some_pairs(records, graded, cfg), say="dpo", noun="on-policy pairs",
                count="pairs", keys=("id", "prompt", "answer", "chosen"), written=_publish)  # fmt: skip


def check_records(records: list[dict], cfg, dataset) -> None:
    """``BadInput`` naming the first record without a field the pairs need (``chosen`` only for the fallback)."""
    fallback = cfg.source == "policy" and cfg.chosen_fallback == "reference"
    needed = ("id", "prompt", "answer") + (("chosen",) if fallback else ())
    for i, r in enumerate(records):
        missing = [key for key in needed if key not in r]
        if missing:
            raise BadInput(f"{dataset.path}:{dataset.split} record {i}: no {', '.join(missing)} field")
    if cfg.source == "step":
        check_step_records(records, dataset)


def policy_pairs(
    records: list[dict], cfg, policy: str, out: str | Path, dataset, *, backend=None, reuse: bool = True,
    trust_remote_code: bool = False,
) -> list[dict]:  # fmt: skip
    """The on-policy pairs of ``records`` for a DPO run into ``out``: reused (``reuse`` and same settings) or sampled.

    ``policy`` is the model to sample (the recipe's resolved ``model``); ``dataset`` the recipe's ``DatasetConfig``
    (recorded, and part of the reuse key). ``backend`` replaces the model loaded from ``policy``; one loaded here is
    freed before this returns, so the trainer loads into the memory it held. No pair at all is ``BadInput`` and
    writes nothing.
    """
    from posttrainlab.train.policy_samples import sampled_rows, settings_of

    check_preference(cfg)
    check_records(records, cfg, dataset)
    kept = pair_rows(cfg)
    settings = settings_of(cfg, policy, dataset, records, kept.keys)
    pairs, _ = sampled_rows(records, cfg, policy, Path(out), kept, settings=settings, backend=backend, reuse=reuse,
                            trust_remote_code=trust_remote_code)  # fmt: skip
    return pairs


__all__ = ["check_preference", "check_records", "pair_answers", "pair_rows", "pairs_of", "policy_pairs",
           "sample_pairs", "some_pairs"]  # fmt: skip
