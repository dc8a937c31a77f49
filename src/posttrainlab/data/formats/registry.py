"""The five step-level formats by name: their validators, stats functions and step readers.

``posttrain data validate --format F`` and ``posttrain data stats --format F`` look the format up here,
and so do PRM training (``dataset.format``) and ``posttrain eval prm --format F``; adding a format is
one entry. A validator takes an iterable of rows and yields ``(row_index, reason)`` for each bad row
(nothing is dropped or fixed); a stats function returns one flat JSON-ready dict and raises
``RowError`` at a bad row. ``to_steps`` reads one row into a ``StepRow`` holding every step that
carries a label (not cut after the first error) and raises ``ValueError`` with the validator's reason
for a bad row. mc-value has none: a row is one prefix's value, and which steps it covers depends on
a file-wide convention (``step_idx``), so the PRM trainer builds its items per trace
(``prm.examples``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from posttrainlab.data.formats.math_shepherd import math_shepherd_stats, math_shepherd_steps, validate_math_shepherd
from posttrainlab.data.formats.mc_value import mc_stats, validate_mc
from posttrainlab.data.formats.processbench import processbench_stats, processbench_steps, validate_processbench
from posttrainlab.data.formats.schema import Row
from posttrainlab.data.formats.sharp import span_stats, span_steps, validate_span
from posttrainlab.data.formats.step import StepRow, step_stats, step_steps, validate_step


@dataclass(frozen=True)
class Format:
    """One on-disk format: what it holds, how its rows are checked, described and read as steps."""

    name: str
    fields: str
    validate: Callable[[Iterable[Row]], Iterator[tuple[int, str]]]
    stats: Callable[[Iterable[Row]], dict[str, Any]]
    to_steps: Callable[[Row], StepRow] | None = None


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "step", "question, steps, step_labels (0/1; no 0, or one 0 last)", validate_step, step_stats, step_steps
        ),
        Format(
            "span",
            "question, model_answer, hallucination_annotation (<HAL> markup)",
            validate_span,
            span_stats,
            span_steps,
        ),
        Format(
            "math-shepherd",
            "prompt, completions, labels (bool) | input, label (ки text, +/-)",
            validate_math_shepherd,
            math_shepherd_stats,
            math_shepherd_steps,
        ),
        Format(
            "mc-value",
            "messages, reward (V), correct, label, id, source, sample_index, step_idx, num_steps, ...",
            validate_mc,
            mc_stats,
        ),
        Format(
            "processbench",
            "problem, steps, label (-1 = correct) | problem, steps, ratings (-1/0/+1) | PRM800K record",
            validate_processbench,
            processbench_stats,
            processbench_steps,
        ),
    )
}


#: The formats whose rows read as steps with labels (``to_steps``): what ``posttrain eval prm`` scores.
STEP_FORMATS: tuple[str, ...] = tuple(name for name, f in FORMATS.items() if f.to_steps is not None)


def get_format(name: str) -> Format:
    """The format called ``name``; ``KeyError`` naming the known ones otherwise.

    >>> get_format("step").name
    'step'
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None
