"""The study's labelling stages: one set of policy solutions, then each source's labels of them, with their cost.

- ``sample_solutions``: ``label.arith_prm.build`` (labels every-step) on the train and held-out prompt splits; the
  policy samples alone are kept in ``solutions/{train,heldout}.jsonl`` (math-shepherd rows, exact labels);
- ``label_exact``: the program's labels of the training solutions, timed (``data.arith.prm_labels.label_steps``);
- ``label_mc``: ``posttrain label mc`` (``label.mc.run_mc``) on the training solutions as base traces, N
  continuations per prefix from the same policy; each line's target is V of the prefix that ends there;
- ``label_judge``: ``posttrain annotate`` (``label.annotate.run_annotate``) with a judge in this process (the program
  judge of ``posttrain serve --judge arith``, or a local model), then ``posttrain data sharp-build``
  (``label.sharp_build.build_sharp``); a line is wrong where a ``<HAL>`` span of the span view touches it
  (``study.quality.every_step_labels``). Rows the judge never answered acceptably are recorded and get no labels.

Each labelling writes ``labels/<name>/train.jsonl`` (math-shepherd rows: ``prompt``, ``completions``, ``labels``,
and ``targets``, ``id``, ``category``, ``sample_index``) and then ``cost.json``: ``continuations`` generated,
``judge_calls``, ``seconds`` (of the run that finished it), and what else its tool reports.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import read_jsonl, write_json, write_jsonl
from posttrainlab.study.layout import COST, TRAIN, StudyLayout


def _write_cost(folder: Path, cost: dict[str, Any]) -> None:
    write_json(folder / COST, cost)


def labelled_row(row: dict[str, Any], targets: list[float]) -> dict[str, Any]:
    """A training row of one source: the solution's math-shepherd fields with the source's labels (target > 0)."""
    return {"prompt": row["prompt"], "completions": row["completions"], "labels": [t > 0 for t in targets],
            "targets": targets, "id": row["id"], "category": row["category"],
            "sample_index": row["sample_index"]}  # fmt: skip


def sample_solutions(policy: Path, data: Path, layout: StudyLayout, s) -> None:
    """The solutions every source labels (``SolutionSettings`` ``s``; module docstring)."""
    from posttrainlab.data.arith.prm_labels import ArithPRMOptions
    from posttrainlab.label.arith_prm import ArithPRMBuild, build

    settings = ArithPRMBuild(k=s.k, seed=s.seed, limit=s.problems, temperature=s.temperature,
                             max_new_tokens=s.max_new_tokens, batch_size=s.batch_size,
                             train_prompts=(s.train_split,), heldout_prompts=(s.heldout_split,))  # fmt: skip
    build(policy, data, layout.solution_build, settings, options=ArithPRMOptions(labels="every-step"))
    for split, target in (("train", layout.train_solutions), ("heldout", layout.heldout_solutions)):
        rows = read_jsonl(layout.solution_build / "math_shepherd" / f"{split}.jsonl")
        write_jsonl(target, [r for r in rows if r["source"] == "policy"])  # heldout last: the stage's marker


def label_exact(layout: StudyLayout) -> None:
    """The program's labels (every-step, missing answer on the last line), timed."""
    from posttrainlab.data.arith.prm_labels import label_steps
    from posttrainlab.data.arith.steps import parse_question

    rows = read_jsonl(layout.train_solutions)
    start = time.perf_counter()
    labels = [label_steps(parse_question(r["prompt"]), r["completions"], "every-step")[1] for r in rows]
    seconds = time.perf_counter() - start
    folder = layout.labels("exact")
    write_jsonl(folder / TRAIN, [labelled_row(r, [float(x) for x in lab]) for r, lab in zip(rows, labels, strict=True)])
    _write_cost(folder, {"seconds": seconds, "program_checks": sum(map(len, labels))})


def label_mc(policy: Path, layout: StudyLayout, n: int, s) -> None:
    """``label mc`` with ``n`` continuations per prefix (``MCSettings`` ``s``) on the training solutions."""
    from posttrainlab.data.arith.steps import parse_question
    from posttrainlab.generation.factory import make_backend
    from posttrainlab.label.mc import MCConfig, OutputConfig, RunOptions, load_problems, run_mc

    folder = layout.labels(f"mc-{n}")
    rows = read_jsonl(layout.train_solutions)
    traces = []
    for r in rows:  # the policy continues from its own prompt (instruction + question), as it was sampled
        problem = parse_question(r["prompt"])
        traces.append({"id": r["id"], "question": r["prompt"], "prompt": [{"role": "user", "content": problem.prompt}],
                       "answer": problem.answer, "steps": r["completions"]})  # fmt: skip
    write_jsonl(folder / "traces.jsonl", traces)
    problems = load_problems(str(folder / "traces.jsonl"))
    backend = make_backend(str(policy), batch_size=s.batch_size, progress=False)
    config = MCConfig(n=n, temperature=s.temperature, max_new_tokens=s.max_new_tokens, seed=s.seed)
    summary = run_mc(problems, backend, folder / "mc", config=config, output=OutputConfig(val_problems=0,
                     formats=("jsonl",)), run=RunOptions(run_info={"policy": str(policy)}))  # fmt: skip
    values: dict[tuple[str, int], dict[int, float]] = {}
    for row in read_jsonl(folder / "mc" / TRAIN):  # label mc's rows: one per prefix, V in reward
        values.setdefault((row["id"], row["sample_index"]), {})[row["step_idx"]] = float(row["reward"])
    seen: dict[str, int] = {}
    out = []
    for r in rows:  # label mc numbers the traces of a problem in file order
        j = seen[r["id"]] = seen.get(r["id"], -1) + 1
        v = values[(r["id"], j)]
        out.append(labelled_row(r, [v[i] for i in range(len(r["completions"]))]))
    write_jsonl(folder / TRAIN, out)
    _write_cost(folder, {"continuations": summary["rollouts"], "seconds": summary["session"]["seconds"], "n": n,
                         "prefixes": summary["prefixes"], "problems": summary["problems"],
                         "resumed": summary["session"]["problems"] < summary["problems"]})  # fmt: skip


class BackendJudge:
    """The judge-endpoint role of ``runners.judge_client.ChatClient`` over a ``SamplingBackend`` in this process: the
    program judge ``posttrain serve --judge arith`` serves, or a local model; one request at a time (a local model
    is not shared between threads)."""

    def __init__(self, backend):
        self.backend = backend
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, messages, *, temperature: float, max_tokens: int):
        from posttrainlab.runners.judge_client import Completion

        with self._lock:
            self.calls += 1
            text = self.backend.generate([messages], n=1, temperature=temperature, max_new_tokens=max_tokens)[0][0]
        return Completion(text, "stop")


def judge_backend(name: str, s, noise: float | None):
    """``(backend, served name)``: the program judge at ``noise``, or the model ``s.model`` (a folder, or a name
    ``posttrain model import`` knows) when ``noise`` is ``None``."""
    if noise is not None:
        from posttrainlab.serve.program_judge import ArithProgramJudge

        return ArithProgramJudge(noise=noise, seed=s.seed), f"arith-judge-{name}"
    from posttrainlab.generation.factory import make_backend
    from posttrainlab.models.gguf_import import import_model, is_import_source

    folder = import_model(s.model)[0] if is_import_source(s.model) else s.model
    return make_backend(str(folder), batch_size=1, progress=False), str(s.model)


def label_judge(layout: StudyLayout, name: str, s, noise: float | None, split: str) -> None:
    """Annotate the training solutions with one judge (``JudgeSettings`` ``s``; the program judge at ``noise``, or
    ``s.model`` when ``noise`` is ``None``), build the SHARP views, and label every line from the span view."""
    from posttrainlab.data.formats.sharp import span_piece_labels
    from posttrainlab.label.annotate import AnnotateConfig, run_annotate
    from posttrainlab.label.sharp_build import build_sharp
    from posttrainlab.study.quality import every_step_labels

    folder = layout.labels(name)
    rows = read_jsonl(layout.train_solutions)
    write_jsonl(folder / "solutions.jsonl", [{"id": r["id"], "source": "policy", "source_split": split,
                "sample_index": r["sample_index"], "question": r["prompt"], "steps": r["completions"]}
                for r in rows])  # fmt: skip
    backend, served = judge_backend(name, s, noise)
    concurrency = s.concurrency if noise is not None else 1
    settings = AnnotateConfig(
        data=str(folder / "solutions.jsonl"),
        out=folder / "annotate",
        model_name=served,
        num_threads=concurrency,
        max_attempts=s.max_attempts,
        max_tokens=s.max_tokens,
    )
    start = time.perf_counter()
    run = run_annotate(settings, BackendJudge(backend))
    seconds = time.perf_counter() - start
    summary = build_sharp(run.records, folder / "sharp", test_share=0.0)
    spans, metas = (read_jsonl(folder / "sharp" / "all" / f"{v}.jsonl") for v in ("span", "meta"))
    labels = {}
    for span, meta in zip(spans, metas, strict=True):
        pieces = span_piece_labels(span)[0]
        labels[(meta["id"], meta["sample_index"])] = every_step_labels(span["model_answer"], [x == 1 for x in pieces])
    out = [labelled_row(r, [float(x) for x in labels[key]]) for r in rows
           if (key := (r["id"], r["sample_index"])) in labels]  # fmt: skip
    write_jsonl(folder / TRAIN, out)
    _write_cost(folder, {"judge_calls": sum(r["attempts"] for r in run.records), "seconds": seconds,
                         "judge": served, "failed": summary["failed"], "status": summary["status"],
                         "resumed": run.resumed > 0})  # fmt: skip


__all__ = ["BackendJudge", "judge_backend", "label_exact", "label_judge", "label_mc", "labelled_row",
           "sample_solutions"]  # fmt: skip
