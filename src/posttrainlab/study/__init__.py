"""``posttrain study label-sources``: how the source of step labels shapes a PRM and the search that uses it.

One set of policy solutions (sampled from the quickstart's SFT policy, on problems outside every evaluation pool) is
labelled by every source: exact (a program), Monte-Carlo (``label mc``: N continuations per prefix, hard V > 0 and
soft V), and judges through the SHARP pipeline (the program judge at known noise, optionally a real model). One step
PRM per source, same backbone, budget and seed; each scored against the exact labels of the same held-out solutions
and used for best-of-N against majority voting; each source's labelling cost beside its quality (docs/label-sources.md).

The package: ``config`` (``StudyConfig``, presets in ``configs/study/``), ``layout`` (``StudyLayout``: the study
folder; ``sources``), ``labels`` (the solutions and each labelling, with its cost), ``evaluate`` (PRM per source, its
held-out metrics and best-of-N), ``quality`` (pure: labels from verdicts, label quality, cost table, summary rows),
``report`` (``study.json``, ``report.md``, the figure), ``plan`` (the stage table and ``run_study``, walked by the
quickstart's runner, ``quickstart.run.run_stages``).
"""

from posttrainlab.study.config import StudyConfig, preset_names, study_config
from posttrainlab.study.layout import Source, StudyLayout, sources
from posttrainlab.study.plan import STAGES, run_study

__all__ = ["STAGES", "Source", "StudyConfig", "StudyLayout", "preset_names", "run_study", "sources", "study_config"]
