"""Load a quickstart run folder for the report: ``load_run`` reads the files ``posttrainlab.report.build`` lists
into a ``RunFolder`` (empty where a file is missing; ``BadInput`` for a folder holding none of them or a file that
is not valid JSON). The report's blocks and figures stay in ``report.build``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from posttrainlab.data.jsonl import json_object_or_empty
from posttrainlab.errors import BadInput
from posttrainlab.report import paired
from posttrainlab.report.plots import METHODS, ordered
from posttrainlab.run_layout import BON, METRICS, PRETRAIN_JSON, TRAIN_LOG, TRAIN_SUMMARY, RunLayout


@dataclass
class RunFolder:
    """The parsed contents of a run folder (empty where a file is missing)."""

    path: Path
    info: dict = field(default_factory=dict)  # run.json
    pretrain: dict = field(default_factory=dict)  # base/pretrain.json
    logs: dict[str, list[dict]] = field(default_factory=dict)  # stage -> train_log.jsonl rows
    metrics: dict[str, dict] = field(default_factory=dict)  # method -> eval/<method>/metrics.json
    prm: dict = field(default_factory=dict)  # prm-eval/metrics.json (posttrain eval prm)
    bon: dict = field(default_factory=dict)  # best-of-n/bon.json (posttrain eval best-of-n)
    seeds: dict[str, list[dict]] = field(default_factory=dict)  # method -> eval/<method>-s<k>/metrics.json, by k
    stages: dict[str, str] = field(default_factory=dict)  # stage -> its settings' hash (stages.json)
    bf16: list[str] = field(default_factory=list)  # the models trained under bf16 autocast (*/train_summary.json)


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise BadInput(f"{path}: expected a JSON object, found {type(obj).__name__}")
    return obj


def _read_log(path: Path) -> list[dict]:
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise BadInput(f"{path}:{i}: not valid JSON ({e})") from None
            if isinstance(row, dict):
                rows.append(row)
    return rows


def stage_hashes(layout: RunLayout) -> dict[str, str]:
    """``{stage: its settings' hash}`` from the run's ``stages.json`` (``quickstart.record``); {} without one."""
    recorded = json_object_or_empty(layout.stages_json).get("stages")  # {"stages": {name: record}}
    return {name: entry["hash"] for name, entry in (recorded if isinstance(recorded, dict) else {}).items()
            if isinstance(entry, dict) and isinstance(entry.get("hash"), str)}  # fmt: skip


def load_run(run_dir: str | Path) -> RunFolder:
    """Read a run folder; ``BadInput`` if it is absent or holds no run file at all."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise BadInput(f"{run_dir}: {'not a folder' if run_dir.exists() else 'no such run folder'}")
    run, layout = RunFolder(run_dir), RunLayout(run_dir)
    if layout.run_json.is_file():
        run.info = _read_json(layout.run_json)
    run.stages = stage_hashes(layout)
    if (layout.base / PRETRAIN_JSON).is_file():
        run.pretrain = _read_json(layout.base / PRETRAIN_JSON)
    stages = {p.parent.name: p for p in run_dir.glob(f"*/{TRAIN_LOG}") if p.is_file()}
    for stage in ordered(set(stages) - set(paired.seed_folders(stages)), METHODS):  # one set of curves per method
        run.logs[stage] = _read_log(stages[stage])
    run.bf16 = sorted(p.parent.name for p in run_dir.glob(f"*/{TRAIN_SUMMARY}")
                      if json_object_or_empty(p).get("bf16") is True)  # fmt: skip
    evals = {p.parent.name: p for p in layout.eval_root.glob(f"*/{METRICS}") if p.is_file()}
    seeded = paired.seed_folders(evals)
    for method in ordered(set(evals) - set(seeded), METHODS):
        run.metrics[method] = _read_json(evals[method])
    for name, method in seeded.items():
        run.seeds.setdefault(method, []).append(_read_json(evals[name]))
    if (layout.prm_eval / METRICS).is_file():
        run.prm = _read_json(layout.prm_eval / METRICS)
    if (layout.best_of_n / BON).is_file():
        run.bon = _read_json(layout.best_of_n / BON)
    if not (run.info or run.pretrain or run.logs or run.metrics):
        raise BadInput(f"{run_dir}: not a run folder (no run.json, */train_log.jsonl or eval/*/metrics.json)")
    return run


__all__ = ["RunFolder", "load_run"]
