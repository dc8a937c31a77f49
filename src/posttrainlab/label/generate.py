"""SHARP generation: k independent solutions per problem from a policy, split into steps.

The SHARP card (seed 000, "Generation") samples **four independent solutions per problem** at
temperature ``0.7`` and top-p ``0.8`` with a plain math system prompt asking for step-by-step
reasoning with steps separated by blank lines. ``run_generate`` does that with any
``SamplingBackend`` and writes one row per solution to ``OUT/generations.jsonl``::

    {"id", "source", "source_split", "sample_index", "question", "answer", "text", "steps", "step_split"}

``source`` / ``source_split`` say where the problem came from (``arith-v1`` / ``test``), so a corpus
built from a benchmark's test problems can be told apart later (``label.sharp_build`` warns).

**Inputs** (:func:`load_problems`):

- a manifest-backed dataset (``DIR:SPLIT``, ``DIR/CONFIG/SPLIT.jsonl``), read with checksums through
  ``data.loading``; ``source`` is the manifest's ``dataset`` name, ``source_split`` the split;
- any ``.jsonl`` / ``.json`` / ``.parquet`` file or ``hf://`` path (``data.formats.readers``). The
  question is the first of the fields ``question``, ``problem``, ``prompt`` (a string, or a chat whose
  last user message is taken) that holds text (``data.problems.row_question``); the id is ``id`` or
  ``unique_id`` (else ``row-<i>``); ``source`` / ``source_split`` are the row's ``source`` / ``split`` fields,
  else the file's name (and, when the file is named after a split such as ``test.jsonl``, that split); the
  reference answer, when there is one, is ``answer``.

**Steps** (``step_split``): SHARP splits on blank lines. A policy trained on arith-v1 writes one
calculation per line with no blank line, so ``auto`` (the default) splits a solution on blank lines
when it holds one and on single lines otherwise; ``blank`` and ``lines`` force one rule. Pieces are
stripped and empty pieces dropped; the annotator then sees the steps joined by one blank line
(``label.annotate.solution_text``), so the span view and the step view cut at the same places. The rules
are ``data.step_split``'s (``GENERATE_STEP_SPLITS``).

**Resumable**: rows are appended per finished chunk of problems (one flushed line each); a restart
with the same settings skips problems whose k samples are all there (a partial problem is drawn
again and its earlier lines are ignored). A resumed run draws other samples than an unbroken one
would (each chunk is seeded from ``seed`` and its position), which is harmless for sampling.

Written by hand: SHARP's generation settings and the arith-v1 step rules are this project's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from posttrainlab.data.jsonl import append_jsonl, write_json
from posttrainlab.data.problems import QUESTION_FIELDS, row_question
from posttrainlab.data.step_split import GENERATE_STEP_SPLITS, check_step_split, cut_steps
from posttrainlab.errors import BadInput, at_least_one

SYSTEM_PROMPT = (
    "You are a careful math solver. Solve the problem step by step. Put each step in its own paragraph, "
    "separating consecutive steps with a blank line, and state the final answer in the last step."
)
ID_FIELDS = ("id", "unique_id")
SPLIT_NAMES = ("train", "test", "validation", "dev", "val", "eval")
RUN_FILE = "generations.jsonl"
SETTINGS_FILE = "generate.json"


def split_solution(text: str, mode: str = "auto") -> tuple[list[str], str]:
    """``(steps, rule used)``: the solution cut on blank lines or on lines (module docstring; ``data.step_split``).

    >>> split_solution("12 * 4 = 48\\nAnswer: 48")
    (['12 * 4 = 48', 'Answer: 48'], 'lines')
    >>> split_solution("First, 12 * 4 = 48.\\nSo\\n\\n  the answer is 48. \\n\\n\\n")
    (['First, 12 * 4 = 48.\\nSo', 'the answer is 48.'], 'blank')
    """
    check_step_split(mode, GENERATE_STEP_SPLITS)
    return cut_steps(text, mode)


def load_problems(data: str, limit: int | None = None) -> list[dict[str, Any]]:
    """``{id, source, source_split, question, answer}`` for each problem of ``data`` (module docstring)."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.loading import row_source
    from posttrainlab.data.manifest import load_manifest

    found = row_source(data)
    records = list(iter_rows(found.path))
    if found.root is not None:
        source, split = str(load_manifest(found.root).get("dataset") or found.root.name), found.split
    else:
        name = data.rstrip("/").rsplit("/", 1)[-1]
        stem = re.sub(r"\.(jsonl|json|parquet)$", "", name)
        source = stem
        split = stem.rsplit(":", 1)[-1] if ":" in stem else (stem if stem in SPLIT_NAMES else None)
    problems, seen = [], set()
    for i, row in enumerate(records):
        if limit is not None and len(problems) >= limit:
            break
        question = row_question(row)
        if question is None:
            raise BadInput(f"{data}: row {i}: no question text in any of the fields {', '.join(QUESTION_FIELDS)}")
        pid = next((str(row[k]) for k in ID_FIELDS if row.get(k) is not None), f"row-{i}")
        if pid in seen:
            raise BadInput(f"{data}: row {i}: id {pid!r} repeats (problem ids must be unique)")
        seen.add(pid)
        problems.append(
            {
                "id": pid,
                "source": str(row.get("source") or source),
                "source_split": row.get("split") or split,
                "question": question,
                "answer": row.get("answer"),
            }
        )
    if not problems:
        raise BadInput(f"{data}: no problems")
    return problems


def build_messages(question: str, system_prompt: str | None = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The chat sent to the policy: the system prompt (unless empty) and the question.

    >>> [m["role"] for m in build_messages("What is 2 + 3?")], build_messages("q", "")
    (['system', 'user'], [{'role': 'user', 'content': 'q'}])
    """
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": question}]


@dataclass(frozen=True)
class GenerateConfig:
    """One generation run (flag names of ``posttrain generate``)."""

    model: str
    data: str
    out: Path
    k: int = 4
    backend: str = "transformers"
    model_url: str | None = None
    api_key: str | None = None
    temperature: float = 0.7
    top_p: float = 0.8
    max_new_tokens: int = 512
    limit: int | None = None
    seed: int = 0
    step_split: str = "auto"
    system_prompt: str | None = SYSTEM_PROMPT
    batch_size: int = 32
    chunk: int = 64  # problems per generate call (and per resumable write)

    def check(self) -> None:
        at_least_one(True, k=self.k)
        if self.temperature < 0:
            raise BadInput(f"--temperature {self.temperature}: must be >= 0")
        if not 0 < self.top_p <= 1:
            raise BadInput(f"--top-p {self.top_p}: must be in (0, 1]")
        at_least_one(True, limit=self.limit)
        check_step_split(self.step_split, GENERATE_STEP_SPLITS)
        from posttrainlab.generation.factory import BACKENDS

        if self.backend not in BACKENDS:
            raise BadInput(f"--backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.model_url is not None and self.backend != "openai":
            raise BadInput(f"--model-url is for --backend openai, not {self.backend}")
        if self.backend == "openai" and not self.model_url:
            raise BadInput("--backend openai needs --model-url (the endpoint, e.g. http://127.0.0.1:8000/v1)")
        if self.chunk < 1 or self.batch_size < 1 or self.max_new_tokens < 1:
            raise BadInput("--batch-size, --chunk and --max-new-tokens must be at least 1")

    def settings(self) -> dict[str, Any]:
        """What must match for a restart to resume (not the output folder or speed knobs)."""
        keep = ("model", "data", "k", "backend", "temperature", "top_p", "max_new_tokens", "limit", "seed")
        d = asdict(self)
        return {k: d[k] for k in (*keep, "step_split", "system_prompt")}


def make_backend(cfg: GenerateConfig):
    """The policy's backend, by ``generation.factory.make_backend`` (``--backend``)."""
    from posttrainlab.generation.factory import make_backend as factory

    extra = {"progress": False} if cfg.backend == "transformers" else {}  # run_generate shows its own bar
    return factory(
        cfg.model,
        backend=cfg.backend,
        base_url=cfg.model_url,
        api_key=cfg.api_key,
        batch_size=cfg.batch_size,
        **extra,
    )


def _finished(path: Path, problems: list[dict[str, Any]], k: int) -> set[str]:
    """Problem ids with all k samples in the run file (a cut last line is dropped by ``read_run_file``)."""
    from posttrainlab.data.runfile import read_run_file

    records, _ = read_run_file(path)
    by_id: dict[str, set[int]] = {}
    for rec in records:
        by_id.setdefault(str(rec.get("id")), set()).add(rec.get("sample_index"))
    wanted = {p["id"] for p in problems}
    return {pid for pid, got in by_id.items() if pid in wanted and got >= set(range(k))}


def _check_settings(out: Path, cfg: GenerateConfig) -> None:
    """``BadInput`` when ``out`` holds generations made with other settings; reads only (``run_generate``)."""
    path = out / SETTINGS_FILE
    settings = cfg.settings()
    if path.is_file() and (out / RUN_FILE).is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = [k for k in settings if before.get(k) != settings[k]]
        if changed:
            raise BadInput(
                f"{out}: holds generations made with other settings ({', '.join(changed)} differ); use another --out"
            )


def read_generations(path: Path) -> list[dict[str, Any]]:
    """The complete rows of a run file, one per (problem, sample), in file order, first copy kept."""
    from posttrainlab.data.runfile import read_run_file

    records, _ = read_run_file(path)
    rows, seen = [], set()
    for rec in records:
        key = (rec.get("id"), rec.get("sample_index"))
        if key not in seen:
            seen.add(key)
            rows.append(rec)
    return rows


def run_generate(
    cfg: GenerateConfig,
    backend=None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Path, int, int]:
    """Sample ``cfg.k`` solutions per problem into ``OUT/generations.jsonl``: ``(file, new rows, resumed problems)``.

    Every check comes before the first write: the settings, the problems, an earlier run's settings, then the
    backend (a missing model or an uninstalled vLLM is refused with ``OUT`` untouched).
    """
    cfg.check()
    problems = load_problems(cfg.data, cfg.limit)
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out}: exists and is not a folder")
    _check_settings(out, cfg)
    run_file = out / RUN_FILE
    done = _finished(run_file, problems, cfg.k)
    pending = [p for p in problems if p["id"] not in done]
    if pending and backend is None:
        backend = make_backend(cfg)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / SETTINGS_FILE, cfg.settings(), ensure_ascii=False)
    if run_file.is_file():  # keep only complete problems, so no (problem, sample) is ever written twice
        from posttrainlab.data.jsonl import write_jsonl

        kept = [r for r in read_generations(run_file) if r["id"] in done]
        write_jsonl(run_file, kept)
    written = 0
    for c, start in enumerate(range(0, len(pending), cfg.chunk)):
        batch = pending[start : start + cfg.chunk]
        outs = backend.generate(
            [build_messages(p["question"], cfg.system_prompt) for p in batch],
            n=cfg.k,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed + c,
        )
        for problem, texts in zip(batch, outs, strict=True):
            if len(texts) != cfg.k:
                raise RuntimeError(f"the backend returned {len(texts)} completions for {problem['id']}, not {cfg.k}")
            for j, text in enumerate(texts):
                append_jsonl(run_file, generation_row(problem, j, text, cfg.step_split))
                written += 1
        if progress is not None:
            progress(len(problems) - len(pending) + start + len(batch), len(problems))
    from posttrainlab.data.cards.kinds import write_folder_card

    write_folder_card(out, "generations")  # README.md, the dataset card (settings from generate.json)
    return run_file, written, len(done)


def generation_row(problem: dict[str, Any], sample_index: int, text: str, step_split: str) -> dict[str, Any]:
    """One row of ``generations.jsonl`` (field order fixed).

    >>> generation_row({"id": "t-1", "source": "arith-v1", "source_split": "test", "question": "q", "answer": 3},
    ...                0, "1 + 2 = 3\\nAnswer: 3", "auto")["steps"]
    ['1 + 2 = 3', 'Answer: 3']
    """
    steps, used = split_solution(text, step_split)
    return {
        "id": problem["id"],
        "source": problem["source"],
        "source_split": problem["source_split"],
        "sample_index": sample_index,
        "question": problem["question"],
        "answer": problem.get("answer"),
        "text": text,
        "steps": steps,
        "step_split": used,
    }


def split_counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """How many solutions were cut on blank lines, on lines, or had no text at all."""
    counts = {"blank": 0, "lines": 0, "empty": 0}
    for r in rows:
        counts["empty" if not r["steps"] else r["step_split"]] += 1
    return counts


__all__ = [
    "SYSTEM_PROMPT",
    "GenerateConfig",
    "build_messages",
    "generation_row",
    "load_problems",
    "read_generations",
    "run_generate",
    "split_solution",
]
