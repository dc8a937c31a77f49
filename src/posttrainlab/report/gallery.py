"""The report's gallery: a few test problems with their best-of-N samples, chosen to show where the PRM is right
and where it is fooled (``report.gallery_html`` draws it; docs/prm-eval.md "The report's gallery").

Read from the run folder (``load_gallery``; a missing or malformed file is ``BadInput`` with the reason, and the
report then says why there is no gallery):

    RUN/best-of-n/bon.json          written last: N and ``vote_aggregation``; the PRM's pick is ``prm_<that>``
                                    (``prm_min`` by default), the sample with the highest aggregated step score
    RUN/best-of-n/samples.jsonl     per problem its prompt, answer and the N graded samples
    RUN/best-of-n/scores.jsonl      per sample its steps and step scores; per selector the sample it picked
                                    among the first n (``selected``): the picks are read, never recomputed
    RUN/beam-search/outcomes.jsonl  optional: beam search's answer per problem and its finished beams' step scores

**Which problems** (``choose``, pure): every problem is of one kind, by whether the PRM's pick and the majority
answer at the largest N are graded correct (``KINDS``: PRM right where majority is wrong, PRM fooled where majority
is right, both right, both wrong); each kind gets its quota, in ``KINDS`` order. Within a kind the next problem is
the first in file order among those, in this preference: both right and wrong samples among its N (so there was
something to choose), then a category not shown yet. The choice is deterministic and never looks at beam search.

**Labels** are exact (``data.arith.prm_labels.every_step_labels``, ``explicit`` missing answer): a line is right (1)
until the solution's first wrong line and wrong (0) from it on, an ``Answer:`` line carries the outcome, and a
solution without an answer line gets a ``(no answer)`` line labelled 0, scored only when the PRM was trained to
score it (``scores.jsonl`` then holds one step more than the solution has lines).

Identical samples (one string, one set of scores) are shown once with their count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP, every_step_labels
from posttrainlab.data.arith.steps import parse_question, split_steps
from posttrainlab.data.jsonl import iter_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.aggregation import AGGREGATIONS, aggregate
from posttrainlab.eval.best_of_n import vote_answer
from posttrainlab.report.run_folder import RunFolder
from posttrainlab.run_layout import OUTCOMES, SAMPLES, SCORES, RunLayout


@dataclass(frozen=True)
class Kind:
    """One kind of problem the gallery shows, its heading and how many of it."""

    name: str
    title: str
    count: int


KINDS = (
    Kind("prm_right", "PRM right, majority wrong", 2),
    Kind("prm_fooled", "PRM fooled, majority right", 2),
    Kind("both_right", "both right", 1),
    Kind("both_wrong", "both wrong", 1),
)


@dataclass(frozen=True)
class Case:
    """What the choice looks at for one problem (``order``: its place in ``samples.jsonl``)."""

    id: str
    category: str
    prm_correct: bool
    majority_correct: bool
    mixed: bool  # both right and wrong samples among the N
    order: int = 0


def kind_of(case: Case) -> str:
    """The ``KINDS`` name of a problem.

    >>> kind_of(Case("p", "addition", prm_correct=False, majority_correct=True, mixed=True))
    'prm_fooled'
    """
    if case.prm_correct != case.majority_correct:
        return "prm_right" if case.prm_correct else "prm_fooled"
    return "both_right" if case.prm_correct else "both_wrong"


def choose(cases: Sequence[Case], kinds: Sequence[Kind] = KINDS) -> list[tuple[str, Case]]:
    """``(kind, case)`` for the problems to show, kind by kind (rule: module docstring); fewer where a kind is rare.

    >>> cs = [Case("a", "addition", True, True, False, 0), Case("b", "addition", True, True, True, 1),
    ...       Case("c", "addition", True, True, True, 2), Case("d", "multi_step", True, True, True, 3)]
    >>> [c.id for _, c in choose(cs, [Kind("both_right", "", 3)])]   # mixed first, then a new category
    ['b', 'd', 'c']
    """
    shown: set[str] = set()
    out = []
    for kind in kinds:
        pool = sorted((c for c in cases if kind_of(c) == kind.name), key=lambda c: c.order)
        for _ in range(kind.count):
            if not pool:
                break
            best = min(range(len(pool)), key=lambda i: (not pool[i].mixed, pool[i].category in shown, i))
            case = pool.pop(best)
            shown.add(case.category)
            out.append((kind.name, case))
    return out


# --- what is drawn ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One step of a solution: its text, the PRM's score (``None``: not scored) and its exact label (``None``:
    the question is no arith-v1 template)."""

    text: str
    score: float | None
    label: int | None


@dataclass
class Solution:
    """One distinct solution of a problem: its lines, grade, the samples that wrote it and the picks it carries."""

    text: str
    lines: list[Line]
    correct: bool
    parsed: int | None
    samples: list[int] = field(default_factory=list)  # indices among the N; empty for a beam-search-only solution
    score: float = 0.0  # the PRM's aggregated score (the gallery's aggregation)
    marks: list[str] = field(default_factory=list)  # "majority", "prm", "beam"


@dataclass
class Shown:
    """One problem of the gallery."""

    kind: str
    id: str
    category: str
    question: str
    answer: int | None
    solutions: list[Solution]  # best-of-N's distinct solutions by PRM score, then beam search's when not among them
    votes: int = 0  # samples voting for the majority answer


@dataclass
class Gallery:
    """The chosen problems and what the text around them says."""

    n: int
    aggregation: str
    problems: list[Shown]
    counts: dict[str, int]  # kind -> problems of that kind in the run
    beam: str = ""  # why no beam-search pick is shown ("" when it is)
    split: str = "test"  # the arith-v1 split the problems come from (bon.json's)


def lines_of(question: str, response: str, scores: Sequence[float]) -> list[Line]:
    """The lines of one solution with their scores and exact labels (``(no answer)`` added when it has none).

    >>> [(x.text, x.score, x.label) for x in lines_of("What is 2 + 3?", "2 + 3 = 6", [0.4])]
    [('2 + 3 = 6', 0.4, 0), ('(no answer)', None, 0)]
    """
    steps = split_steps(response)
    problem = parse_question(question)
    if problem is None:
        texts, labels = steps, [None] * len(steps)
    else:
        texts, labels = every_step_labels(problem, steps, "explicit")
    out = [Line(t, float(scores[i]) if i < len(scores) else None, label)  # "(no answer)": scored when the PRM did
           for i, (t, label) in enumerate(zip(texts, labels, strict=True))]  # fmt: skip
    if problem is None and steps and len(scores) == len(steps) + 1:
        out.append(Line(NO_ANSWER_STEP, float(scores[-1]), None))
    return out


def _solutions(q: dict, s: dict, picks: dict[str, int], aggregation: str) -> list[Solution]:
    """Best-of-N's distinct solutions of one problem, highest aggregated score first, with the picks marked."""
    by_text: dict[str, Solution] = {}
    for i, (sample, scored) in enumerate(zip(q["samples"], s["samples"], strict=True)):
        text = str(sample.get("response", ""))
        if text not in by_text:
            scores = [float(x) for x in scored.get("scores", [])]
            lines = lines_of(q.get("prompt", ""), text, scores)
            by_text[text] = Solution(text, lines, bool(sample.get("correct")), vote_answer(sample),
                                     score=aggregate(scores, aggregation))  # fmt: skip
        by_text[text].samples.append(i)
    solutions = sorted(by_text.values(), key=lambda x: (-x.score, x.samples[0]))
    for mark, index in picks.items():
        next(x for x in solutions if index in x.samples).marks.append(mark)
    return solutions


def _beam(q: dict, row: dict, solutions: list[Solution], aggregation: str) -> None:
    """Mark beam search's answer among ``solutions``, or append it when no sample wrote it."""
    text = str(row.get("response", ""))
    same = next((x for x in solutions if x.samples and x.text == text), None)
    if same is not None:
        same.marks.append("beam")
        return
    beam = next((b for b in row.get("beams", []) if b.get("response") == text), {})
    scores = [float(x) for x in beam.get("scores", [])]
    parsed = row.get("parsed") if row.get("outcome") in ("correct", "wrong_answer") else None
    solutions.append(Solution(text, lines_of(q.get("prompt", ""), text, scores), bool(row.get("correct")), parsed,
                              score=aggregate(scores, aggregation), marks=["beam"]))  # fmt: skip


def _rows(path: Path) -> dict[str, dict]:
    return {str(r.get("id")): r for r in iter_jsonl(path)}


def load_gallery(run: RunFolder, kinds: Sequence[Kind] = KINDS) -> Gallery:
    """The gallery of a run folder; ``BadInput`` saying why there is none (no best-of-N output, a malformed file)."""
    try:
        return _load(run, kinds)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as e:  # a row of an unexpected shape
        raise BadInput(f"best-of-N or beam-search output of an unexpected shape ({type(e).__name__}: {e})") from None


def _load(run: RunFolder, kinds: Sequence[Kind]) -> Gallery:
    layout = RunLayout(run.path)
    bon = layout.best_of_n
    if not run.bon:
        raise BadInput("this run has no finished best-of-N output (best-of-n/bon.json)")
    samples, scores = _rows(bon / SAMPLES), _rows(bon / SCORES)
    aggregation = str(run.bon.get("vote_aggregation", "min"))
    aggregation = aggregation if aggregation in AGGREGATIONS else "min"
    selector = f"prm_{aggregation}"
    cases, picks, n = [], {}, 0
    for order, (key, s) in enumerate(scores.items()):
        q, chosen = samples.get(key), s.get("selected")
        if q is None or not isinstance(chosen, dict) or not {selector, "majority"} <= set(chosen):
            raise BadInput(f"best-of-n/{SCORES}: problem {key!r} has no {selector} and majority picks or no samples")
        n = max(int(k) for k in chosen["majority"])
        picks[key] = {"majority": chosen["majority"][str(n)], "prm": chosen[selector][str(n)]}
        right = [bool(x.get("correct")) for x in q["samples"][:n]]
        cases.append(Case(key, str(q.get("category")), right[picks[key]["prm"]], right[picks[key]["majority"]],
                          any(right) and not all(right), order))  # fmt: skip
    if not cases:
        raise BadInput(f"best-of-n/{SCORES} holds no problem")
    beams, beam_note = {}, ""
    if (layout.beam_search / OUTCOMES).is_file():
        beams = _rows(layout.beam_search / OUTCOMES)
    else:
        beam_note = "this run has no beam search (beam-search/outcomes.jsonl), so no beam-search pick is shown"
    shown = []
    for kind, case in choose(cases, kinds):
        q, s = samples[case.id], scores[case.id]
        sols = _solutions({**q, "samples": q["samples"][:n]}, {**s, "samples": s["samples"][:n]},
                          picks[case.id], aggregation)  # fmt: skip
        if case.id in beams:
            _beam(q, beams[case.id], sols, aggregation)
        majority = vote_answer(q["samples"][picks[case.id]["majority"]])
        votes = sum(vote_answer(x) == majority for x in q["samples"][:n]) if majority is not None else 0
        question = str(q.get("prompt", "")).strip().rsplit("\n\n", 1)[-1]
        shown.append(Shown(kind, case.id, case.category, question, q.get("answer"), sols, votes))
    counts = {k.name: sum(kind_of(c) == k.name for c in cases) for k in kinds}
    return Gallery(n, aggregation, shown, counts, beam_note, str(run.bon.get("split") or "test"))


__all__ = ["KINDS", "Case", "Gallery", "Kind", "Line", "Shown", "Solution", "choose", "kind_of", "lines_of",
           "load_gallery"]  # fmt: skip
