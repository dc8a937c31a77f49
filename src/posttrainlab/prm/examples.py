"""PRM training examples: rows of any step-level format -> labelled token sequences.

Hand-written because each format says "which step is right" differently and the labels must land on
exactly the tokens the scorer reads (``posttrainlab.prm.format.encode_solution``). Two stages:

1. ``read_items``: rows -> ``StepRow(question, steps, labels[, HAL spans])`` (or ``JudgePrompt``) whose
   labels are float targets (``StepRow.targets``), one row at a time through the format's own reader
   (``data.formats.FORMATS[format].to_steps``, which checks it with the format's validator:
   ``FILE: row i: reason``, exit 2), then cut where the training view cuts (``CUT_AT_FIRST_ERROR``):

   | format | steps | target per step |
   |---|---|---|
   | step | ``steps`` | ``step_labels`` (1 correct, 0 wrong) |
   | span | ``model_answer`` cut after the first touched piece (SHARP's conversion) | SHARP step labels |
   | math-shepherd | every step (Math-Shepherd keeps steps after an error) | ``labels`` |
   | processbench | up to and including ``label`` (ratings: cut at the first -1) | 1 ... 1, 0 |
   | mc-value | the trace's ``steps`` (see below) | V of the prefix ending at that step |

   With ``supervision: step`` an MC value becomes the hard label ``V >= 0.5`` (the card's ``correct``);
   with ``soft`` a hard label is the value 0.0 or 1.0.

   **Outcome labels** (``supervision: outcome | outcome-last``, an outcome reward model; ``outcome_labels``):
   a step or Math-Shepherd row, read whole and never cut, gets its solution's final outcome, 1 when the answer
   is right, on every step (``outcome``: Cobbe et al. 2021's value at every token, here at every separator) or
   on its last step only (``outcome-last``; the others ``IGNORE``). The outcome is the row's ``outcome`` field
   when it has one (arith-prm's grader verdict: ``correct`` = 1), else its last step's label (the answer step
   of a whole solution: Math-Shepherd's and arith-prm's every-step view). A row that says it was cut
   (``num_steps`` above its steps, as arith-prm's first-error step view is) is refused: the ORM must see the
   steps after an error. The same rows with their step labels train the PRM, so the two differ in labels only.

   **MC-value rows** (Polaris MC) are one row per prefix. The card's judge prompt (``messages``) mixes
   question and prefix in one string, so grouped and prefix training need each row to carry
   ``question`` (str) and ``steps`` (list of str: the trace's steps, or at least its prefix's). The
   card leaves ``step_idx`` open, and both readings occur: ``count`` (the number of steps in the
   prefix, 0 = the empty prefix, up to ``num_steps``; tests/assets/formats/mc_value.jsonl) and
   ``last`` (the 0-based index of the prefix's last step, up to ``num_steps - 1``; ``posttrain label
   mc``). ``dataset.mc_step_idx`` says which (``auto``: see ``mc_step_idx_counts``; a file that does
   not show its convention is refused, never guessed). A prefix's V goes on the separator of its last
   step; the empty prefix has no separator and is skipped. A row whose ``value_source`` is
   ``inferred`` (a value binary search concluded, not measured) is skipped unless
   ``dataset.mc_use_inferred``: its separator gets no target.
   ``mc_rows: grouped`` folds the rows of a trace (``id``, ``sample_index``) into one sequence;
   ``prefix`` makes one sequence per row in the same format; ``messages`` trains on the card's rows as
   they are (one ``JudgePrompt`` each, needing neither ``question`` nor ``steps``).

2. ``make_example``: an item -> ``{"input_ids", "labels"}`` with ``IGNORE`` everywhere except:
   each step's separator token (its target); with span supervision also every token of the steps'
   own text, labelled 0 when its characters overlap a ``<HAL>`` span and 1 otherwise (question,
   template and separator tokens get no token label; a piece touched only by a tag at its edge has a
   0 at its separator but no 0 token). ``train_on_last_step_only`` keeps only the last labelled step
   (and, for spans, that step's tokens). A sequence longer than ``max_length`` is cut at the end;
   a judge prompt is cut at the start so its verdict position survives.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, replace
from typing import Any

from posttrainlab.data.formats.registry import FORMATS
from posttrainlab.data.formats.step import StepRow
from posttrainlab.errors import BadInput
from posttrainlab.prm.losses import IGNORE
from posttrainlab.train.prm_recipe import PRMDataConfig


@dataclass
class JudgePrompt:
    messages: list[dict[str, str]]
    target: float


def _rows(cfg: PRMDataConfig):
    from posttrainlab.data.formats.readers import iter_rows

    rows = iter_rows(cfg.path)
    return enumerate(rows if cfg.limit is None else itertools.islice(rows, cfg.limit))


def _hard(values: list[Any]) -> list[float]:
    return [1.0 if v else 0.0 for v in values]


#: Formats whose training view is cut after the first error: SHARP's conversion of the span view, and
#: ProcessBench ratings (a ProcessBench row is already cut at ``label``). Math-Shepherd keeps every step.
CUT_AT_FIRST_ERROR = frozenset({"span", "processbench"})


def outcome_labels(n: int, correct: bool, supervision: str) -> list[float]:
    """An ORM's targets for a solution of ``n`` steps whose final answer is ``correct``: the outcome on every step
    (``outcome``) or on the last step only (``outcome-last``, ``IGNORE`` before it).

    >>> outcome_labels(3, True, "outcome"), outcome_labels(3, False, "outcome-last")
    ([1.0, 1.0, 1.0], [-100.0, -100.0, 0.0])
    """
    if supervision not in ("outcome", "outcome-last"):
        raise ValueError(f"supervision {supervision!r}: choose outcome or outcome-last")
    value = 1.0 if correct else 0.0
    if supervision == "outcome":
        return [value] * n
    return [IGNORE] * (n - 1) + [value] if n else []


def solution_outcome(row: dict, item: StepRow) -> bool:
    """Whether a whole solution's final answer is right: its row's ``outcome`` (arith-prm's grader verdict) when it
    has one, else its last step's label (module docstring). ``ValueError`` for a row cut short or without steps.

    >>> solution_outcome({"outcome": "correct"}, StepRow("q", ["a", "b", "c"], [0, 0, 1]))
    True
    >>> solution_outcome({}, StepRow("q", ["a", "b"], [1, 0]))
    False
    """
    n = row.get("num_steps")
    if isinstance(n, int) and not isinstance(n, bool) and len(item.steps) < n:
        raise ValueError(
            f"{len(item.steps)} of the solution's {n} lines (cut at its first error); an outcome label needs the "
            "whole solution: use the Math-Shepherd view of an arith-prm build with --labels every-step"
        )
    if not item.steps:
        raise ValueError("no steps to carry an outcome label")
    if "outcome" in row:
        if not isinstance(row["outcome"], str):
            raise ValueError(f"outcome {row['outcome']!r}: expected a grader outcome string (e.g. correct)")
        return row["outcome"] == "correct"
    return bool(item.labels[-1])


def _step_item(row: dict, fmt: str, outcome: str | None = None) -> StepRow:
    """The training item of one row of a labelled format: its ``StepRow``, cut as the table says, float targets;
    with ``outcome`` (``outcome`` | ``outcome-last``) whole, with outcome labels (``outcome_labels``)."""
    item = FORMATS[fmt].to_steps(row)
    if outcome is not None:
        return replace(item, labels=outcome_labels(len(item.steps), solution_outcome(row, item), outcome))
    if fmt in CUT_AT_FIRST_ERROR:
        item = item.cut_at_first_error()
    return replace(item, labels=_hard(item.labels))


def read_items(cfg: PRMDataConfig, *, soft: bool, outcome: str | None = None) -> list[StepRow | JudgePrompt]:
    """The training items of ``cfg`` (module docstring); ``BadInput`` naming file and row at the first fault.
    ``outcome`` (``outcome`` | ``outcome-last``): an ORM's items, outcome labels in place of the step labels."""
    if outcome is not None and cfg.format in ("mc-value", *CUT_AT_FIRST_ERROR):
        raise BadInput(f"{cfg.path}: outcome labels need whole solutions (format step or math-shepherd), not "
                       f"{cfg.format}")  # fmt: skip
    if cfg.format == "mc-value":
        items = _mc_items(cfg, soft=soft)
    else:
        items = []
        for index, row in _rows(cfg):
            try:
                items.append(_step_item(row, cfg.format, outcome))
            except ValueError as e:
                raise BadInput(f"{cfg.path}: row {index}: {e}") from None
    if not items:
        raise BadInput(f"{cfg.path}: no training rows")
    return items


def _mc_items(cfg: PRMDataConfig, *, soft: bool) -> list[StepRow | JudgePrompt]:
    from posttrainlab.data.formats.mc_value import check_mc_row, is_inferred

    def value(row: dict) -> float:
        return float(row["reward"]) if soft else float(row["reward"] >= 0.5)

    traces: dict[tuple[str, int], list[tuple[int, dict]]] = {}
    items: list[StepRow | JudgePrompt] = []
    read = skipped = 0
    reaches_num_steps = False  # evidence for the `count` reading, from every row (skipped ones too)
    for index, row in _rows(cfg):
        reason = check_mc_row(row)
        if reason is None and cfg.mc_rows != "messages":
            reason = _check_mc_text(row)
        if reason is not None:
            raise BadInput(f"{cfg.path}: row {index}: {reason}")
        read += 1
        reaches_num_steps = reaches_num_steps or row["step_idx"] == row["num_steps"]
        if is_inferred(row) and not cfg.mc_use_inferred:
            skipped += 1
        elif cfg.mc_rows == "messages":
            items.append(JudgePrompt(row["messages"], value(row)))
        else:
            traces.setdefault((row["id"], row["sample_index"]), []).append((index, row))
    if read and skipped == read:
        raise BadInput(
            f"{cfg.path}: no training rows: all {read} rows have value_source inferred "
            "(set dataset.mc_use_inferred=true to train on them)"
        )
    if not traces:
        return items
    count = mc_step_idx_counts(cfg.mc_step_idx, reaches_num_steps, cfg.path)
    for key, rows in traces.items():
        steps = max((r["steps"] for _, r in rows), key=len)
        question = rows[0][1]["question"]
        for index, row in rows:
            n = row["step_idx"] + (0 if count else 1)  # steps in the row's prefix
            if row["question"] != question:
                raise BadInput(f"{cfg.path}: row {index}: question differs from row {rows[0][0]} of trace {key}")
            if row["steps"] != steps[: len(row["steps"])]:
                raise BadInput(f"{cfg.path}: row {index}: steps differ from another row of trace {key}")
            if n > len(row["steps"]):
                carried = len(row["steps"])
                raise BadInput(f"{cfg.path}: row {index}: a prefix of {n} steps but the row carries {carried}")
        # (number of steps in the prefix, V); the empty prefix has no separator to carry its value
        targeted = sorted((r["step_idx"] + (0 if count else 1), value(r)) for _, r in rows)
        targeted = [(n, v) for n, v in targeted if n > 0]
        if not targeted:
            continue
        if cfg.mc_rows == "grouped":
            n = targeted[-1][0]
            targets = [IGNORE] * n
            for j, v in targeted:
                targets[j - 1] = v
            items.append(StepRow(question, steps[:n], targets))
        else:
            items.extend(StepRow(question, steps[:j], [IGNORE] * (j - 1) + [v]) for j, v in targeted)
    return items


def mc_step_idx_counts(setting: str, reaches_num_steps: bool, where: str) -> bool:
    """Whether ``step_idx`` counts the prefix's steps (``count``) rather than indexing its last step (``last``).

    ``auto``: ``count`` when some row has ``step_idx == num_steps`` (``reaches_num_steps``: only a count
    reaches it); otherwise the file could be either (``last``, or ``count`` without its whole-trace rows,
    as after band filtering), and reading it one way when it is the other moves every target one step,
    so ``BadInput`` asks for the setting instead of guessing.

    >>> mc_step_idx_counts("auto", True, "f.jsonl"), mc_step_idx_counts("last", False, "f.jsonl")
    (True, False)
    """
    if setting != "auto":
        return setting == "count"
    if not reaches_num_steps:
        raise BadInput(
            f"{where}: cannot tell what step_idx means (no row has step_idx == num_steps): steps in the prefix "
            "(count, 0 = empty prefix) or the 0-based index of its last step (last, as posttrain label mc writes); "
            "set dataset.mc_step_idx=count or dataset.mc_step_idx=last"
        )
    return True


def _check_mc_text(row: dict) -> str | None:
    need = "grouped/prefix MC-value training needs {} on each row (or set dataset.mc_rows=messages)"
    if not isinstance(row.get("question"), str):
        return need.format("a string `question`")
    steps = row.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        return need.format("`steps`, a list of strings")
    return None


def make_example(
    tokenizer, spec, item: StepRow | JudgePrompt, *, span_tokens: bool, last_only: bool, max_length: int
) -> dict[str, list] | None:
    """``{"input_ids", "labels"}`` for one item (module docstring), or ``None`` when no label survives the cut.
    A ``result`` head's example also holds ``segments`` (``prm.results.segments``: where each result token's
    log-probability is summed)."""
    from posttrainlab.prm.format import chat_messages, encode_solution
    from posttrainlab.prm.results import segments

    results = spec.head == "result"
    if isinstance(item, JudgePrompt):
        if results:
            raise ValueError("a judge-prompt row has no lines whose results the result head reads; use head verdict")
        ids = chat_messages(tokenizer, spec, item.messages)[-max_length:]
        return {"input_ids": ids, "labels": [IGNORE] * (len(ids) - 1) + [item.target]}
    enc = encode_solution(tokenizer, spec, item.question, item.steps, offsets=span_tokens or results)
    labels = [IGNORE] * len(enc.input_ids)
    labelled = [k for k, t in enumerate(item.labels) if t != IGNORE]
    keep = set(labelled[-1:]) if last_only else set(labelled)
    for k in keep:
        labels[enc.separators[k]] = item.labels[k]
    if span_tokens and item.spans is not None:
        starts = [a for a, _ in enc.step_spans]
        for t, (s, e) in enumerate(enc.offsets):
            k = bisect.bisect_right(starts, s) - 1
            if e <= s or k < 0 or k not in keep or e > enc.step_spans[k][1]:
                continue
            a = enc.step_spans[k][0]
            labels[t] = 0.0 if any(s < a + he and e > a + hs for hs, he in item.spans[k]) else 1.0
    ids, labels = enc.input_ids[:max_length], labels[:max_length]
    if all(x == IGNORE for x in labels):
        return None
    if results:
        return {"input_ids": ids, "labels": labels, "segments": segments(enc, item.steps, max_length)}
    return {"input_ids": ids, "labels": labels}


def make_examples(tokenizer, spec, items, *, span_tokens: bool, last_only: bool, max_length: int, where: str):
    """Examples for every item, and how many items lost every label to ``max_length`` (dropped)."""
    examples, dropped = [], 0
    for i, item in enumerate(items):
        try:
            ex = make_example(
                tokenizer, spec, item, span_tokens=span_tokens, last_only=last_only, max_length=max_length
            )
        except ValueError as e:
            raise BadInput(f"{where}: solution {i}: {e}") from None
        if ex is None:
            dropped += 1
        else:
            examples.append(ex)
    if not examples:
        raise BadInput(f"{where}: no example keeps a label within max_length {max_length}")
    return examples, dropped
