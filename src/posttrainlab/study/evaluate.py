"""The study's PRM stages: one PRM per source (same backbone, budget and seed), then each scored against the exact
labels of the held-out solutions and used for best-of-N on the same test problems.

- ``train_source``: ``train.prm.train_prm`` from the policy with the study's recipe (``StudyConfig.prm``), on the
  source's rows: math-shepherd with hard labels (``supervision: step``), or label mc's own mc-value rows with
  ``supervision: soft`` (the Polaris MC loss, ``prm.losses.soft_loss``). Every source trains ``budget`` optimizer
  steps: ``optim.max_steps``, or ``optim.epochs`` over the exact source's solutions, so a judge that dropped rows
  repeats the rest instead of training less. A source left with no rows writes ``skipped.json`` instead of a PRM.
- ``sample_bon``: ``runners.best_of_n.run`` with no PRM (every step scored 0.5), which samples the test problems once
  and measures majority voting and pass@n; ``evaluate_source`` copies those samples beside each source's run, where
  ``best_of_n.run`` finds them as its own cache (the same sampling settings) and only scores.
- ``evaluate_source``: ``runners.prm_eval.run`` on the held-out solutions (step AUROC, within-problem pairwise
  accuracy, first-error F1, ECE), then best-of-N.
"""

from __future__ import annotations

import json
import math
import shutil
from copy import deepcopy
from dataclasses import replace
from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import read_jsonl, strict_json
from posttrainlab.run_layout import SAMPLES, SAMPLING
from posttrainlab.study.layout import SKIPPED, Source, StudyLayout

#: the files of a best-of-N run that are its sample cache (runners.best_of_n)
BON_CACHE = (SAMPLES, SAMPLING)
NO_PRM = "(none: sampling only)"


def budget(cfg, layout: StudyLayout) -> int:
    """Optimizer steps every source's PRM trains: the ``prm`` recipe's ``optim.max_steps``, else its epochs over
    the exact source's rows (the exact source labels every training solution: its count is the training set).
    """
    optim = cfg.prm.optim
    if optim.max_steps > 0:
        return optim.max_steps
    rows = len(read_jsonl(layout.train_solutions))
    return max(1, math.ceil(optim.epochs * rows / (optim.batch_size * optim.grad_accum)))


def _traces(source: Source, path: Path) -> int:
    """How many solutions a source's training file holds (mc-value rows: one per prefix, grouped by trace)."""
    rows = read_jsonl(path)
    return len({(r["id"], r["sample_index"]) for r in rows}) if source.soft else len(rows)


def recipe_of(cfg, layout: StudyLayout, source: Source, policy: Path, steps: int | None = None):
    """The PRM recipe of ``source``: the study's, from the policy, on the source's rows (``steps``: its budget)."""
    from posttrainlab.train.prm_recipe import PRMDataConfig

    recipe = deepcopy(cfg.prm)
    recipe.model, recipe.output_dir = str(policy), str(layout.prm_of(source.name))
    fmt = "mc-value" if source.soft else "math-shepherd"
    recipe.dataset = PRMDataConfig(path=str(source.train_file(layout)), format=fmt, mc_step_idx="last")
    recipe.supervision = "soft" if source.soft else "step"
    if steps is not None:
        recipe.optim.max_steps = steps
    return recipe


def _skip(folder: Path, reason: str) -> None:
    from posttrainlab.data.atomic import write_text

    write_text(folder / SKIPPED, strict_json({"skipped": reason}) + "\n")


def train_source(cfg, layout: StudyLayout, source: Source, policy: Path) -> None:
    """One PRM on ``source``'s labels (module docstring)."""
    from posttrainlab.train.prm import train_prm

    path = source.train_file(layout)
    rows = _traces(source, path)
    if rows == 0:
        _skip(layout.prm_of(source.name), f"no labelled solution in {layout.relative(path)}")
        return
    train_prm(recipe_of(cfg, layout, source, policy, budget(cfg, layout)))


class NoScorer:
    """Every step 0.5: a best-of-N run that only samples (majority voting and pass@n need no PRM)."""

    def score_batch(self, items, batch_size: int = 16) -> list[list[float]]:
        return [[0.5] * len(steps) for _, steps in items]


def sample_bon(cfg, layout: StudyLayout, policy: Path) -> None:
    """Sample the best-of-N problems once (module docstring)."""
    from posttrainlab.runners import best_of_n

    best_of_n.run(policy, NO_PRM, layout.data, layout.bon_samples, cfg.bon, scorer=NoScorer())


def scorer_of(layout: StudyLayout, source: Source, policy: Path) -> str:
    """What scores for ``source``: its PRM folder, or ``baseline:POLICY`` (``prm.baseline``)."""
    return f"baseline:{policy}" if source.labelling is None else str(layout.prm_of(source.name))


def evaluate_source(cfg, layout: StudyLayout, source: Source, policy: Path) -> None:
    """Held-out metrics against exact labels, then best-of-N on the shared samples (module docstring)."""
    from posttrainlab.runners import best_of_n, prm_eval

    folder = layout.evaluation(source.name)
    if (layout.prm_of(source.name) / SKIPPED).is_file():
        _skip(folder, "no PRM (its source had no labelled solution)")
        return
    prm = scorer_of(layout, source, policy)
    prm_eval.run(prm, layout.heldout_solutions, folder / "heldout", replace(cfg.eval, format="math-shepherd"))
    bon = folder / "bon"
    bon.mkdir(parents=True, exist_ok=True)
    for name in BON_CACHE:
        shutil.copyfile(layout.bon_samples / name, bon / name)
    best_of_n.run(policy, prm, layout.data, bon, cfg.bon)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file's object, ``None`` when it is absent."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


__all__ = ["NO_PRM", "NoScorer", "budget", "evaluate_source", "read_json", "recipe_of", "sample_bon", "scorer_of",
           "train_source"]  # fmt: skip
