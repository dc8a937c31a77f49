"""arith-prm: exact step labels for arith-v1 solutions, in the step view and the Math-Shepherd view.

A process reward model needs solutions with a label on every step. On arith-v1 no annotator is needed:
every step is a claim a program can check (``steps.py``), so a solution's step labels are exact. This
module turns solutions into labelled rows and writes the dataset; it never runs a model (the sampling
lives in ``posttrainlab.label.arith_prm``) and imports no torch (docs/design.md "Layers").

Rows come from three sources (``source``):

- ``policy``: K solutions per problem sampled from a policy (``sample_index`` 0..K-1);
- ``reference``: the problem's reference solution (arith-v1's ``chosen``), all steps correct;
- ``corruption``: a controlled corruption of it (arith-v1's ``rejected``, ``corrupt.py``), ``corruption``
  naming the kind.

Labelling (``label_solution``): the solution is split into its non-empty lines (``split_steps``) and
labelled by ``step_labels``: 1 for each step up to the first wrong claim, 0 on it (or on the last step
when all claims are true but the ``Answer:`` line is wrong or missing), and the steps after it dropped,
so every row keeps the step-view invariant (no 0, or exactly one 0, last). A solution with no
non-empty line has no step to label and is dropped (and counted). A solution whose steps are all right
is always graded correct by the arith grader; the converse does not hold: a sampled solution can reach
the right answer through wrong steps (``352 - 6 = 288`` ... ``Answer: 104``). Such rows keep their 0
(the process is wrong) and are counted as ``right_answer_wrong_steps``; a row with no 0 that the grader
does not grade correct would be a bug in the rules and is counted as ``grader_disagreements`` (0).
Options (``prm_labels.ArithPRMOptions``, defaults as above): ``missing_answer: explicit`` appends a
``(no answer)`` step labelled 0 instead of putting the 0 on a right last line; ``labels: every-step`` writes
every line of each solution to the Math-Shepherd view (1 until the first error, 0 from it on, an answer line
carrying the outcome), the step view still its first-error cut; ``SplitBuilder.add_near_misses`` adds
near-miss hard negatives (``near_miss.py``).

Splits (``SPLITS``), chosen so that the held-out split never shares a problem with train and neither
touches arith-v1 ``test``, on which best-of-N is reported:

- ``train``: policy samples on ``rl_train`` prompts, plus ``preference_train``'s chosen and rejected;
- ``heldout``: policy samples on ``dev`` and ``validation`` prompts, plus their reference solutions and
  one corruption each (drawn with arith-v1's own ``corrupt``, kinds in equal shares, seeded);
- ``preference_test``: ``preference_test``'s chosen and rejected only. These are arith-v1 **test**
  problems (the pairs are derived from ``test``): use it to evaluate a PRM, never to tune one.

On disk (``write_dataset``): ``OUT/step/<split>.jsonl`` (``question, steps, step_labels`` then
provenance ``id, category, source, sample_index, corruption, outcome, num_steps``),
``OUT/math_shepherd/<split>.jsonl`` (``prompt, completions, labels``; row i is row i of the step file),
``OUT/stats.json``, ``OUT/manifest.json`` (SHA-256 of every file, so ``posttrain data verify OUT``
and every manifest-backed loader check them) and ``OUT/README.md``, the dataset card (``data.cards``).
``question`` is the problem text (the prompt's last paragraph, without arith-v1's instruction), which is
what a PRM is asked to score.

Written by hand: arith-v1's templates and the step view's invariant are this project's own.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrainlab.data.arith.corrupt import CORRUPTIONS, corrupt
from posttrainlab.data.arith.near_miss import near_misses
from posttrainlab.data.arith.prm_labels import label_steps
from posttrainlab.data.arith.steps import parse_question, split_steps
from posttrainlab.data.atomic import check_output_folder, staging_dir
from posttrainlab.data.cards.kinds import write_folder_card
from posttrainlab.data.cards.render import CARD
from posttrainlab.data.formats.math_shepherd import step_to_ms
from posttrainlab.data.formats.step import check_step_row
from posttrainlab.data.jsonl import dumps, strict_json
from posttrainlab.data.manifest import MANIFEST, file_entry, manifest_text
from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader

DATASET = "arith-prm"
SPLITS = ("train", "heldout", "preference_test")
SOURCES = ("policy", "reference", "corruption")
#: arith-v1 prompt splits sampled for each arith-prm split (the preference pairs are added beside them).
TRAIN_PROMPTS = ("rl_train",)
HELDOUT_PROMPTS = ("dev", "validation")
STEP_DIR = "step"
MS_DIR = "math_shepherd"
STATS = "stats.json"


def question_of(prompt: str) -> str:
    """The problem text of an arith-v1 prompt: its last paragraph (the instruction comes first).

    >>> question_of("Solve the following problem.\\n\\nWhat is 2 + 3?")
    'What is 2 + 3?'
    """
    return prompt.strip().rsplit("\n\n", 1)[-1].strip()


@dataclass(frozen=True)
class Labelled:
    """One solution labelled exactly: the kept steps, their labels, and what was cut."""

    steps: list[str]
    labels: list[int]
    num_steps: int  # non-empty lines of the whole solution
    first_error: int  # index of the 0, or -1
    # labels "every-step": (steps, labels) of every line (prm_labels), the Math-Shepherd view's row
    every: tuple[list[str], list[int]] | None = field(default=None, repr=False, compare=False)

    @property
    def all_correct(self) -> bool:
        return self.first_error < 0


def label_solution(
    question: str, solution: str, *, labels: str = "first-error", missing_answer: str = "last-step"
) -> Labelled | None:
    """Exact step labels of ``solution`` to the arith-v1 ``question``; ``None`` when it has no step.

    ``labels`` / ``missing_answer``: ``prm_labels``' modes; the step view is always the first-error cut, and
    ``every`` holds every line's labels under ``every-step``.

    ``ValueError`` when the question is not an arith-v1 question (no template matches).

    >>> label_solution("What is 351 - 148 + 56?", "351 - 148 = 203\\n203 + 56 = 260\\nAnswer: 260\\n")
    Labelled(steps=['351 - 148 = 203', '203 + 56 = 260'], labels=[1, 0], num_steps=3, first_error=1)
    >>> label_solution("What is 2 + 3?", "  \\n") is None
    True
    """
    problem = parse_question(question)
    if problem is None:
        raise ValueError(f"not an arith-v1 question: {question[:60]!r}")
    steps = split_steps(solution)
    if not steps:
        return None
    every = label_steps(problem, steps, "every-step", missing_answer) if labels == "every-step" else None
    kept, cut = label_steps(problem, steps, "first-error", missing_answer)
    first = len(cut) - 1 if cut and cut[-1] == 0 else -1
    return Labelled(kept, cut, len(steps), first, every)


def step_row(
    question: str,
    labelled: Labelled,
    *,
    id: str,
    category: str,
    source: str,
    sample_index: int = 0,
    corruption: str | None = None,
    outcome: str,
) -> dict[str, Any]:
    """One step-view row with its provenance (key order fixed: the step view's keys first)."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    return {
        "question": question,
        "steps": list(labelled.steps),
        "step_labels": list(labelled.labels),
        "id": id,
        "category": category,
        "source": source,
        "sample_index": sample_index,
        "corruption": corruption,
        "outcome": outcome,
        "num_steps": labelled.num_steps,
    }


class SplitBuilder:
    """Collects the rows of one split and counts what was dropped or disagreed.

    ``labels`` / ``missing_answer``: ``prm_labels``' modes; under ``every-step`` the Math-Shepherd view gets
    every line of each solution (``every_rows``, with the step row's provenance), the step view its cut.
    """

    def __init__(self, name: str, labels: str = "first-error", missing_answer: str = "last-step"):
        self.name, self.labels, self.missing_answer = name, labels, missing_answer
        self.rows: list[dict[str, Any]] = []
        self.every_rows: list[dict[str, Any]] = []
        self.dropped_empty = 0
        self.right_answer_wrong_steps = 0
        self.grader_disagreements = 0
        self._grader = ArithGrader()

    def add(
        self,
        record: dict[str, Any],
        solution: str,
        *,
        source: str,
        sample_index: int = 0,
        corruption: str | None = None,
    ) -> dict[str, Any] | None:
        """Label one solution to an arith-v1 record (``id, category, prompt, answer``); ``None`` if dropped."""
        question = question_of(record["prompt"])
        try:
            labelled = label_solution(question, solution, labels=self.labels, missing_answer=self.missing_answer)
        except ValueError as e:
            raise BadInput(f"{record.get('id', '?')}: {e}") from None
        if labelled is None:
            self.dropped_empty += 1
            return None
        grade = self._grader.grade(solution, record["answer"])
        if grade.correct and not labelled.all_correct:
            self.right_answer_wrong_steps += 1
        elif labelled.all_correct and not grade.correct:  # pragma: no cover - impossible under steps.py's rules
            self.grader_disagreements += 1
        row = step_row(
            question,
            labelled,
            id=record["id"],
            category=record["category"],
            source=source,
            sample_index=sample_index,
            corruption=corruption,
            outcome=grade.outcome,
        )
        self.rows.append(row)
        if labelled.every is not None:
            steps, labels = labelled.every
            extra = {k: v for k, v in row.items() if k not in ("question", "steps", "step_labels")}
            self.every_rows.append({"prompt": question, "completions": steps, "labels": [x == 1 for x in labels],
                                    **extra})  # fmt: skip
        return row

    def ms_rows(self) -> Iterable[dict[str, Any]]:
        """The Math-Shepherd view: every line (``every-step``), else the step view's rows converted (lossless)."""
        return self.every_rows if self.labels == "every-step" else (step_to_ms(r) for r in self.rows)

    def add_policy(self, records: Sequence[dict], completions: Sequence[Sequence[str]]) -> None:
        """K sampled solutions per record, in sample order."""
        if len(records) != len(completions):
            raise ValueError(f"{len(records)} records but {len(completions)} completion lists")
        for record, samples in zip(records, completions, strict=True):
            for j, text in enumerate(samples):
                self.add(record, text, source="policy", sample_index=j)

    def add_pairs(self, pairs: Iterable[dict]) -> None:
        """arith-v1 preference pairs: the chosen solution (reference), then the rejected (corruption)."""
        for pair in pairs:
            self.add(pair, pair["chosen"], source="reference")
            self.add(pair, pair["rejected"], source="corruption", corruption=pair.get("corruption"))

    def add_corruptions(self, records: Sequence[dict], seed: int) -> None:
        """Reference solution and one corruption per record, kinds in equal shares (seeded shuffle).

        The kinds are arith-v1's four (``corrupt.CORRUPTIONS``), repeated to cover the records and
        shuffled with ``random.Random("arith-prm:<seed>:<split>:corruption")``; each corruption draws
        from its own ``random.Random("arith-prm:<seed>:<id>")``, so a row depends only on its record.
        """
        kinds = [CORRUPTIONS[i % len(CORRUPTIONS)] for i in range(len(records))]
        random.Random(f"{DATASET}:{seed}:{self.name}:corruption").shuffle(kinds)
        for record, kind in zip(records, kinds, strict=True):
            problem = parse_question(question_of(record["prompt"]))
            if problem is None:
                raise BadInput(f"{record.get('id', '?')}: not an arith-v1 question")
            self.add(record, problem.solution, source="reference")
            rejected = corrupt(problem, kind, random.Random(f"{DATASET}:{seed}:{record['id']}"))
            self.add(record, rejected, source="corruption", corruption=kind)

    def add_near_misses(self, records: Sequence[dict], seed: int, per_problem: int) -> None:
        """Reference solution and ``per_problem`` near-miss negatives per record (``near_miss.near_misses``,
        ``corruption`` = ``near_miss:<kind>``), drawn from ``random.Random("arith-prm:<seed>:<id>:near-miss")``."""
        for record in records:
            problem = parse_question(question_of(record["prompt"]))
            if problem is None:
                raise BadInput(f"{record.get('id', '?')}: not an arith-v1 question")
            self.add(record, problem.solution, source="reference")
            for kind, text in near_misses(
                problem, per_problem, random.Random(f"{DATASET}:{seed}:{record['id']}:near-miss")
            ):
                self.add(record, text, source="corruption", corruption=f"near_miss:{kind}")


def problem_keys(rows: Iterable[dict]) -> set:
    """The arith-v1 problem keys ``(category, template, operands)`` of the rows' questions."""
    keys = set()
    for row in rows:
        problem = parse_question(row["question"])
        if problem is not None:
            keys.add(problem.key)
    return keys


def split_stats(builder: SplitBuilder) -> dict[str, Any]:
    """Rows, share of all-correct solutions, first-error position histogram, per source.

    ``first_error_histogram`` maps the 0-based index of the labelled 0 to its count (solutions with an
    error only), keys in ascending order as strings (JSON).

    >>> b = SplitBuilder("x")
    >>> for text in ("2 + 3 = 5\\nAnswer: 5", "2 + 3 = 6\\nAnswer: 6", "2 + 3 = 5", ""):
    ...     _ = b.add({"id": "a", "category": "addition", "prompt": "What is 2 + 3?", "answer": 5}, text,
    ...               source="policy")
    >>> s = split_stats(b)
    >>> s["rows"], s["all_correct"], s["first_error_histogram"], s["dropped_empty"]
    (3, 1, {'0': 2}, 1)
    """
    rows = builder.rows

    def summary(selected: list[dict]) -> dict[str, Any]:
        hist = Counter(len(r["step_labels"]) - 1 for r in selected if 0 in r["step_labels"])
        correct = sum(1 for r in selected if 0 not in r["step_labels"])
        steps = sum(len(r["steps"]) for r in selected)
        return {
            "rows": len(selected),
            "all_correct": correct,
            "all_correct_share": correct / len(selected) if selected else None,
            "steps": steps,
            "wrong_steps": len(selected) - correct,
            "first_error_histogram": {str(k): hist[k] for k in sorted(hist)},
        }

    out = summary(rows)
    out["by_source"] = {s: summary([r for r in rows if r["source"] == s]) for s in SOURCES}
    out["by_source"] = {s: v for s, v in out["by_source"].items() if v["rows"]}
    policy = [r for r in rows if r["source"] == "policy"]
    if policy:
        outcomes = Counter(r["outcome"] for r in policy)
        out["policy_outcomes"] = dict(sorted(outcomes.items()))
    out["dropped_empty"] = builder.dropped_empty
    out["right_answer_wrong_steps"] = builder.right_answer_wrong_steps
    out["grader_disagreements"] = builder.grader_disagreements
    if builder.labels == "every-step":  # the Math-Shepherd view: every line labelled
        labels = [x for r in builder.every_rows for x in r["labels"]]
        out["every_step"] = {"steps": len(labels), "wrong_steps": labels.count(False)}
    return out


def _is_arith_prm(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and manifest.get("dataset") == DATASET


def check_target(out: str | Path) -> Path:
    """``BadInput`` unless ``out`` is absent, empty, or an earlier arith-prm build (which is replaced).

    An earlier build's files are those its manifest lists, and the manifest: a file added to it is refused.
    """
    out = Path(out)
    own: set[str] = set()
    if _is_arith_prm(out):
        own = set(json.loads((out / MANIFEST).read_text(encoding="utf-8")).get("files", {})) | {MANIFEST, CARD}
    return check_output_folder(out, own.__contains__, what="arith-prm build")


def write_dataset(out: str | Path, splits: dict[str, SplitBuilder], meta: dict[str, Any]) -> dict[str, Any]:
    """Write both views of every split, ``stats.json`` and ``manifest.json`` into ``out``, atomically.

    Every step row is checked against the step view first (``BadInput`` on the first bad one, nothing
    written). Returns the manifest (which holds the stats).
    """
    out = check_target(out)
    stats = {name: split_stats(b) for name, b in splits.items()}
    for name, builder in splits.items():
        for i, row in enumerate(builder.rows):
            reason = check_step_row(row)
            if reason is not None:  # pragma: no cover - step_labels keeps the invariant by construction
                raise BadInput(f"arith-prm {name} row {i}: {reason}")
    files: dict[str, dict[str, Any]] = {}
    with staging_dir(out) as tmp:
        for name, builder in splits.items():
            for sub, rows in ((STEP_DIR, builder.rows), (MS_DIR, builder.ms_rows())):
                rel = f"{sub}/{name}.jsonl"
                path = tmp / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "w", encoding="utf-8", newline="\n") as f:
                    for row in rows:
                        f.write(dumps(row) + "\n")
                files[rel] = file_entry(path)
        (tmp / STATS).write_text(strict_json(stats, indent=2) + "\n", encoding="utf-8")
        files[STATS] = file_entry(tmp / STATS)
        manifest = {"dataset": DATASET, **meta, "files": files, "stats": stats}
        (tmp / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
        write_folder_card(tmp, DATASET)  # README.md: the dataset card, from these files and the manifest
    return manifest


__all__ = [
    "DATASET",
    "HELDOUT_PROMPTS",
    "SPLITS",
    "TRAIN_PROMPTS",
    "Labelled",
    "SplitBuilder",
    "check_target",
    "label_solution",
    "problem_keys",
    "question_of",
    "split_stats",
    "step_row",
    "write_dataset",
]
