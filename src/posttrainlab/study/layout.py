"""Where everything lives in a study folder (``StudyLayout``), and the sources the study compares (``sources``).

The study folder is a quickstart run folder (``run_layout.RunLayout``: ``data/arith-v1``, ``base``, ``sft``,
``stages.json``, ``run.json``) with the study's own folders beside them::

    OUT/
      study.log                 one tab-separated line per stage start and end (the quickstart's log, named so)
      solutions/arith-prm/      the policy's solutions, labelled exactly (label.arith_prm.build, every-step)
      solutions/{train,heldout}.jsonl   its policy samples alone, math-shepherd rows with id and category
      labels/<labelling>/       train.jsonl (math-shepherd rows, "targets" per step), cost.json, the tool's own files:
                                exact; mc-<N> (mc/: posttrain label mc); judge-<p>, judge-model (annotate/, sharp/)
      prm/<source>/             one step PRM per source (prm_config.json), or skipped.json when it had no rows
      evaluation/<source>/      heldout/ (eval prm: metrics.json) and bon/ (best-of-N: bon.json)
      bon-samples/              the best-of-N samples every source scores (sampled once; majority and oracle)
      report.md, quality_vs_cost.png, study.json

A source is one way of labelling plus the PRM trained on it: ``exact``, ``mc-hard-<N>``, ``mc-soft-<N>`` (the same
``label mc`` run as ``mc-hard-<N>``), ``judge-<p>``, ``judge-model``; ``baseline`` (the policy's own verifier) has no
labels and no training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from posttrainlab.run_layout import Entry, RunLayout

LOG = "study.log"
COST = "cost.json"
TRAIN = "train.jsonl"
SKIPPED = "skipped.json"
REPORT_PNG = "quality_vs_cost.png"
STUDY_JSON = "study.json"
BASELINE = "baseline"


@dataclass(frozen=True)
class StudyLayout(RunLayout):
    """Every path of one study folder (module docstring)."""

    log = Entry(LOG)
    solutions = Entry("solutions")
    solution_build = Entry("solutions", "arith-prm")
    train_solutions = Entry("solutions", "train.jsonl")
    heldout_solutions = Entry("solutions", "heldout.jsonl")
    bon_samples = Entry("bon-samples")
    report_png = Entry(REPORT_PNG)
    study_json = Entry(STUDY_JSON)

    def labels(self, labelling: str) -> Path:
        """The folder of one labelling: ``exact``, ``mc-4``, ``judge-0.1``, ``judge-model``."""
        return self.root / "labels" / labelling

    def prm_of(self, source: str) -> Path:
        return self.root / "prm" / source

    def evaluation(self, source: str) -> Path:
        return self.root / "evaluation" / source


@dataclass(frozen=True)
class Source:
    """One source: its name, the labelling it trains on (``None``: the baseline), and whether its targets are soft."""

    name: str
    labelling: str | None
    soft: bool = False
    kind: str = "exact"  # exact | mc | judge | baseline

    def train_file(self, layout: StudyLayout) -> Path:
        """The rows its PRM trains on: the labelling's math-shepherd rows, or label mc's own mc-value rows (soft)."""
        if self.labelling is None:
            raise ValueError(f"{self.name}: no labels")
        folder = layout.labels(self.labelling)
        return folder / "mc" / TRAIN if self.soft else folder / TRAIN


def noise_name(p: float) -> str:
    """``judge-<p>``'s p: ``0``, ``0.1``, ``0.3``.

    >>> noise_name(0.0), noise_name(0.1), noise_name(1.0)
    ('0', '0.1', '1')
    """
    return f"{p:g}"


def labellings(cfg) -> list[tuple[str, str]]:
    """``(labelling, kind)`` of every label stage of a ``StudyConfig``, in order."""
    out = [("exact", "exact")] + [(f"mc-{n}", "mc") for n in cfg.mc.ns]
    out += [(f"judge-{noise_name(p)}", "judge") for p in cfg.judge.noise]
    if cfg.judge.model is not None:
        out.append(("judge-model", "judge"))
    return out


def sources(cfg) -> list[Source]:
    """Every source of a ``StudyConfig``, in the report's order.

    >>> from posttrainlab.study.config import StudyConfig
    >>> [s.name for s in sources(StudyConfig())]  # doctest: +NORMALIZE_WHITESPACE
    ['exact', 'mc-hard-1', 'mc-hard-4', 'mc-hard-16', 'mc-soft-4', 'mc-soft-16', 'judge-0', 'judge-0.1',
     'judge-0.3', 'baseline']
    """
    out = [Source("exact", "exact")]
    out += [Source(f"mc-hard-{n}", f"mc-{n}", kind="mc") for n in cfg.mc.ns]
    out += [Source(f"mc-soft-{n}", f"mc-{n}", soft=True, kind="mc") for n in cfg.mc.soft]
    out += [Source(f"judge-{noise_name(p)}", f"judge-{noise_name(p)}", kind="judge") for p in cfg.judge.noise]
    if cfg.judge.model is not None:
        out.append(Source("judge-model", "judge-model", kind="judge"))
    if cfg.baseline:
        out.append(Source(BASELINE, None, kind="baseline"))
    return out


__all__ = ["BASELINE", "COST", "LOG", "Source", "StudyLayout", "labellings", "noise_name", "sources"]
