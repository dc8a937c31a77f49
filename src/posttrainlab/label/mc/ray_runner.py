"""``posttrain label mc --ray R``: the problems labelled on R Ray replicas; work folder and outputs as without Ray.

**How.** The run's unfinished problems, ``problems_per_call`` to a group (``run.Job.groups``), become the rows of a
Ray Data dataset; ``map_batches`` runs ``LabelReplica`` on a pool of R actors (``ActorPoolStrategy``). Each replica
builds the run's policy backend, grader and judge once (``label.mc.policy``, as the CLI does in one process) and
labels one group per row with ``label_problems``, exactly as the single-process run labels that group. The driver
appends every record to the work file as it streams back (in whatever order the replicas finish) and writes the
outputs in data order once every problem is done (``Job.finish``). Replicas get ``threads`` CPUs each (default 1:
one torch thread); without ``--ray-address`` a local Ray instance with R x that many CPUs is started and stopped.

**Why the rows do not depend on R.** A request's seed is ``derive_seed(seed, id, trace, step)`` and each group is
labelled alone, one backend call per round, so a problem's record does not depend on which replica labels it, on R
or on the other groups; with ``problems_per_call`` 1 (the transformers default) even the float rounding is the
single-process run's (the same batch per call, the same thread count). A replica labels whole problems, not single
continuations: the transformers backend draws a prefix's N continuations from one prefill and one seeded generator
(``generation.shared_prefix``), which is what makes labelling 8x cheaper, and splitting them would change the bytes.
(``--backend vllm`` goes the other way, one row per continuation: ``generation.ray_llm``.)

**Resumable** as without Ray: a record is appended (fsynced) as soon as the driver has it; a killed run loses the
groups in flight only, and the next run, with any R or without Ray, skips every finished problem.

Written by hand: the unit of work (a group of problems), the seeds and the record stream are ours; Ray Data only
schedules the groups on the replicas.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation.ray_backend import cluster, import_ray, pool_rows
from posttrainlab.label.mc.config import MCRunConfig
from posttrainlab.label.mc.policy import make_relabeler, make_sampler, run_options
from posttrainlab.label.mc.problems import MCProblem
from posttrainlab.label.mc.run import run_mc, start_job

#: groups per Ray Data block: a block's records come back when its last group is done, so blocks stay small
GROUPS_PER_BLOCK = 8
#: problems per backend call of ``--backend vllm --ray``: every call is one Ray Data pass that starts the engines
VLLM_PROBLEMS_PER_CALL = 256


class LabelReplica:
    """One replica: the run's backend, grader and judge, built once; labels one group of problems per row.

    A row's ``group`` is a pickled list of ``MCProblem``; its ``result`` the pickled records and what the group
    cost (``calls``, ``rollouts``, and the judge's counts).
    """

    cfg: MCRunConfig  # set on the subclass ``replica_class`` makes (no constructor arguments to keep in the store)

    def __init__(self):
        from posttrainlab.grading import get_grader
        from posttrainlab.label.mc.rollouts import Context
        from posttrainlab.threads import configure_threads

        cfg = self.cfg
        configure_threads(cfg.threads or 1)  # before the backend imports torch
        self.relabeler = make_relabeler(cfg)
        self.ctx = Context(
            make_sampler(cfg), get_grader(cfg.grader), cfg.labelling(), self.relabeler, cfg.keep_continuations
        )

    def counts(self) -> dict[str, int]:
        judge = self.relabeler.stats.as_dict() if self.relabeler is not None else {}
        return {**self.ctx.counters, **{f"judge_{k}": v for k, v in judge.items()}}

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        from posttrainlab.label.mc.rollouts import label_problems

        results = []
        for blob in batch["group"]:
            before = self.counts()
            records = label_problems(pickle.loads(blob), self.ctx)
            cost = {k: v - before.get(k, 0) for k, v in self.counts().items()}
            results.append(pickle.dumps((records, cost)))
        return {"result": np.array(results, dtype=object)}


def replica_class(cfg: MCRunConfig) -> type:
    """``LabelReplica`` with ``cfg`` on the class: Ray pickles the class by value, so the settings travel with it."""
    return type("MCLabelReplica", (LabelReplica,), {"cfg": cfg})  # a name the module lacks: pickled by value


def replica_records(
    groups: Sequence[list[MCProblem]], cfg: MCRunConfig, cost: dict[str, int]
) -> Iterator[dict[str, Any]]:
    """The work records of ``groups``, labelled on ``cfg.ray`` replicas, as they finish; ``cost`` adds up what they
    cost. Closing the iterator (the run was stopped) ends the Ray Data execution and its replicas."""
    if not groups:
        return
    import_ray()
    items = [{"group": pickle.dumps(g)} for g in groups]
    blocks = min(len(items), max(4 * cfg.ray, -(-len(items) // GROUPS_PER_BLOCK)))
    rows = pool_rows(items, replica_class(cfg), replicas=cfg.ray, cpus=cfg.threads or 1, blocks=blocks)
    try:
        for row in rows:
            records, spent = pickle.loads(row["result"])
            for k, v in spent.items():
                cost[k] = cost.get(k, 0) + v
            yield from records
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


def run_mc_ray(
    problems: Sequence[MCProblem], cfg: MCRunConfig, *, on_record: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Label ``problems`` into ``cfg.out`` on ``cfg.ray`` replicas (module docstring); returns ``run_mc``'s summary,
    its ``session`` with ``replicas``. ``--backend vllm`` runs through ray.data.llm instead (``generation.ray_llm``)."""
    if cfg.ray is None:
        raise BadInput("run_mc_ray needs --ray R")
    vllm = cfg.backend == "vllm"  # a local start: every core (the stage's own tasks need CPUs beside the engines)
    with cluster(cpus=None if vllm else cfg.ray * (cfg.threads or 1), address=cfg.ray_address):
        if vllm:
            from posttrainlab.generation.ray_llm import RayLLMSampler

            summary = run_mc(
                problems,
                RayLLMSampler.build(
                    cfg.policy,
                    replicas=cfg.ray,
                    dtype=cfg.dtype,
                    threads=cfg.threads,
                    batch_size=cfg.batch_size,
                    trust_remote_code=cfg.trust_remote_code,
                ),
                cfg.out,
                config=cfg.labelling(),
                output=cfg.output(),
                relabeler=make_relabeler(cfg),
                run=run_options(cfg, problems_per_call=VLLM_PROBLEMS_PER_CALL),
                progress=cfg.progress,
                on_record=on_record,
            )
            summary["session"]["replicas"] = cfg.ray
            return summary
        judge = make_relabeler(cfg)  # its config() is part of the work identity; each replica builds its own
        job = start_job(
            problems, cfg.out, config=cfg.labelling(), output=cfg.output(), run=run_options(cfg), judge=judge
        )
        cost = {"calls": 0, "rollouts": 0}
        records = replica_records(job.groups(), cfg, cost)
        try:
            seconds = job.collect(records, cfg.progress, on_record)
        finally:
            records.close()
        session: dict[str, Any] = {"problems": len(job.todo), "seconds": seconds, "replicas": cfg.ray}
        session.update({k: v for k, v in cost.items() if not k.startswith("judge_")})
        if judge is not None:
            session["judge"] = {k.removeprefix("judge_"): v for k, v in cost.items() if k.startswith("judge_")}
        return job.finish(session)


__all__ = ["GROUPS_PER_BLOCK", "LabelReplica", "replica_records", "run_mc_ray"]
