"""The Polaris MC rows of finished problems, the held-out split, the value filters and the value table.

The columns and the table's buckets are the mc-value schema's (``data.formats.mc_value``: ``KEYS``,
``VALUE_SOURCE``, ``STATS_BUCKETS``); this module fills them. V = correct / N; the Math-Shepherd hard
label is V > 0; ``correct`` in the rows is V >= 0.5. ``val_problems`` problems are held out by id,
chosen by a hash of the id alone, so every run holds out the same ones. Written by hand: the user turn
(``PROMPT_TEMPLATE``) is ours, since the card does not publish one, so its version and hash go into
every summary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from posttrainlab.data.formats.mc_value import STATS_BUCKETS, VALUE_SOURCE
from posttrainlab.data.step_split import STEP_SPLITS

if TYPE_CHECKING:
    from posttrainlab.label.mc.problems import MCProblem

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
#: A row's ``value_source`` from the rule that gave its value (``how`` in the work record; ``search``).
SOURCE_OF_RULE = {"rollout": "measured", "trace": "measured", "carried": "inferred", "after_zero": "inferred"}


def row_messages(question: str, prefix: str) -> list[dict[str, str]]:
    """The row's chat: the user judge prompt (question + prefix) and the placeholder assistant verdict."""
    text = PROMPT_TEMPLATE.replace("<<QUESTION>>", question).replace("<<PREFIX>>", prefix)
    return [{"role": "user", "content": text}, {"role": "assistant", "content": LABEL}]


def rows_of(
    record: dict[str, Any], problem: MCProblem, *, source: str, step_split: str, text_columns: bool = True
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
                    VALUE_SOURCE: SOURCE_OF_RULE[p["how"]],
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


def value_rows(stats: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The card's value-distribution table as ``(bucket label, one formatted cell per column)`` rows."""
    rows = []
    for key, label in STATS_BUCKETS:
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


__all__ = [
    "LABEL",
    "PROMPT_SHA256",
    "PROMPT_TEMPLATE",
    "PROMPT_VERSION",
    "SOURCE_OF_RULE",
    "keep_band",
    "mid_difficulty",
    "row_messages",
    "rows_of",
    "validation_ids",
    "value_rows",
    "value_table",
]
