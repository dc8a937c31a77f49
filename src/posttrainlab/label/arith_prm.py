"""Build arith-prm: sample solutions from a policy, label every step exactly, write both views.

``build(policy, data, out, settings)`` reads arith-v1 (checksums checked), samples ``k`` solutions per prompt of
the train and held-out prompt splits from the policy (any ``SamplingBackend``; a transformers model
folder by default) at ``temperature`` 1.0 so that the policy makes mistakes, adds the preference pairs
and held-out corruptions, and writes the dataset with ``posttrainlab.data.arith.prm_data`` (which
holds the labelling rules, the splits and the layout; see its docstring and docs/prm-eval.md).

Determinism: each arith-v1 prompt split is sampled in one ``generate`` call with the same ``seed``, and
a backend gives the same completions for the same call (``posttrainlab.generation``), so a fixed
policy, seed, ``k``, ``limit`` and batch size give byte-identical files. The rest is pure.

Written by hand: it is the glue between a sampling backend and the arith-v1 labelling rules.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrainlab.data.arith.prm_data import (
    HELDOUT_PROMPTS,
    TRAIN_PROMPTS,
    SplitBuilder,
    check_target,
    problem_keys,
    write_dataset,
)
from posttrainlab.data.arith.prm_labels import ArithPRMOptions
from posttrainlab.errors import BadInput


def _load(data: str, split: str, limit: int | None) -> list[dict[str, Any]]:
    from posttrainlab.data.problems import read_split

    return read_split(data, split, required=("id", "category", "prompt", "answer"), limit=limit)[1]


@dataclass(frozen=True)
class ArithPRMBuild:
    """How ``build`` samples: ``k`` solutions per prompt of the train and held-out prompt splits, and the model.

    ``limit`` keeps the first N records of every arith-v1 split read (prompt splits and preference pairs).
    ``reference_splits`` (arith-v1 splits, e.g. ``("sft_train_3k",)``, first ``reference_limit`` records of each) add
    to ``train`` each record's reference solution and one corruption of it (``SplitBuilder.add_corruptions``, as the
    held-out split has): exact labels that cost no sampling.
    """

    k: int = 4
    seed: int = 0
    limit: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    batch_size: int = 32
    train_prompts: Sequence[str] = TRAIN_PROMPTS
    heldout_prompts: Sequence[str] = HELDOUT_PROMPTS
    reference_splits: Sequence[str] = ()
    reference_limit: int | None = None
    trust_remote_code: bool = False
    dtype: str = "float32"

    def check(self) -> None:
        """``BadInput`` for settings no build can sample with (``build`` and the quickstart's check before any stage
        runs apply it)."""
        from posttrainlab.generation.sampling import check_sampling

        if self.k < 1:
            raise BadInput(f"k={self.k}: need at least one sample per problem")
        if self.limit is not None and self.limit < 1:
            raise BadInput(f"limit={self.limit}: must be at least 1")
        if not self.temperature > 0:
            raise BadInput(f"temperature={self.temperature}: arith-prm samples need temperature > 0 (to get mistakes)")
        from posttrainlab.data.arith.splits import check_split_names

        for name in ("train_prompts", "heldout_prompts", "reference_splits"):
            check_split_names(name, getattr(self, name))
        splits = (*self.train_prompts, *self.heldout_prompts, *self.reference_splits)
        if "test" in splits:
            raise BadInput("arith-prm never samples arith-v1 test prompts (best-of-N is reported on them)")
        overlap = sorted(set(self.train_prompts) & set(self.heldout_prompts))
        if overlap:
            raise BadInput(f"train and held-out prompt splits overlap: {overlap}")
        check_sampling(self.k, self.temperature, self.top_p, self.max_new_tokens)


def build(
    policy: str | os.PathLike,
    data: str | os.PathLike,
    out: str | os.PathLike,
    settings: ArithPRMBuild | None = None,
    *,
    backend=None,
    progress: bool = True,
    options: ArithPRMOptions | None = None,
) -> dict[str, Any]:
    """Sample, label and write arith-prm into ``out``; return its manifest (``stats`` per split).

    ``settings`` (``ArithPRMBuild``; default: its defaults): the sampling, the splits and the model's loading.
    ``backend`` replaces the model loaded from ``policy``. ``options`` (``ArithPRMOptions``; default: the original
    build): the labelling mode, the explicit missing-answer step, and near-miss hard negatives for ``train``
    (``SplitBuilder.add_near_misses``) from arith-v1 splits outside every evaluation pool.
    """
    s = settings or ArithPRMBuild()
    k, seed, limit, temperature, top_p = s.k, s.seed, s.limit, s.temperature, s.top_p
    max_new_tokens, batch_size, reference_limit = s.max_new_tokens, s.batch_size, s.reference_limit
    train_prompts, heldout_prompts, reference_splits = s.train_prompts, s.heldout_prompts, s.reference_splits
    options = (options or ArithPRMOptions()).check(heldout_prompts)
    s.check()
    check_target(out)
    if backend is None:  # a missing local policy folder fails before any data is read
        from posttrainlab.models.loading import check_folder, is_local

        if is_local(str(policy)):
            check_folder(str(policy))
    data = str(data)
    prompt_sets = {name: _load(data, name, limit) for name in (*train_prompts, *heldout_prompts)}
    pref_train = _load(data, "preference_train", limit)
    references = {name: _load(data, name, reference_limit) for name in reference_splits}
    pref_test = _load(data, "preference_test", limit)
    hard = {name: _load(data, name, options.hard_negative_limit) for name in options.hard_negatives}

    if backend is None:
        from posttrainlab.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend.from_pretrained(
            policy, batch_size=batch_size, progress=progress, trust_remote_code=s.trust_remote_code, dtype=s.dtype
        )
    sampling = {"temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed}
    from posttrainlab.generation.sampling import sample_answers

    start = time.perf_counter()
    sampled = {
        name: sample_answers(backend, records, k, f"sampling {name} (k={k})", **sampling)
        for name, records in prompt_sets.items()
    }
    seconds = time.perf_counter() - start

    train, heldout, ptest = (
        SplitBuilder(name, options.labels, options.missing_answer) for name in ("train", "heldout", "preference_test")
    )
    for name in train_prompts:
        train.add_policy(prompt_sets[name], sampled[name])
    train.add_pairs(pref_train)
    for name in reference_splits:  # free exact labels: each record's reference solution and one corruption of it
        train.add_corruptions(references[name], seed)
    for name in options.hard_negatives:  # near-miss negatives, exact labels, problems outside every eval pool
        train.add_near_misses(hard[name], seed, options.hard_negatives_per_problem)
    for name in heldout_prompts:
        heldout.add_policy(prompt_sets[name], sampled[name])
    for name in heldout_prompts:
        heldout.add_corruptions(prompt_sets[name], seed)
    ptest.add_pairs(pref_test)
    shared = problem_keys(train.rows) & problem_keys(heldout.rows)
    if shared:  # arith-v1's own contamination checks make this impossible; checked all the same
        raise BadInput(f"{data}: train and held-out share {len(shared)} problem(s), e.g. {sorted(shared)[0]}")

    n_samples = sum(len(records) * k for records in prompt_sets.values())
    meta = {
        "policy": str(policy),
        "data": data,
        "splits": {
            "train": {
                "prompts": list(train_prompts),
                "pairs": "preference_train",
                "references": {name: len(references[name]) for name in reference_splits},
                **({"hard_negatives": {name: len(hard[name]) for name in hard}} if hard else {}),
            },
            "heldout": {"prompts": list(heldout_prompts), "pairs": "reference + corrupt() of the same prompts"},
            "preference_test": {"prompts": [], "pairs": "preference_test (arith-v1 test problems: evaluation only)"},
        },
        "labelling": {"labels": options.labels, "missing_answer": options.missing_answer},
        "sampling": {
            "backend": getattr(backend, "name", type(backend).__name__),
            "k": k,
            "limit": limit,
            "batch_size": batch_size,
            **sampling,
            "samples": n_samples,
            "seconds": seconds,
            "samples_per_s": n_samples / seconds if seconds > 0 else None,
        },
    }
    return write_dataset(out, {"train": train, "heldout": heldout, "preference_test": ptest}, meta)


__all__ = ["ArithPRMBuild", "build"]
