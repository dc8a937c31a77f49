"""Where everything lives in a quickstart run folder: ``RunLayout``, the one owner of its paths.

The quickstart's stages, the report and the tests ask a ``RunLayout`` for a path instead of joining string
literals, so the folder's shape is written here once (README "The main job" shows it)::

    OUT/
      run.json            this invocation's stage times and statuses, provenance, model hashes (the report reads it)
      stages.json         each stage's resolved settings, their hash and its outputs' SHA-256 (``quickstart.record``)
      quickstart.log      one tab-separated line per stage start and end, appended by every invocation
      data/arith-v1/      the benchmark (its ``manifest.json`` says it is complete)
      base ->             a link to the model the run started from (the cached tiny base or an imported model)
      sft/ dpo/ grpo/ …   one training run per method and seed (``sft-s1`` …), done when ``train_summary.json`` is
      eval/<method>/      greedy evaluation of each (``metrics.json``, ``samples.jsonl``)
      arith-prm/          exactly labelled policy solutions (``step/train.jsonl``, ``step/heldout.jsonl``)
      prm/                the step PRM (``prm_config.json``)
      prm-eval/           its held-out metrics (``metrics.json``)
      best-of-n/          ``samples.jsonl``, ``scores.jsonl``, ``bon.json``
      beam-search/        ``outcomes.jsonl``, ``beam.json``
      report.md, report.html, report_files/

The file names each writer produces (``METRICS``, ``BON``…) are constants here too, so the writer and the
stage that waits for it name one file. This module is on the ground floor (no imports from the package).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RUN_JSON = "run.json"
STAGES_JSON = "stages.json"
STAGE_LOG = "quickstart.log"
#: the marker each writer leaves last, so its presence means the output is complete
TRAIN_SUMMARY = "train_summary.json"  # posttrain train … (train.common)
PRM_CONFIG = "prm_config.json"  # posttrain train prm (prm.spec)
MANIFEST = "manifest.json"  # data prepare, data arith-prm (data.manifest)
METRICS = "metrics.json"  # eval policy, eval prm
SAMPLES = "samples.jsonl"  # eval policy, best-of-N
SCORES = "scores.jsonl"  # eval prm, best-of-N
OUTCOMES = "outcomes.jsonl"  # beam search
BON = "bon.json"  # best-of-N
BEAM = "beam.json"  # beam search
TRAIN_LOG = "train_log.jsonl"  # every training run's logging steps (the report's curves)
PRETRAIN_JSON = "pretrain.json"  # the tiny base's record (train.pretrain)
RELIABILITY_PNG = "reliability.png"  # eval prm
BON_PNG = "best_of_n.png"  # best-of-N


@dataclass(frozen=True)
class RunLayout:
    """Every path of one run folder, ``root`` included."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # --- files of the run itself
    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def stages_json(self) -> Path:
        return self.root / STAGES_JSON

    @property
    def log(self) -> Path:
        return self.root / STAGE_LOG

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def report_files(self) -> Path:
        return self.root / "report_files"

    # --- the stages' folders
    @property
    def data(self) -> Path:
        return self.root / "data" / "arith-v1"

    @property
    def base(self) -> Path:
        return self.root / "base"

    def model(self, name: str) -> Path:
        """A training run's folder: ``sft``, ``dpo-policy``, ``grpo-s1``…"""
        return self.root / name

    def eval_dir(self, name: str) -> Path:
        """The greedy evaluation of model ``name`` (``base`` or a training run's name)."""
        return self.root / "eval" / name

    @property
    def eval_root(self) -> Path:
        return self.root / "eval"

    @property
    def arith_prm(self) -> Path:
        return self.root / "arith-prm"

    @property
    def prm_train(self) -> Path:
        return self.arith_prm / "step" / "train.jsonl"

    @property
    def prm_heldout(self) -> Path:
        return self.arith_prm / "step" / "heldout.jsonl"

    @property
    def prm(self) -> Path:
        return self.root / "prm"

    @property
    def prm_eval(self) -> Path:
        return self.root / "prm-eval"

    @property
    def best_of_n(self) -> Path:
        return self.root / "best-of-n"

    @property
    def beam_search(self) -> Path:
        return self.root / "beam-search"

    def relative(self, path: Path) -> str:
        """``path`` as ``OUT/…`` when inside the run folder (so a copied folder records the same settings)."""
        try:
            return "OUT/" + Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)
