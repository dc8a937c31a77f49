"""Rollouts: N continuations per prefix, graded (and relabelled), into one work record per problem.

For problems without traces, N continuations are drawn from the *empty* prefix (the problem's solve
rate, used by the mid-difficulty filter) and the first ``samples_per_problem`` of them are the base
traces. Prefixes ``0..num_steps-2`` get N continuations each, sampled together from one prefill
(``PrefixRequest`` with the seed ``derive_seed(seed, id, sample_index, step_idx)``), so a problem's
labels do not depend on the order of problems, the shard, the batch or a restart. The last prefix is
the whole trace: it is graded once, with no rollout (V is 1.0 or 0.0; its continuation is the trace
itself). With the judge relabel pass the judge's verdict replaces the grade wherever it gave one.
Under ``search="binary"`` only the prefixes the bisection visits are rolled out (``search``), all
traces of a group in lockstep, one backend call per round.

The state of a problem while it is labelled is typed (``ProblemState``, ``TraceState``, ``Verdict``);
what is written is the work record (``record_of``), a plain dict because it is one JSON line of the
work folder (``work``) and is read back as such. Written by hand: the order of requests, the seeds and
the grade cache are what make runs reproducible and resumable, which no library fixes for us.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from posttrainlab.data.step_split import STEP_SPLITS
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed, sample_continuations
from posttrainlab.grading import Grade
from posttrainlab.label.mc.config import MCConfig
from posttrainlab.label.mc.problems import MCProblem
from posttrainlab.label.mc.search import FirstZeroSearch
from posttrainlab.label.mc.steps import exact_first_error, prefix_text, split_trace


class Verdict(NamedTuple):
    """One response's correctness: ``final`` (the judge's verdict where it gave one, else the grade), ``raw``."""

    final: bool
    raw: bool


def value_of(verdicts: Sequence[Verdict]) -> float:
    """V = share of final verdicts that are correct."""
    return sum(v.final for v in verdicts) / len(verdicts)


def grade_all(grader, responses: Sequence[str], answer: Any) -> list[Grade]:
    """Grades of many responses against one answer (``grade_many`` where the grader has it)."""
    if not responses:
        return []
    if hasattr(grader, "grade_many"):
        return list(grader.grade_many(list(responses), [answer] * len(responses)))
    return [grader.grade(r, answer) for r in responses]


@dataclass
class Context:
    """What labelling a problem needs besides the problem."""

    backend: Any
    grader: Any
    config: MCConfig
    relabeler: Any = None
    keep_continuations: bool = False
    counters: dict[str, int] = field(default_factory=lambda: {"calls": 0, "rollouts": 0})

    def sample(self, requests: list[PrefixRequest], n: int) -> list[list[str]]:
        if not requests:
            return []
        cfg = self.config
        out = sample_continuations(
            self.backend,
            requests,
            n=n,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            stop=list(cfg.stop) or None,
        )
        if len(out) != len(requests) or any(len(o) != n for o in out):
            raise RuntimeError(f"backend returned {[len(o) for o in out]} continuations for {len(requests)} x {n}")
        self.counters["calls"] += 1
        self.counters["rollouts"] += n * len(requests)
        return out


class Verdicts:
    """Correctness of a problem's responses: graded (and relabelled) once per distinct text, then cached."""

    def __init__(self, ctx: Context, problem: MCProblem):
        self.ctx, self.problem = ctx, problem
        self.cache: dict[str, Verdict] = {}

    def get(self, responses: Sequence[str]) -> list[Verdict]:
        new = list(dict.fromkeys(r for r in responses if r not in self.cache))
        if new:
            grades = grade_all(self.ctx.grader, new, self.problem.answer)
            final = [g.correct for g in grades]
            if self.ctx.relabeler is not None:
                final = self.ctx.relabeler.relabel(self.problem.question, self.problem.answer, new, grades)
            for r, f, g in zip(new, final, grades, strict=True):
                self.cache[r] = Verdict(bool(f), g.correct)
        return [self.cache[r] for r in responses]


@dataclass
class TraceState:
    """One base trace while it is labelled: its steps and the verdicts measured per prefix so far."""

    sample_index: int
    steps: list[str]
    first_error: int | None
    measured: dict[int, list[Verdict]] = field(default_factory=dict)  # step_idx -> one verdict per continuation
    search: FirstZeroSearch | None = None  # under search="binary"

    @property
    def num_steps(self) -> int:
        return len(self.steps)


@dataclass
class ProblemState:
    """One problem while it is labelled: the continuations from the empty prefix, its traces, its rollouts."""

    problem: MCProblem
    root: list[str]
    verdicts: Verdicts
    traces: list[TraceState]
    rollouts: dict[tuple[int, int], list[str]] = field(default_factory=dict)  # (sample_index, step_idx) -> texts


Probe = tuple[ProblemState, TraceState, int]


def _root_request(problem: MCProblem, seed: int) -> PrefixRequest:
    return PrefixRequest(problem.prompt, "", derive_seed(seed, problem.id, "root"))


def _prefix_request(problem: MCProblem, trace: TraceState, i: int, cfg: MCConfig) -> PrefixRequest:
    return PrefixRequest(
        problem.prompt,
        prefix_text(trace.steps, i, cfg.step_split),
        derive_seed(cfg.seed, problem.id, trace.sample_index, i),
    )


def _start(problem: MCProblem, root: list[str], ctx: Context) -> ProblemState:
    """The state of a problem once its root continuations are drawn: base traces, each graded whole."""
    cfg = ctx.config
    verdicts = Verdicts(ctx, problem)
    texts = problem.traces
    if texts is None:  # the policy's own samples: the first ones drawn from the empty prefix
        texts = [split_trace(t, cfg.step_split) for t in root[: cfg.samples_per_problem]]
    traces = []
    for sample_index, steps in enumerate(texts):
        t = TraceState(sample_index, list(steps), exact_first_error(problem, steps) if steps else None)
        if steps:  # the whole trace (last prefix) is graded once, with no rollout
            t.measured[t.num_steps - 1] = verdicts.get([STEP_SPLITS[cfg.step_split].join(steps)])
        traces.append(t)
    return ProblemState(problem, root, verdicts, traces)


def label_problems(problems: Sequence[MCProblem], ctx: Context) -> list[dict[str, Any]]:
    """Label a group of problems together (one backend call per round); one work record per problem."""
    cfg = ctx.config
    roots = ctx.sample([_root_request(p, cfg.seed) for p in problems], max(cfg.n, cfg.samples_per_problem))
    states = [_start(problem, root, ctx) for problem, root in zip(problems, roots, strict=True)]
    if cfg.search == "full":
        _roll_out([(s, t, i) for s in states for t in s.traces for i in range(t.num_steps - 1)], ctx)
    else:
        searching = []
        for s in states:
            for t in s.traces:
                if t.num_steps:
                    (last,) = t.measured[t.num_steps - 1]
                    t.search = FirstZeroSearch(t.num_steps, 1.0 if last.final else 0.0)
                    searching.append((s, t))
        while probes := [(s, t, i) for s, t in searching if (i := t.search.next_probe()) is not None]:
            _roll_out(probes, ctx)  # lockstep: one call per round, one probe per trace still searching
            for _s, t, i in probes:
                t.search.record(i, value_of(t.measured[i]))
    return [record_of(state, ctx) for state in states]


def _roll_out(probes: list[Probe], ctx: Context) -> None:
    """N continuations from each probed prefix (one backend call), graded into the trace's ``measured``."""
    cfg = ctx.config
    requests = [_prefix_request(s.problem, t, i, cfg) for s, t, i in probes]
    for (s, t, i), out in zip(probes, ctx.sample(requests, cfg.n), strict=True):
        s.rollouts[(t.sample_index, i)] = out
        prefix = prefix_text(t.steps, i, cfg.step_split)
        t.measured[i] = s.verdicts.get([prefix + c for c in out])


def record_of(state: ProblemState, ctx: Context) -> dict[str, Any]:
    """The work record of one labelled problem (one JSON line in the work file)."""
    problem = state.problem
    judged = ctx.relabeler is not None
    root = state.verdicts.get(state.root)
    record: dict[str, Any] = {
        "id": problem.id,
        "fingerprint": problem.fingerprint(),
        "solve_rate": value_of(root),
        "root": {"correct": [int(v.final) for v in root]},
        "rollouts": len(state.root) + sum(len(o) for o in state.rollouts.values()),
        "traces": [],
    }
    if judged:
        record["root"]["raw"] = [int(v.raw) for v in root]
    if ctx.keep_continuations:
        record["root"]["continuations"] = list(state.root)
    for t in state.traces:
        last = t.num_steps - 1
        values = (
            t.search.values()
            if t.search is not None
            else [(value_of(t.measured[i]), "trace" if i == last else "rollout") for i in range(t.num_steps)]
        )
        prefixes = []
        for i, (value, how) in enumerate(values):
            measured = t.measured.get(i, [])
            entry: dict[str, Any] = {
                "step_idx": i,
                "how": how,
                "value": value,
                "grades": [int(v.final) for v in measured],
            }
            if judged:
                entry["raw"] = [int(v.raw) for v in measured]
            if ctx.keep_continuations and (t.sample_index, i) in state.rollouts:
                entry["continuations"] = list(state.rollouts[(t.sample_index, i)])
            prefixes.append(entry)
        record["traces"].append(
            {
                "sample_index": t.sample_index,
                "num_steps": t.num_steps,
                "steps": t.steps,
                "first_error": t.first_error,
                "prefixes": prefixes,
            }
        )
    return record


__all__ = ["Context", "ProblemState", "TraceState", "Verdict", "Verdicts", "grade_all", "label_problems", "record_of"]
