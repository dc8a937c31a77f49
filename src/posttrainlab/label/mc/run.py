"""The run driver: label every problem of this shard into the work folder, then write the outputs once.

Every request's seed derives from (run seed, problem id, trace, step), so a problem's labels do not
depend on the order of problems, the shard or a restart. The outputs are written, each atomically,
only when every problem is finished, rebuilt from the work files in data order, so a killed run
started again writes the same bytes as one that never stopped, and no rollout is repeated for a
finished problem.

**Outputs.** ``train.{parquet,jsonl}`` and ``val.{parquet,jsonl}`` (``val_problems`` problems held out
by id), in the card's schema; ``value_table.md``; value-filtered variants under ``band-LO-HI/`` (rows
with LO <= V <= HI) and ``mid-LO-HI/`` (problems whose solve rate is in [LO, HI]); ``summary.json``,
then the dataset card ``README.md`` (``data.cards``). Written by hand: this is the card's pipeline, in
the order that makes resuming exact.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.label.mc.config import MCConfig, OutputConfig, labelling_settings, output_settings
from posttrainlab.label.mc.problems import MCProblem
from posttrainlab.label.mc.rollouts import Context, label_problems
from posttrainlab.label.mc.rows import (
    PROMPT_SHA256,
    PROMPT_VERSION,
    SOURCE_OF_RULE,
    keep_band,
    mid_difficulty,
    rows_of,
    validation_ids,
    value_table,
)
from posttrainlab.label.mc.work import WorkDir, in_shard
from posttrainlab.progress import progress_bar


@dataclass(frozen=True)
class RunOptions:
    """How one ``run_mc`` call goes (none of it changes a label): its shard, the problems that share each backend
    call (their requests keep their own seeds), whether work/ keeps the continuation texts, and ``run_info`` (more
    keys of the work identity, e.g. the policy and backend)."""

    shard: tuple[int, int] = (0, 1)
    problems_per_call: int = 1
    keep_continuations: bool = False
    run_info: dict[str, Any] | None = None


_DEFAULT_CONFIG, _DEFAULT_OUTPUT, _DEFAULT_RUN = MCConfig(), OutputConfig(), RunOptions()  # frozen: safe as defaults


def run_mc(
    problems: Sequence[MCProblem],
    backend,
    out: str | os.PathLike,
    *,
    config: MCConfig = _DEFAULT_CONFIG,
    output: OutputConfig = _DEFAULT_OUTPUT,
    relabeler=None,
    run: RunOptions = _DEFAULT_RUN,
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Label ``problems`` into ``out`` (module docstring); returns the summary (``finished`` False for a partial shard).

    ``run`` (``RunOptions``): the shard, ``problems_per_call`` problems sharing each backend call, and the rest.
    """
    from posttrainlab.grading import get_grader

    job = start_job(problems, out, config=config, output=output, run=run, judge=relabeler)
    grader = get_grader(config.grader)
    ctx = Context(backend, grader, config, relabeler, run.keep_continuations)
    try:
        seconds = job.collect((r for g in job.groups() for r in label_problems(g, ctx)), progress, on_record)
    finally:
        if hasattr(grader, "close"):
            grader.close()
    session = {"problems": len(job.todo), "seconds": seconds, **ctx.counters}
    if relabeler is not None:
        session["judge"] = relabeler.stats.as_dict()
    return job.finish(session)


@dataclass
class Job:
    """One labelling run over a work folder: what is done, what this shard still has to label, and the outputs.

    ``run_mc`` labels ``groups()`` in this process; ``label.mc.ray_runner`` labels them on Ray replicas. Both
    hand every record to ``collect`` (appended to the work file as it arrives, in any order) and end with
    ``finish``, which writes the outputs in data order once every problem is done.
    """

    problems: Sequence[MCProblem]
    out: Path
    config: MCConfig
    output: OutputConfig
    run: RunOptions
    work: WorkDir
    identity: dict[str, Any]
    done: dict[str, dict[str, Any]]
    todo: list[MCProblem]

    def groups(self) -> list[list[MCProblem]]:
        """This shard's unfinished problems in data order, ``problems_per_call`` to a group (one backend call)."""
        k = self.run.problems_per_call
        return [self.todo[g : g + k] for g in range(0, len(self.todo), k)]

    def collect(self, records: Iterable[dict[str, Any]], progress: bool, on_record=None) -> float:
        """Append each record to the work file as it comes (fsynced); the seconds it took."""
        start = time.perf_counter()
        with progress_bar(progress) as bar:
            task = bar.add_task(f"labelling (n={self.config.n}, {self.config.search})", total=len(self.todo))
            for record in records:
                self.work.append(record)
                self.done[record["id"]] = record
                if on_record is not None:
                    on_record(record)
                bar.advance(task, 1)
        return time.perf_counter() - start

    def finish(self, session: dict[str, Any]) -> dict[str, Any]:
        """The outputs (``finalize``) when every problem is done, else a partial summary; ``session`` in both."""
        missing = [p.id for p in self.problems if p.id not in self.done]
        if missing:
            return {"finished": False, "missing": len(missing), "session": session}
        summary = finalize(
            self.problems, self.done, self.out, config=self.config, output=self.output, identity=self.identity
        )
        summary["session"] = session
        return summary


def start_job(
    problems: Sequence[MCProblem],
    out: str | os.PathLike,
    *,
    config: MCConfig,
    output: OutputConfig,
    run: RunOptions,
    judge=None,
) -> Job:
    """Check the settings, open (or resume) the work folder and list what this shard still has to label.

    ``judge``: the ``Relabeler`` (its ``config()`` is part of the work identity), or None.
    """
    config.check()
    output.check()
    if run.problems_per_call < 1:
        raise BadInput(f"--problems-per-call {run.problems_per_call}: must be at least 1")
    if output.val_problems and output.val_problems >= len(problems):
        raise BadInput(
            f"--val-problems {output.val_problems}: only {len(problems)} problems to label; "
            "hold out fewer (the card holds out 128 of ~8k)"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out}: exists and is not a folder")
    work = WorkDir(out, run.shard)
    identity = {
        **labelling_settings(config),
        **(run.run_info or {}),
        "prompt_version": PROMPT_VERSION,
        "judge": judge.config() if judge is not None else None,
    }
    work.check_config(identity)
    done = work.finished()
    for p in problems:
        if p.id in done and done[p.id].get("fingerprint") != p.fingerprint():
            raise BadInput(f"{work.dir}: problem {p.id!r} was labelled from different data; use a new --out")
    todo = [p for p in problems if p.id not in done and in_shard(p.id, run.shard)]
    return Job(problems, out, config, output, run, work, identity, done, todo)


def finalize(
    problems: Sequence[MCProblem],
    records: dict[str, dict[str, Any]],
    out: Path,
    *,
    config: MCConfig,
    output: OutputConfig,
    identity: dict[str, Any],
) -> dict[str, Any]:
    """Write the rows, splits, variants, value table and summary from the finished work records."""
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.formats.mc_value import VALUE_SOURCES, mc_stats
    from posttrainlab.data.formats.writers import write_rows
    from posttrainlab.data.jsonl import write_json

    val_ids = validation_ids([p.id for p in problems], output.val_problems)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    solve_rate = {}
    totals = {"traces": 0, "empty_traces": 0, "rollouts": 0, "prefixes": 0}
    hows: dict[str, int] = {}
    for p in problems:
        record = records[p.id]
        solve_rate[p.id] = record["solve_rate"]
        rows = rows_of(record, p, source=output.source, step_split=config.step_split, text_columns=output.text_columns)
        splits["val" if p.id in val_ids else "train"] += rows
        totals["rollouts"] += record["rollouts"]
        for t in record["traces"]:
            totals["traces"] += 1
            totals["empty_traces"] += t["num_steps"] == 0
            for pr in t["prefixes"]:
                hows[pr["how"]] = hows.get(pr["how"], 0) + 1
                totals["prefixes"] += 1
    variants: dict[str, dict[str, list[dict[str, Any]]]] = {"": splits}
    if output.keep_band is not None:
        lo, hi = output.keep_band
        variants[f"band-{lo:g}-{hi:g}"] = {k: keep_band(v, lo, hi) for k, v in splits.items()}
    if output.mid_difficulty is not None:
        lo, hi = output.mid_difficulty
        variants[f"mid-{lo:g}-{hi:g}"] = {k: mid_difficulty(v, solve_rate, lo, hi) for k, v in splits.items()}
    stats: dict[str, dict[str, Any]] = {}
    files = []
    for name, parts in variants.items():
        folder = out / name if name else out
        for split, rows in parts.items():
            if split == "val" and not val_ids:
                continue
            for fmt in output.formats:
                path = folder / f"{split}.{fmt}"
                write_rows(path, rows)
                files.append(str(path.relative_to(out)))
            stats[f"{name}/{split}" if name else split] = mc_stats(rows)
    write_text(out / "value_table.md", value_table(stats))
    summary = {
        "config": identity,
        "output": output_settings(output),
        "prompt": {"version": PROMPT_VERSION, "sha256": PROMPT_SHA256},
        "problems": len(problems),
        "val_ids": sorted(val_ids),
        **totals,
        "prefixes_by_rule": dict(sorted(hows.items())),
        "prefixes_by_source": {
            src: sum(k for how, k in hows.items() if SOURCE_OF_RULE[how] == src) for src in VALUE_SOURCES
        },
        "mean_solve_rate": sum(solve_rate.values()) / len(solve_rate),
        "value_table": stats,
        "files": files,
        "finished": True,
    }
    write_json(out / "summary.json", summary, ensure_ascii=False)
    from posttrainlab.data.cards.kinds import write_folder_card

    write_folder_card(out, "mc-values")  # README.md, the dataset card (settings from summary.json)
    return summary


__all__ = ["Job", "RunOptions", "finalize", "run_mc", "start_job"]
