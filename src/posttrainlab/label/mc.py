"""Monte-Carlo value labelling (Polaris MC, seed 003): V(prefix) = #correct / #continuations from that prefix.

``posttrain label mc --policy DIR --data PATH --n N --out DIR`` (docs/mc-labelling.md). Written by hand:
the pipeline is the card's (branch set -> N shared-prefix continuations -> grade (+ judge relabel) ->
V per prefix -> rows), with the exact conventions below, which no library fixes for us.

**Problems and base traces.** ``--data`` holds problems (``prompt`` or ``question``, ``answer``, ``id``:
arith-v1 splits, any JSON Lines/Parquet file) or step-level traces (rows with ``steps``: each row one
base trace; rows with the same ``id``, or the same question when there is no ``id``, are one problem;
an arith-v1 question needs no ``answer``, it is read from the question). For problems, the base traces
are the policy's own samples: N continuations are drawn from the *empty* prefix (the problem's solve
rate, used by the mid-difficulty filter) and the first ``samples_per_problem`` of them are the traces.

**Steps and prefixes.** A trace is split into steps (``lines``: its non-empty lines, arith-v1's
``split_steps``; ``paragraphs``: blocks between blank lines). Row ``step_idx = i`` (0-based, ``num_steps``
= number of steps) is the prefix of steps ``0..i``; its exact label on arith-v1 is 1 iff
``first_error == -1 or i < first_error`` (``data.arith.steps``). The policy continues a prefix from
the prompt (chat template, assistant turn opened) followed by the prefix steps joined by the step
separator with one separator after the last, and the graded response is prefix + continuation.

**Values.** Prefixes ``0..num_steps-2`` get N continuations each, sampled together from one prefill
(``PrefixRequest`` with the seed ``derive_seed(seed, id, sample_index, step_idx)``). The last prefix is
the whole trace: it is graded once, with no rollout (V is 1.0 or 0.0; its continuation is the trace
itself). With the judge relabel pass the judge's verdict replaces the grade wherever it gave one.
V = correct / N; the Math-Shepherd hard label is V > 0; ``correct`` in the rows is V >= 0.5.

**Binary search** (``search="binary"``, OmegaPRM-style): on a trace whose final grade is wrong,
bisection rolls out only the prefixes it visits and stops at a zero ``z`` (measured V = 0) whose
predecessor was measured V > 0 (or ``z = 0``); every measured prefix before ``z`` is > 0, so ``z`` is
the first *measured* zero, and when V is monotone (once 0, it stays 0) it is the first zero. Without
monotonicity an earlier unvisited prefix may have V = 0: finding it would take rolling out every
prefix before ``z``, which is the full search. On a correct trace nothing is rolled out (every prefix
has one correct continuation, the trace itself). Values written: a visited prefix its measured V; an
unvisited prefix after ``z`` 0.0; an unvisited prefix before it the V of the nearest visited prefix
after it (which is > 0: the last positive probe, or the correct trace's 1.0). So the hard labels are
what the search concluded, and soft values of unvisited prefixes are copies. ``how`` in the work file
says which rule gave each value, and each row's ``value_source`` says ``measured`` (``rollout``,
``trace``) or ``inferred`` (``carried``, ``after_zero``).

**Seeds, shards, resume.** Every request's seed derives from (run seed, problem id, trace, step), so a
problem's labels do not depend on the order of problems, the shard or a restart. ``--shard I/K`` takes
the problems whose id hashes to I mod K. Each finished problem is appended as one JSON line to
``OUT/work/shard-I-of-K.jsonl`` (fsynced); a new run skips problems found in any work file, drops a
torn last line of its own, and refuses a work folder made with other labelling settings
(``OUT/work/config.json``). The outputs are written, each atomically, only when every problem is
finished, rebuilt from the work files in data order, so a killed run started again writes the same
bytes as one that never stopped, and no rollout is repeated for a finished problem.

**Outputs.** ``train.{parquet,jsonl}`` and ``val.{parquet,jsonl}`` (``val_problems`` problems held out
by id, chosen by a hash of the id alone, so every run holds out the same ones), in the card's schema;
``value_table.md``; value-filtered variants under ``band-LO-HI/`` (rows with LO <= V <= HI) and
``mid-LO-HI/`` (problems whose solve rate is in [LO, HI]); ``summary.json`` last.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed, sample_continuations
from posttrainlab.grading import Grade
from posttrainlab.progress import progress_bar

#: The user turn of every row: the question and the prefix, for a verdict-token PRM to answer yes/no.
PROMPT_VERSION = "posttrainlab-mc-prompt-v1"
PROMPT_TEMPLATE = (
    "Below are a math problem and the first steps of a solution to it.\n"
    "Are these steps correct, so that the solution can still reach the right answer? Answer yes or no.\n"
    "\n"
    "Problem:\n"
    "<<QUESTION>>\n"
    "\n"
    "Steps so far:\n"
    "<<PREFIX>>"
)
PROMPT_SHA256 = hashlib.sha256(PROMPT_TEMPLATE.encode()).hexdigest()
LABEL = "yes"
STEP_SPLITS = {"lines": "\n", "paragraphs": "\n\n"}
SEARCHES = ("full", "binary")
#: A row's ``value_source`` from the rule that gave its value (``how``; binary search in the module docstring).
VALUE_SOURCE = {"rollout": "measured", "trace": "measured", "carried": "inferred", "after_zero": "inferred"}
WORK = "work"


# ---- configuration ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MCConfig:
    """The settings that decide the labels (a work folder is only resumed with the same ones)."""

    n: int = 8
    samples_per_problem: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    search: str = "full"
    grader: str = "arith"
    step_split: str = "lines"
    stop: tuple[str, ...] = ()

    def check(self) -> None:
        if self.n < 1:
            raise BadInput(f"--n {self.n}: need at least one continuation per prefix")
        if self.samples_per_problem < 1:
            raise BadInput(f"--samples-per-problem {self.samples_per_problem}: must be at least 1")
        if self.search not in SEARCHES:
            raise BadInput(f"--search {self.search!r}: choose one of {', '.join(SEARCHES)}")
        if self.step_split not in STEP_SPLITS:
            raise BadInput(f"--step-split {self.step_split!r}: choose one of {', '.join(STEP_SPLITS)}")
        from posttrainlab.generation.transformers_backend import check_sampling

        check_sampling(self.n, self.temperature, self.top_p, self.max_new_tokens)


@dataclass(frozen=True)
class OutputConfig:
    """Settings that only shape the written files (they may change between a run and its resume)."""

    val_problems: int = 128
    keep_band: tuple[float, float] | None = None
    mid_difficulty: tuple[float, float] | None = None
    source: str = "arith-v1"
    formats: tuple[str, ...] = ("parquet", "jsonl")
    text_columns: bool = True  # also write `question` and `steps` (grouped PRM training reads them)

    def check(self) -> None:
        if self.val_problems < 0:
            raise BadInput(f"--val-problems {self.val_problems}: must be >= 0")
        for name, band in (("--keep-band", self.keep_band), ("--mid-difficulty", self.mid_difficulty)):
            if band is not None and not 0 <= band[0] <= band[1] <= 1:
                raise BadInput(f"{name} {band[0]:g} {band[1]:g}: need 0 <= LO <= HI <= 1")


# ---- problems --------------------------------------------------------------------------------------


@dataclass
class Problem:
    """One problem to label: its prompt (a chat), the question shown in rows, the answer, optional traces."""

    id: str
    prompt: list[dict[str, str]]
    question: str
    answer: Any
    index: int
    traces: list[list[str]] | None = None  # base traces read from a step-level file, else sampled

    def fingerprint(self) -> str:
        """A hash of what labelling reads, so a resumed run notices a changed data file."""
        blob = json.dumps([self.prompt, str(self.answer), self.traces], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _question_text(row: dict[str, Any]) -> str | None:
    for key in ("prompt", "question", "problem"):
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if key == "prompt" and isinstance(value, list) and value:
            users = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
            if users and isinstance(users[-1], str):
                return users[-1]
    return None


def _prompt_of(row: dict[str, Any], question: str) -> list[dict[str, str]]:
    prompt = row.get("prompt")
    if isinstance(prompt, list):
        return prompt
    return [{"role": "user", "content": question}]


def _answer_of(row: dict[str, Any], question: str, where: str, grader: str) -> Any:
    if row.get("answer") is not None and str(row["answer"]).strip():
        return row["answer"]
    if grader == "arith":
        from posttrainlab.data.arith.steps import parse_question

        problem = parse_question(question)
        if problem is not None:
            return problem.answer
    raise BadInput(f"{where}: row has no answer (and its question is not an arith-v1 question)")


def _rows_of(data: str, split: str | None) -> tuple[Iterable[dict[str, Any]], str]:
    """The rows of ``data`` and a name for messages: an ``hf://`` path, a dataset folder's split, or a file."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.loading import parse_data_path, split_file
    from posttrainlab.data.manifest import has_manifest

    if data.startswith("hf://"):
        if split is not None:
            raise BadInput(f"--split {split}: name the split in the hf:// path (hf://owner/name[/CONFIG]:SPLIT)")
        return iter_rows(data), data
    ref = parse_data_path(data)
    path = Path(ref.location)
    if (path.is_dir() and has_manifest(path)) or ref.split or ref.on_hub:
        file = split_file(data, split or ref.split or "rl_train")
        return iter_rows(file), str(file)
    if path.is_dir():
        raise BadInput(f"{data}: folder has no manifest.json; pass a dataset folder or a .jsonl/.parquet file")
    if split is not None:
        raise BadInput(f"--split {split}: {data} is a file, not a dataset folder")
    return iter_rows(path), str(path)


def load_problems(
    data: str, *, split: str | None = None, limit: int | None = None, grader: str = "arith", step_split: str = "lines"
) -> list[Problem]:
    """The problems of ``data`` in file order (module docstring for the two kinds of rows)."""
    rows, where = _rows_of(data, split)
    problems: dict[str, Problem] = {}
    kind = None
    for index, row in enumerate(rows):
        line = f"{where}: row {index}"
        question = _question_text(row)
        if question is None:
            raise BadInput(f"{line}: no prompt, question or problem text")
        has_steps = "steps" in row
        if kind is None:
            kind = "traces" if has_steps else "problems"
        elif kind != ("traces" if has_steps else "problems"):
            raise BadInput(f"{line}: mixes problem rows and step-level trace rows")
        if has_steps:
            steps = row["steps"]
            if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
                raise BadInput(f"{line}: steps is not a list of strings")
            pid = (
                str(row["id"])
                if row.get("id") is not None
                else "q-" + hashlib.sha256(question.encode()).hexdigest()[:12]
            )
            if pid not in problems:
                if limit is not None and len(problems) >= limit:
                    continue
                answer = _answer_of(row, question, line, grader)
                problems[pid] = Problem(pid, _prompt_of(row, question), question, answer, len(problems), [])
            clean = (
                [s.strip() for s in steps if s.strip()] if step_split == "lines" else [s for s in steps if s.strip()]
            )
            problems[pid].traces.append(clean)
            continue
        if limit is not None and len(problems) >= limit:
            break
        pid = str(row.get("id", f"row-{index}"))
        if pid in problems:
            raise BadInput(f"{line}: id {pid!r} repeats (problem rows need unique ids)")
        answer = _answer_of(row, question, line, grader)
        problems[pid] = Problem(pid, _prompt_of(row, question), question, answer, len(problems))
    if not problems:
        raise BadInput(f"{where}: no problems to label")
    return list(problems.values())


# ---- steps, prefixes, grades -----------------------------------------------------------------------


def split_trace(text: str, how: str = "lines") -> list[str]:
    """The steps of a trace: non-empty stripped lines, or blocks between blank lines.

    >>> split_trace("12 + 3 = 15\\n\\nAnswer: 15\\n"), split_trace("a\\nb\\n\\nc", "paragraphs")
    (['12 + 3 = 15', 'Answer: 15'], ['a\\nb', 'c'])
    """
    if how == "lines":
        from posttrainlab.data.arith.steps import split_steps

        return split_steps(text)
    return [block.strip() for block in text.split("\n\n") if block.strip()]


def prefix_text(steps: Sequence[str], step_idx: int, how: str = "lines") -> str:
    """What the policy continues from: steps ``0..step_idx`` joined, with one separator after the last.

    >>> prefix_text(["12 + 3 = 15", "Answer: 15"], 0)
    '12 + 3 = 15\\n'
    """
    sep = STEP_SPLITS[how]
    return sep.join(steps[: step_idx + 1]) + sep


def grade_all(grader, responses: Sequence[str], answer: Any) -> list[Grade]:
    """Grades of many responses against one answer (``grade_many`` where the grader has it)."""
    if not responses:
        return []
    if hasattr(grader, "grade_many"):
        return list(grader.grade_many(list(responses), [answer] * len(responses)))
    return [grader.grade(r, answer) for r in responses]


def exact_first_error(problem: Problem, steps: Sequence[str]) -> int | None:
    """``first_error`` of an arith-v1 trace (-1 when all right), or None when the question is not arith-v1."""
    from posttrainlab.data.arith.steps import first_error, parse_question

    parsed = parse_question(problem.question)
    if parsed is None or str(parsed.answer) != str(problem.answer):
        return None
    return first_error(parsed, list(steps))


def exact_labels(first_error: int, num_steps: int) -> list[int]:
    """Exact label per prefix: 1 while every step so far is right.

    >>> exact_labels(1, 3), exact_labels(-1, 2)
    ([1, 0, 0], [1, 1])
    """
    return [1 if first_error == -1 or i < first_error else 0 for i in range(num_steps)]


# ---- binary search ---------------------------------------------------------------------------------


class FirstZeroSearch:
    """Bisection for a >0 -> 0 step of V on one trace: the first zero when V is monotone (module docstring).

    ``first_zero`` ends measured 0 with ``first_zero - 1`` measured > 0 (or ``first_zero == 0``), and no
    measured prefix before it is 0; ``None`` on a correct trace. ``values()`` gives ``(V, how)`` per prefix.

    >>> s = FirstZeroSearch(num_steps=6, final_value=0.0)
    >>> probes = []
    >>> while (i := s.next_probe()) is not None:
    ...     probes.append(i)
    ...     s.record(i, 0.5 if i < 3 else 0.0)
    >>> probes, s.first_zero
    ([2, 3], 3)
    >>> s.values()  # doctest: +NORMALIZE_WHITESPACE
    [(0.5, 'carried'), (0.5, 'carried'), (0.5, 'rollout'), (0.0, 'rollout'), (0.0, 'after_zero'),
     (0.0, 'trace')]
    """

    def __init__(self, num_steps: int, final_value: float):
        self.num_steps = num_steps
        self.visited: dict[int, float] = {num_steps - 1: final_value}
        self.lo = -1  # the last prefix known to be positive (-1: none yet)
        self.first_zero: int | None = num_steps - 1 if final_value == 0 else None

    def next_probe(self) -> int | None:
        if self.first_zero is None or self.first_zero - self.lo <= 1:
            return None
        return (self.lo + self.first_zero) // 2

    def record(self, step_idx: int, value: float) -> None:
        self.visited[step_idx] = value
        if value > 0:
            self.lo = step_idx
        else:
            self.first_zero = step_idx

    def values(self) -> list[tuple[float, str]]:
        out = []
        last = self.num_steps - 1
        for i in range(self.num_steps):
            if i in self.visited:
                out.append((self.visited[i], "trace" if i == last else "rollout"))
            elif self.first_zero is not None and i > self.first_zero:
                out.append((0.0, "after_zero"))
            else:
                nearest = min(j for j in self.visited if j > i)
                out.append((self.visited[nearest], "carried"))
        return out


def simulate_binary(values: Sequence[float]) -> tuple[list[float], int]:
    """Binary-search values of one trace from its full labelling, and the prefixes it would roll out.

    With per-prefix seeds a binary run measures the same V as a full run at every prefix it visits, so
    this gives its labels exactly from a full run's values (the last value is the trace's own grade).

    >>> simulate_binary([0.75, 0.5, 0.0, 0.25, 0.0])
    ([0.5, 0.5, 0.0, 0.0, 0.0], 2)
    """
    search = FirstZeroSearch(len(values), values[-1])
    visits = 0
    while (i := search.next_probe()) is not None:
        search.record(i, values[i])
        visits += 1
    return [v for v, _ in search.values()], visits


# ---- labelling one group of problems ---------------------------------------------------------------


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


def _root_request(problem: Problem, seed: int) -> PrefixRequest:
    return PrefixRequest(problem.prompt, "", derive_seed(seed, problem.id, "root"))


def _prefix_request(problem: Problem, sample_index: int, steps: list[str], i: int, cfg: MCConfig) -> PrefixRequest:
    return PrefixRequest(
        problem.prompt, prefix_text(steps, i, cfg.step_split), derive_seed(cfg.seed, problem.id, sample_index, i)
    )


class Verdicts:
    """Correctness of a problem's responses: graded (and relabelled) once per distinct text, then cached.

    ``get`` returns ``(final, raw)`` per response: ``final`` is the judge's verdict when the relabel pass
    runs and gave one, else the grader's; ``raw`` is always the grader's.
    """

    def __init__(self, ctx: Context, problem: Problem):
        self.ctx, self.problem = ctx, problem
        self.cache: dict[str, tuple[bool, bool]] = {}

    def get(self, responses: Sequence[str]) -> list[tuple[bool, bool]]:
        new = list(dict.fromkeys(r for r in responses if r not in self.cache))
        if new:
            grades = grade_all(self.ctx.grader, new, self.problem.answer)
            final = [g.correct for g in grades]
            if self.ctx.relabeler is not None:
                final = self.ctx.relabeler.relabel(self.problem.question, self.problem.answer, new, grades)
            for r, f, g in zip(new, final, grades, strict=True):
                self.cache[r] = (bool(f), g.correct)
        return [self.cache[r] for r in responses]


def label_problems(problems: Sequence[Problem], ctx: Context) -> list[dict[str, Any]]:
    """Label a group of problems together (one backend call per round); one work record per problem."""
    cfg = ctx.config
    sep = STEP_SPLITS[cfg.step_split]
    n_root = max(cfg.n, cfg.samples_per_problem)
    roots = ctx.sample([_root_request(p, cfg.seed) for p in problems], n_root)
    states = []
    for problem, root in zip(problems, roots, strict=True):
        verdicts = Verdicts(ctx, problem)
        traces_text = problem.traces
        if traces_text is None:  # the policy's own samples: the first ones drawn from the empty prefix
            traces_text = [split_trace(t, cfg.step_split) for t in root[: cfg.samples_per_problem]]
        traces = []
        for sample_index, steps in enumerate(traces_text):
            t = {
                "sample_index": sample_index,
                "steps": list(steps),
                "num_steps": len(steps),
                "first_error": exact_first_error(problem, steps) if steps else None,
                "measured": {},
            }
            if steps:  # the whole trace (last prefix) is graded once, with no rollout
                t["measured"][len(steps) - 1] = verdicts.get([sep.join(steps)])
            traces.append(t)
        states.append({"problem": problem, "root": root, "verdicts": verdicts, "traces": traces, "rollouts": {}})
    if cfg.search == "full":
        probes = [(s, t, i) for s in states for t in s["traces"] for i in range(t["num_steps"] - 1)]
        _roll_out(probes, ctx)
    else:
        searches = []
        for s in states:
            for t in s["traces"]:
                if t["num_steps"]:
                    ((final, _raw),) = t["measured"][t["num_steps"] - 1]
                    t["search"] = FirstZeroSearch(t["num_steps"], 1.0 if final else 0.0)
                    searches.append((s, t))
        while probes := [(s, t, i) for s, t in searches if (i := t["search"].next_probe()) is not None]:
            _roll_out(probes, ctx)  # lockstep: one call per round, one probe per trace still searching
            for _s, t, i in probes:
                grades = t["measured"][i]
                t["search"].record(i, sum(f for f, _ in grades) / len(grades))
    return [_record(state, ctx) for state in states]


def _roll_out(probes: list[tuple[dict, dict, int]], ctx: Context) -> None:
    """N continuations from each probed prefix (one backend call), graded into the trace's ``measured``."""
    cfg = ctx.config
    requests = [_prefix_request(s["problem"], t["sample_index"], t["steps"], i, cfg) for s, t, i in probes]
    for (s, t, i), out in zip(probes, ctx.sample(requests, cfg.n), strict=True):
        s["rollouts"][(t["sample_index"], i)] = out
        prefix = prefix_text(t["steps"], i, cfg.step_split)
        t["measured"][i] = s["verdicts"].get([prefix + c for c in out])


def _record(state: dict, ctx: Context) -> dict[str, Any]:
    """The work record of one labelled problem (one JSON line in the work file)."""
    cfg = ctx.config
    problem: Problem = state["problem"]
    judged = ctx.relabeler is not None
    root = state["verdicts"].get(state["root"])
    record: dict[str, Any] = {
        "id": problem.id,
        "fingerprint": problem.fingerprint(),
        "solve_rate": sum(f for f, _ in root) / len(root),
        "root": {"correct": [int(f) for f, _ in root]},
        "rollouts": len(state["root"]) + sum(len(o) for o in state["rollouts"].values()),
        "traces": [],
    }
    if judged:
        record["root"]["raw"] = [int(r) for _, r in root]
    if ctx.keep_continuations:
        record["root"]["continuations"] = list(state["root"])
    for t in state["traces"]:
        L = t["num_steps"]
        values = (
            t["search"].values()
            if cfg.search == "binary" and L
            else [(_mean(t["measured"][i]), "trace" if i == L - 1 else "rollout") for i in range(L)]
        )
        prefixes = []
        for i, (value, how) in enumerate(values):
            grades = t["measured"].get(i, [])
            entry: dict[str, Any] = {"step_idx": i, "how": how, "value": value, "grades": [int(f) for f, _ in grades]}
            if judged:
                entry["raw"] = [int(r) for _, r in grades]
            if ctx.keep_continuations and (t["sample_index"], i) in state["rollouts"]:
                entry["continuations"] = list(state["rollouts"][(t["sample_index"], i)])
            prefixes.append(entry)
        trace_record = {k: t[k] for k in ("sample_index", "num_steps", "steps", "first_error")}
        trace_record["prefixes"] = prefixes
        record["traces"].append(trace_record)
    return record


def _mean(grades: list[tuple[bool, bool]]) -> float:
    return sum(f for f, _ in grades) / len(grades)


# ---- rows, splits, filters, tables -----------------------------------------------------------------


def row_messages(question: str, prefix: str) -> list[dict[str, str]]:
    """The row's chat: the user judge prompt (question + prefix) and the placeholder assistant verdict."""
    text = PROMPT_TEMPLATE.replace("<<QUESTION>>", question).replace("<<PREFIX>>", prefix)
    return [{"role": "user", "content": text}, {"role": "assistant", "content": LABEL}]


def rows_of(
    record: dict[str, Any], problem: Problem, *, source: str, step_split: str, text_columns: bool = True
) -> list[dict[str, Any]]:
    """The Polaris MC rows of one work record: one per prefix, traces in order, prefixes in order.

    Each row has the card's columns and ``value_source`` (``measured`` or ``inferred``, an optional
    column of the mc-value schema, so the rows still concatenate with other rows of the card's schema).
    With ``text_columns`` each row also carries ``question`` and the trace's ``steps`` (all of them;
    ``step_idx`` says where the prefix ends), which grouped PRM training needs.
    """
    sep = STEP_SPLITS[step_split]
    rows = []
    for t in record["traces"]:
        for p in t["prefixes"]:
            v = float(p["value"])
            rows.append(
                {
                    "messages": row_messages(problem.question, sep.join(t["steps"][: p["step_idx"] + 1])),
                    "reward": v,
                    "correct": v >= 0.5,
                    "label": LABEL,
                    "id": problem.id,
                    "source": source,
                    "sample_index": t["sample_index"],
                    "step_idx": p["step_idx"],
                    "num_steps": t["num_steps"],
                    "loss_weight": 1.0,
                    "enable_thinking": False,
                    "value_source": VALUE_SOURCE[p["how"]],
                }
            )
            if text_columns:
                rows[-1].update(question=problem.question, steps=list(t["steps"]))
    return rows


def validation_ids(ids: Sequence[str], k: int) -> set[str]:
    """The ``k`` problem ids held out: smallest hash of the id alone (independent of order, seed and shard).

    >>> sorted(validation_ids(["a", "b", "c", "d"], 2)) == sorted(validation_ids(["d", "c", "b", "a"], 2))
    True
    """
    return set(sorted(ids, key=lambda i: hashlib.sha256(f"mc-val\x1f{i}".encode()).hexdigest())[:k])


def keep_band(rows: Iterable[dict[str, Any]], lo: float, hi: float) -> list[dict[str, Any]]:
    """Rows whose V lies in [lo, hi] (the card's uncertain band is 0.1..0.9).

    >>> [r["reward"] for r in keep_band([{"reward": v} for v in (0.0, 0.1, 0.5, 0.9, 1.0)], 0.1, 0.9)]
    [0.1, 0.5, 0.9]
    """
    return [r for r in rows if lo <= r["reward"] <= hi]


def mid_difficulty(rows: Iterable[dict[str, Any]], solve_rate: dict[str, float], lo: float, hi: float) -> list[dict]:
    """Rows of problems whose solve rate lies in [lo, hi] (neither reliably solved nor reliably failed)."""
    return [r for r in rows if lo <= solve_rate[r["id"]] <= hi]


VALUE_BUCKETS = (
    ("rows", "rows"),
    ("v_eq_0", "V == 0"),
    ("v_eq_1", "V == 1"),
    ("v_mid", "0 < V < 1"),
    ("v_10_90", "V in [0.1, 0.9]"),
    ("correct", "correct (V >= 0.5)"),
    ("mean_v", "mean V"),
)


def value_rows(stats: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The card's value-distribution table as ``(bucket label, one formatted cell per column)`` rows."""
    rows = []
    for key, label in VALUE_BUCKETS:
        cells = []
        for name in stats:
            value = stats[name].get(key)
            if value is None:
                cells.append("-")
            elif key == "rows":
                cells.append(str(value))
            elif key == "mean_v":
                cells.append(f"{value:.3f}")
            else:
                cells.append(f"{100 * value:.1f}%")
        rows.append((label, cells))
    return rows


def value_table(stats: dict[str, dict[str, Any]]) -> str:
    """The card's value-distribution table as Markdown, one column per split/variant."""
    names = list(stats)
    lines = ["| bucket | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in value_rows(stats)]
    return "\n".join(lines) + "\n"


# ---- the work folder -------------------------------------------------------------------------------


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"I/K"`` -> ``(I, K)`` with 0 <= I < K; None -> ``(0, 1)``.

    >>> parse_shard("1/4"), parse_shard(None)
    ((1, 4), (0, 1))
    """
    if text is None:
        return 0, 1
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise BadInput(f"--shard {text!r}: expected I/K, e.g. 0/4") from None
    if not 0 <= i < k:
        raise BadInput(f"--shard {text!r}: need 0 <= I < K")
    return i, k


def in_shard(problem_id: str, shard: tuple[int, int]) -> bool:
    return derive_seed("shard", problem_id) % shard[1] == shard[0]


class WorkDir:
    """``OUT/work``: the labelling config and one JSON Lines file of finished problems per shard."""

    def __init__(self, out: Path, shard: tuple[int, int]):
        self.dir = Path(out) / WORK
        self.shard = shard
        self.file = self.dir / f"shard-{shard[0]}-of-{shard[1]}.jsonl"

    def check_config(self, config: dict[str, Any]) -> None:
        """Write the config on the first run; refuse a different one later (the labels would mix)."""
        from posttrainlab.data.atomic import write_text

        path = self.dir / "config.json"
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise BadInput(f"{path}: not valid JSON; remove the work folder or use a new --out") from None
            changed = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            if changed:
                diff = ", ".join(f"{k}: {old.get(k)!r} -> {config.get(k)!r}" for k in changed)
                raise BadInput(f"{path}: this work folder was labelled with other settings ({diff}); use a new --out")
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")

    def _read(self, path: Path, repair: bool) -> list[dict[str, Any]]:
        from posttrainlab.data.jsonl import loads_record

        data = path.read_bytes()
        records = []
        good_end = 0
        lines = data.split(b"\n")
        for lineno, line in enumerate(lines, start=1):
            last = lineno == len(lines)
            if not line.strip():
                if not last:
                    good_end += len(line) + 1
                continue
            if last:  # no newline after it: a write that was cut off
                break
            records.append(loads_record(path, lineno, line))
            good_end += len(line) + 1
        if repair and good_end < len(data):
            with open(path, "r+b") as f:
                f.truncate(good_end)
        return records

    def finished(self) -> dict[str, dict[str, Any]]:
        """Every finished problem in any shard's work file, by id (the first record of an id wins)."""
        done: dict[str, dict[str, Any]] = {}
        if not self.dir.is_dir():
            return done
        for path in sorted(self.dir.glob("shard-*.jsonl")):
            for record in self._read(path, repair=path == self.file):
                done.setdefault(record["id"], record)
        return done

    def append(self, record: dict[str, Any]) -> None:
        from posttrainlab.data.jsonl import append_jsonl

        self.dir.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.file, record)


# ---- the run ---------------------------------------------------------------------------------------


def run_mc(
    problems: Sequence[Problem],
    backend,
    out: str | os.PathLike,
    *,
    config: MCConfig = MCConfig(),
    output: OutputConfig = OutputConfig(),
    relabeler=None,
    shard: tuple[int, int] = (0, 1),
    problems_per_call: int = 1,
    keep_continuations: bool = False,
    run_info: dict[str, Any] | None = None,
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Label ``problems`` into ``out`` (module docstring); returns the summary (``finished`` False for a partial shard).

    ``problems_per_call`` problems share each backend call (their requests keep their own seeds).
    """
    from posttrainlab.grading import get_grader

    config.check()
    output.check()
    if problems_per_call < 1:
        raise BadInput(f"--problems-per-call {problems_per_call}: must be at least 1")
    if output.val_problems and output.val_problems >= len(problems):
        raise BadInput(
            f"--val-problems {output.val_problems}: only {len(problems)} problems to label; "
            "hold out fewer (the card holds out 128 of ~8k)"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out}: exists and is not a folder")
    work = WorkDir(out, shard)
    identity = {
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        **(run_info or {}),
        "prompt_version": PROMPT_VERSION,
        "judge": relabeler.config() if relabeler is not None else None,
    }
    work.check_config(identity)
    done = work.finished()
    for p in problems:
        if p.id in done and done[p.id].get("fingerprint") != p.fingerprint():
            raise BadInput(f"{work.dir}: problem {p.id!r} was labelled from different data; use a new --out")
    todo = [p for p in problems if p.id not in done and in_shard(p.id, shard)]
    grader = get_grader(config.grader)
    ctx = Context(backend, grader, config, relabeler, keep_continuations)
    start = time.perf_counter()
    try:
        with progress_bar(progress) as bar:
            task = bar.add_task(f"labelling (n={config.n}, {config.search})", total=len(todo))
            for g in range(0, len(todo), problems_per_call):
                group = todo[g : g + problems_per_call]
                for record in label_problems(group, ctx):
                    work.append(record)
                    done[record["id"]] = record
                    if on_record is not None:
                        on_record(record)
                bar.advance(task, len(group))
    finally:
        if hasattr(grader, "close"):
            grader.close()
    seconds = time.perf_counter() - start
    missing = [p.id for p in problems if p.id not in done]
    session = {"problems": len(todo), "seconds": seconds, **ctx.counters}
    if relabeler is not None:
        session["judge"] = relabeler.stats.as_dict()
    if missing:
        return {"finished": False, "missing": len(missing), "session": session}
    summary = finalize(problems, done, out, config=config, output=output, identity=identity)
    summary["session"] = session
    return summary


def finalize(
    problems: Sequence[Problem],
    records: dict[str, dict[str, Any]],
    out: Path,
    *,
    config: MCConfig,
    output: OutputConfig,
    identity: dict[str, Any],
) -> dict[str, Any]:
    """Write the rows, splits, variants, value table and summary from the finished work records."""
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.formats.mc_value import mc_stats
    from posttrainlab.data.formats.writers import write_rows

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
    table = value_table(stats)
    write_text(out / "value_table.md", table)
    summary = {
        "config": identity,
        "output": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(output).items()},
        "prompt": {"version": PROMPT_VERSION, "sha256": PROMPT_SHA256},
        "problems": len(problems),
        "val_ids": sorted(val_ids),
        **totals,
        "prefixes_by_rule": dict(sorted(hows.items())),
        "prefixes_by_source": {
            src: sum(k for how, k in hows.items() if VALUE_SOURCE[how] == src) for src in ("measured", "inferred")
        },
        "mean_solve_rate": sum(solve_rate.values()) / len(solve_rate),
        "value_table": stats,
        "files": files,
        "finished": True,
    }
    write_text(out / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary


def read_work(out: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The config and every finished record of a labelling run's work folder (for ``mc-agreement``)."""
    work = WorkDir(Path(out), (0, 1))
    path = work.dir / "config.json"
    if not path.is_file():
        raise BadInput(f"{out}: no {WORK}/config.json; is this a `posttrain label mc` output folder?")
    config = json.loads(path.read_text(encoding="utf-8"))
    records = []
    for p in sorted(work.dir.glob("shard-*.jsonl")):
        records += work._read(p, repair=False)
    seen: dict[str, dict[str, Any]] = {}
    for r in records:
        seen.setdefault(r["id"], r)
    return config, list(seen.values())


__all__ = [
    "Context",
    "FirstZeroSearch",
    "MCConfig",
    "OutputConfig",
    "PROMPT_SHA256",
    "PROMPT_TEMPLATE",
    "PROMPT_VERSION",
    "Problem",
    "WorkDir",
    "exact_labels",
    "finalize",
    "keep_band",
    "label_problems",
    "load_problems",
    "mid_difficulty",
    "parse_shard",
    "prefix_text",
    "read_work",
    "row_messages",
    "rows_of",
    "run_mc",
    "simulate_binary",
    "split_trace",
    "validation_ids",
    "value_rows",
    "value_table",
]
