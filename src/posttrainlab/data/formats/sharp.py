"""SHARP: the span view, its conversion to the step view, the join by position, the PRM prompt.

The span view (SHARP-*-SPAN, seed 000 "Span view") holds ``question, model_answer,
hallucination_annotation``: the untruncated solution split on blank lines, and the same pieces with
the wrong fragments wrapped in ``<HAL>…</HAL>``. A clean solution carries no tags, or the annotator's
literal ``["No hallucinations"]``.

``span_to_step`` is the card's conversion ("Conversion to step labels"), exactly:

1. the steps are the blank-line-separated pieces (``model_answer``, kept verbatim);
2. a step is labelled 0 when any ``<HAL>`` span intersects it, else 1. A span that opens in one
   piece and closes in a later one marks every piece it touches (see ``hal.touched_pieces``);
3. steps and labels are cut after the first 0, keeping that step.

It is lossy, and by design: the steps after the first error, every later span, and where inside a
step each span sits are dropped. Output row i is always the solution of input row i, so the two views
stay joinable by position; ``join_step_span`` reads them together and checks that each pair
describes the same solution. ``span_steps`` reads a row *without* the cut: every piece and its label,
and where each span sits inside its piece (what PRM evaluation scores and span supervision labels).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from posttrainlab.data.formats.hal import (
    NO_HALLUCINATIONS,
    HalMarkupError,
    Span,
    diff_at,
    parse_hal_pieces,
    piece_bounds,
    touched_pieces,
)
from posttrainlab.data.formats.schema import (
    Row,
    RowError,
    check_str,
    check_str_list,
    first_reason,
    map_rows,
    missing_keys,
    validate_rows,
)
from posttrainlab.data.formats.stats import SolutionStats
from posttrainlab.data.formats.step import StepRow, check_step_row, cut_at_first_error

KEYS = ("question", "model_answer", "hallucination_annotation")
#: The separator the SHARP generators were asked to put between steps (seed 000, "Generation").
STEP_SEP = "\n\n"
#: The step marker of the SHARP PRMs (seed 000, "Usage").
PRM_STEP_TOKEN = "<extra_0>"


def is_no_hallucinations(row: Row) -> bool:
    """True when the annotation is the annotator's literal for a clean solution.

    >>> is_no_hallucinations({"model_answer": ["a", "b"], "hallucination_annotation": ["No hallucinations"]})
    True
    """
    return row["hallucination_annotation"] == [NO_HALLUCINATIONS] and row["model_answer"] != [NO_HALLUCINATIONS]


def span_piece_labels(row: Row) -> tuple[list[int], list[Span]]:
    """Per-piece labels (0 = touched by a span) over the *whole* solution, and the spans.

    Spans are offsets into ``"\\n\\n".join(model_answer)``. Raises ``HalMarkupError`` on bad markup.

    >>> span_piece_labels({"model_answer": ["a b", "c"], "hallucination_annotation": ["a <HAL>b</HAL>", "c"]})
    ([0, 1], [(2, 3)])
    """
    answer, annotation = row["model_answer"], row["hallucination_annotation"]
    if is_no_hallucinations(row):
        return [1] * len(answer), []
    if len(annotation) != len(answer):
        raise HalMarkupError(f"{len(answer)} model_answer pieces but {len(annotation)} hallucination_annotation pieces")
    clean, spans = parse_hal_pieces(annotation, STEP_SEP)
    for k, (got, want) in enumerate(zip(clean, answer, strict=False)):
        if got != want:
            raise HalMarkupError(
                f"hallucination_annotation[{k}] without tags differs from model_answer[{k}] "
                f"at char {diff_at(got, want)}"
            )
    touched = touched_pieces(spans, piece_bounds(answer, STEP_SEP))
    return [0 if t else 1 for t in touched], spans


def check_span_row(row: Row) -> str | None:
    """The first fault of a span-view row, or ``None``.

    >>> check_span_row({"question": "q", "model_answer": ["a"], "hallucination_annotation": ["<HAL>a"]})
    'unclosed <HAL> at char 0 of piece 0'
    """

    reason = check_span_fields(row)
    if reason is not None:
        return reason
    try:
        span_piece_labels(row)
    except HalMarkupError as e:
        return str(e)
    return None


def check_span_fields(row: Row) -> str | None:
    """Keys and types of a span-view row (the markup is checked by ``span_piece_labels``)."""
    return first_reason(
        lambda: missing_keys(row, KEYS),
        lambda: check_str(row, "question"),
        lambda: check_str_list(row, "model_answer"),
        lambda: check_str_list(row, "hallucination_annotation"),
    )


def validate_span(rows: Iterable[Row]) -> Iterator[tuple[int, str]]:
    """``(row_index, reason)`` for every bad span-view row."""
    return validate_rows(rows, check_span_row)


def span_to_step(row: Row) -> dict[str, Any]:
    """Convert one span-view row to the step view, exactly as the SHARP card says (module docstring).

    >>> span_to_step({"question": "q", "model_answer": ["a", "b = 5", "c"],
    ...               "hallucination_annotation": ["a", "b = <HAL>5</HAL>", "c"]})
    {'question': 'q', 'steps': ['a', 'b = 5'], 'step_labels': [1, 0]}
    """
    reason = check_span_fields(row)
    if reason is not None:
        raise ValueError(reason)
    labels, _ = span_piece_labels(row)  # HalMarkupError is a ValueError
    steps, labels = cut_at_first_error(row["model_answer"], labels)
    return {"question": row["question"], "steps": steps, "step_labels": labels}


def span_steps(row: Row) -> StepRow:
    """A span-view row as a ``StepRow``: *every* piece, 0 where a ``<HAL>`` span touches it, and the spans.

    Not cut after the first 0 (``StepRow.cut_at_first_error`` gives the step view, as ``span_to_step``
    does); ``spans[k]`` holds the spans that overlap piece k, clipped to it, as offsets into its text.
    ``ValueError`` (``HalMarkupError`` for bad markup) for a bad row.

    >>> r = span_steps({"question": "q", "model_answer": ["a", "b = 5", "c"],
    ...                 "hallucination_annotation": ["a", "b = <HAL>5</HAL>", "c"]})
    >>> r.labels, r.spans
    ([1, 0, 1], [[], [(4, 5)], []])
    """
    reason = check_span_fields(row)
    if reason is not None:
        raise ValueError(reason)
    labels, spans = span_piece_labels(row)
    pieces = list(row["model_answer"])
    per_piece = [
        [(max(s, a) - a, min(e, b) - a) for s, e in spans if s < b and e > a] for a, b in piece_bounds(pieces, STEP_SEP)
    ]
    return StepRow(row["question"], pieces, labels, per_piece)


def convert_span_rows(rows: Iterable[Row]) -> Iterator[dict[str, Any]]:
    """Stream span-view rows into step-view rows, one for one; ``RowError`` at the first bad row."""
    return map_rows(rows, span_to_step)


def check_join(step_row: Row, span_row: Row, *, check_labels: bool = True) -> str | None:
    """The reason a step-view row and a span-view row are not the same solution, or ``None``.

    Same question; the steps are the first pieces of ``model_answer``, verbatim; an uncut step row (no
    0) holds every piece; and, with ``check_labels``, the labels are the ones the spans give.

    >>> span = {"question": "q", "model_answer": ["a", "b"],
    ...         "hallucination_annotation": ["<HAL>a</HAL>", "b"]}
    >>> check_join({"question": "q", "steps": ["a"], "step_labels": [0]}, span) is None
    True
    >>> check_join({"question": "q", "steps": ["a"], "step_labels": [1]}, span)
    'step_labels [1] differ from those the <HAL> spans give, [0]'
    """
    reason = check_step_row(step_row)
    if reason is not None:
        return f"step row: {reason}"
    reason = check_span_row(span_row)
    if reason is not None:
        return f"span row: {reason}"
    if step_row["question"] != span_row["question"]:
        return "the questions differ"
    steps, pieces = step_row["steps"], span_row["model_answer"]
    if len(steps) > len(pieces):
        return f"{len(steps)} steps but only {len(pieces)} model_answer pieces"
    for k, (step, piece) in enumerate(zip(steps, pieces, strict=False)):
        if step != piece:
            return f"steps[{k}] differs from model_answer[{k}]"
    if check_labels:
        expected = span_to_step(span_row)["step_labels"]
        if step_row["step_labels"] != expected:
            return f"step_labels {step_row['step_labels']} differ from those the <HAL> spans give, {expected}"
    if 0 not in step_row["step_labels"] and len(steps) != len(pieces):
        return f"no faulty step, yet {len(steps)} steps of {len(pieces)} model_answer pieces"
    return None


def join_step_span(
    step_rows: Iterable[Row], span_rows: Iterable[Row], *, check_labels: bool = True
) -> Iterator[tuple[int, Row, Row, str | None]]:
    """Read a step file and its span file together by position: ``(index, step_row, span_row, reason)``.

    ``reason`` is ``None`` when the pair describes the same solution (see ``check_join``). When one file
    ends first, a ``RowError`` at the first unmatched index says which.
    """
    steps, spans = iter(step_rows), iter(span_rows)
    index = 0
    while True:
        step_row, span_row = next(steps, None), next(spans, None)
        if step_row is None and span_row is None:
            return
        if step_row is None or span_row is None:
            shorter = "step" if step_row is None else "span"
            raise RowError(index, f"the {shorter} file ends here ({index} rows) but the other goes on")
        yield index, step_row, span_row, check_join(step_row, span_row, check_labels=check_labels)
        index += 1


def join_record(step_row: Row, span_row: Row) -> dict[str, Any]:
    """One row holding both views of a solution (written by ``posttrain data join``)."""
    return {
        "question": step_row["question"],
        "steps": step_row["steps"],
        "step_labels": step_row["step_labels"],
        "model_answer": span_row["model_answer"],
        "hallucination_annotation": span_row["hallucination_annotation"],
    }


def build_prm_prompt(question: str, steps: Sequence[str], step_token: str = PRM_STEP_TOKEN) -> str:
    """The SHARP PRM input (seed 000, "Usage"): each stripped step, then the marker; blank lines between.

    >>> build_prm_prompt("1+1?", ["1+1 = 2 ", "Answer: 2"])
    'Question: 1+1?\\n\\nSolution:\\n1+1 = 2<extra_0>\\n\\nAnswer: 2<extra_0>'
    """
    body = "\n\n".join(f"{s.strip()}{step_token}" for s in steps)
    return f"Question: {question}\n\nSolution:\n{body}"


def span_stats(rows: Iterable[Row]) -> dict[str, Any]:
    """Step stats over the whole (uncut) solutions, plus span counts.

    ``spans_cross_step`` counts spans that touch more than one step; ``no_hallucinations_literal``
    counts rows annotated with the literal ``No hallucinations``.
    """
    acc = SolutionStats(labelled=True)
    n_spans = n_cross = n_literal = 0
    for index, row in enumerate(rows):
        acc.check(index, check_span_fields(row))
        try:
            labels, spans = span_piece_labels(row)
        except HalMarkupError as e:
            raise RowError(index, str(e)) from None
        acc.add_labels(labels)
        bounds = piece_bounds(row["model_answer"], STEP_SEP)
        n_spans += len(spans)
        n_cross += sum(sum(touched_pieces([s], bounds)) > 1 for s in spans)
        n_literal += is_no_hallucinations(row)
    return acc.as_dict() | {
        "spans": n_spans,
        "spans_cross_step": n_cross,
        "no_hallucinations_literal": n_literal,
    }
