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
      arith-prm/          exactly labelled policy solutions (``step/train.jsonl``, ``step/heldout.jsonl``; every line
                          labelled in ``math_shepherd/``, the default's PRM data)
      prm/                the step PRM (``prm_config.json``); orm/ the outcome reward model (``process.orm``)
      prm-eval/           its held-out metrics (``metrics.json``)
      best-of-n/          ``samples.jsonl`` (and ``sampling.json``), ``scores.jsonl``, ``bon.json``
      beam-search/        ``outcomes.jsonl``, ``beam.json``
      report.md, report.html, report_files/   (``compare.json``, ``results.json``: the headline numbers, plots)

The file names each writer produces (``METRICS``, ``BON``…) are constants here too, so the writer, its readers and
the stage that waits for it name one file: the runners, ``train``, ``prm.spec``, ``data.manifest``, ``study`` and the
report import them from here (no string literal of their own). This module is on the ground floor (no imports from
the package), so any floor may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: how a path inside the run folder is written in its records (``RunLayout.relative``), so a copied folder matches
OUT_PREFIX = "OUT/"
RUN_JSON = "run.json"
STAGES_JSON = "stages.json"
STAGE_LOG = "quickstart.log"
#: the marker each writer leaves last, so its presence means the output is complete
TRAIN_SUMMARY = "train_summary.json"  # posttrain train … (train.common)
PRM_CONFIG = "prm_config.json"  # posttrain train prm (prm.spec)
MANIFEST = "manifest.json"  # data prepare, data arith-prm (data.manifest)
METRICS = "metrics.json"  # eval policy, eval prm
SAMPLES = "samples.jsonl"  # eval policy, best-of-N
SAMPLING = "sampling.json"  # best-of-N: the settings of its samples (the cache key; beam search reads it)
SCORES = "scores.jsonl"  # eval prm, best-of-N
OUTCOMES = "outcomes.jsonl"  # beam search
BON = "bon.json"  # best-of-N
BEAM = "beam.json"  # beam search
TRAIN_LOG = "train_log.jsonl"  # every training run's logging steps (the report's curves)
PRETRAIN_JSON = "pretrain.json"  # the tiny base's record (train.pretrain)
RELIABILITY_PNG = "reliability.png"  # eval prm
BON_PNG = "best_of_n.png"  # best-of-N
PVO_PNG = "process_vs_outcome.png"  # best-of-N with an ORM (report.orm_curves draws it)
COMPARE_JSON = "compare.json"  # report_files/: the report's paired comparisons (report.paired); eval compare --out
RESULTS_JSON = "results.json"  # report_files/: the report's headline numbers (report.results)


class Entry:
    """A path of the run folder, below its root: ``data = Entry("data", "arith-v1")`` makes ``layout.data``."""

    def __init__(self, *parts: str) -> None:
        self.relative = Path(*parts)

    def __get__(self, layout: RunLayout | None, owner: type | None = None) -> Path:
        if layout is None:  # on the class: the entry itself
            return self  # type: ignore[return-value]
        return layout.root / self.relative


@dataclass(frozen=True)
class RunLayout:
    """Every path of one run folder, ``root`` included."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # --- files of the run itself
    run_json = Entry(RUN_JSON)
    stages_json = Entry(STAGES_JSON)
    log = Entry(STAGE_LOG)
    report_md = Entry("report.md")
    report_html = Entry("report.html")
    report_files = Entry("report_files")
    # --- the stages' folders (and the two files of arith-prm the PRM trains and is evaluated on)
    data = Entry("data", "arith-v1")
    base = Entry("base")
    eval_root = Entry("eval")
    arith_prm = Entry("arith-prm")
    prm_train = Entry("arith-prm", "step", "train.jsonl")
    prm_heldout = Entry("arith-prm", "step", "heldout.jsonl")
    prm_train_every_step = Entry("arith-prm", "math_shepherd", "train.jsonl")  # labelling.labels: every-step
    prm_heldout_every_step = Entry("arith-prm", "math_shepherd", "heldout.jsonl")
    prm = Entry("prm")
    orm = Entry("orm")  # the outcome reward model (process.orm)
    prm_eval = Entry("prm-eval")
    best_of_n = Entry("best-of-n")
    beam_search = Entry("beam-search")

    def model(self, name: str) -> Path:
        """A training run's folder: ``sft``, ``dpo-policy``, ``grpo-s1``…"""
        return self.root / name

    def eval_dir(self, name: str) -> Path:
        """The greedy evaluation of model ``name`` (``base`` or a training run's name)."""
        return self.eval_root / name

    def relative(self, path: Path) -> str:
        """``path`` as ``OUT/…`` when inside the run folder (so a copied folder records the same settings)."""
        try:
            return OUT_PREFIX + Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def absolute(self, name: str) -> Path:
        """The inverse of ``relative``: an ``OUT/…`` name inside this run folder, any other as the path it is.

        >>> RunLayout(Path("runs/q")).absolute("OUT/sft/model.safetensors"), RunLayout(Path("runs/q")).absolute("/x")
        (PosixPath('runs/q/sft/model.safetensors'), PosixPath('/x'))
        """
        return self.root / name[len(OUT_PREFIX) :] if name.startswith(OUT_PREFIX) else Path(name)
