"""The five step-level formats by name: their validators and stats functions.

``posttrain data validate --format F`` and ``posttrain data stats --format F`` look the format up here,
so adding a format is one entry. A validator takes an iterable of rows and yields ``(row_index,
reason)`` for each bad row (nothing is dropped or fixed); a stats function returns one flat
JSON-ready dict and raises ``RowError`` at a bad row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from posttrainlab.data.formats.math_shepherd import math_shepherd_stats, validate_math_shepherd
from posttrainlab.data.formats.mc_value import mc_stats, validate_mc
from posttrainlab.data.formats.processbench import processbench_stats, validate_processbench
from posttrainlab.data.formats.schema import Row
from posttrainlab.data.formats.sharp import span_stats, validate_span
from posttrainlab.data.formats.step import step_stats, validate_step


@dataclass(frozen=True)
class Format:
    """One on-disk format: what it holds, how its rows are checked and described."""

    name: str
    fields: str
    validate: Callable[[Iterable[Row]], Iterator[tuple[int, str]]]
    stats: Callable[[Iterable[Row]], dict[str, Any]]


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("step", "question, steps, step_labels (0/1; no 0, or one 0 last)", validate_step, step_stats),
        Format(
            "span",
            "question, model_answer, hallucination_annotation (<HAL> markup)",
            validate_span,
            span_stats,
        ),
        Format(
            "math-shepherd",
            "prompt, completions, labels (bool) | input, label (ки text, +/-)",
            validate_math_shepherd,
            math_shepherd_stats,
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
        ),
    )
}


def get_format(name: str) -> Format:
    """The format called ``name``; ``KeyError`` naming the known ones otherwise.

    >>> get_format("step").name
    'step'
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None
