"""Step-DPO pairs (``preference.source: step``): the policy's own first wrong line against the reference's line.

Step-DPO (Lai et al. 2024, "Step-DPO: Step-wise Preference Optimization for Long-chain Reasoning of LLMs") compares,
after a shared right prefix, the first wrong step with a right one, so the preference acts on the line where the
answer went wrong and on nothing after it. Lai et al. find that step with a judge and write the right one with a
model; arith-v1 knows both exactly: ``data.arith.steps.first_error`` is the index ``k`` of a sample's first wrong
line, and line ``k`` of the reference program (``Problem.solution``) is the right one. For every sampled answer with
a wrong line (``first_error`` k >= 0):

- ``prefix``: the sample's own lines before k, each ending in a newline (all right, so the context is the policy's
  own; ``+`` and ``*`` operands may stand in either order);
- ``chosen``: reference line k; ``rejected``: the sample's line k. Each ends in a newline when a line follows it (in
  the reference, in the sample) and in nothing when it is the last: the trainer ends those with the end of turn
  (``train.dpo.step_rows``), so stopping after the line is part of what is compared (an answer whose calculation
  lines are right but that stops before ``Answer:`` pairs "line, newline" with "line, end");
- the same (prefix, rejected) from several samples of a prompt is one pair whose ``count`` is the samples that
  wrote it; per prompt the most frequent first (ties in sample order), at most ``pairs_per_prompt``.

A wrong line past the reference's last (an extra line after a right answer) and an empty answer give no pair.
``chosen_source`` is ``reference`` and ``rejected_outcome`` the arith grader's outcome of the (first) sample.

Written by hand: the pairs come from arith-v1's exact step labels, which no library has.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from posttrainlab.errors import BadInput


def _line(lines: list[str], i: int) -> str:
    """Line ``i`` of ``lines`` as a completion: with a newline when another line follows it."""
    return lines[i] + ("\n" if i < len(lines) - 1 else "")


def step_pairs(record: dict, answers: list[str], outcomes: list[str], pairs_per_prompt: int = 1) -> list[dict]:
    """The Step-DPO pairs of one prompt from its sampled ``answers`` and their grader ``outcomes`` (module docstring).

    >>> r = {"id": "p0", "category": "multi_step", "prompt": "What is 351 - 148 + 56?", "answer": 259}
    >>> a = ["351 - 148 = 203\\n203 + 56 = 269\\nAnswer: 269", "351 - 148 = 213\\nAnswer: 213",
    ...      "351 - 148 = 203\\n203 + 56 = 269\\nAnswer: 269", "351 - 148 = 203\\n203 + 56 = 259\\nAnswer: 259"]
    >>> o = ["wrong_answer", "wrong_answer", "wrong_answer", "correct"]
    >>> for p in step_pairs(r, a, o, 4):
    ...     print(repr(p["prefix"]), repr(p["chosen"]), repr(p["rejected"]), p["count"])
    '351 - 148 = 203\\n' '203 + 56 = 259\\n' '203 + 56 = 269\\n' 2
    '' '351 - 148 = 203\\n' '351 - 148 = 213\\n' 1
    """
    from posttrainlab.data.arith.steps import first_error, parse_question, split_steps

    problem = parse_question(record["prompt"])
    if problem is None:
        raise BadInput(f"record {record.get('id')!r}: not an arith-v1 question (step pairs check each line exactly)")
    reference = split_steps(problem.solution)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for answer, outcome in zip(answers, outcomes, strict=True):
        lines = split_steps(answer)
        k = first_error(problem, lines)
        if k < 0 or k >= len(reference):
            continue
        prefix = "".join(line + "\n" for line in lines[:k])
        chosen, rejected = _line(reference, k), _line(lines, k)  # never equal: line k is wrong, or it ends early
        if (prefix, rejected) in found:
            found[(prefix, rejected)]["count"] += 1
            continue
        found[(prefix, rejected)] = {
            "source_id": record["id"], "category": record.get("category"), "prompt": record["prompt"],
            "prefix": prefix, "step": k, "chosen": chosen, "rejected": rejected, "count": 1,
            "chosen_source": "reference", "rejected_outcome": outcome,
        }  # fmt: skip
    ranked = sorted(found.values(), key=lambda p: -p["count"])[:pairs_per_prompt]  # sorted is stable: sample order
    return [{"id": f"{record['id']}-{i}", **p} for i, p in enumerate(ranked)]


def step_pair_counts(pairs: list[dict]) -> dict[str, Any]:
    """What ``preference_pairs.json`` adds for step pairs: the samples behind them and the lines they are at."""
    return {
        "paired_samples": sum(p["count"] for p in pairs),
        "pairs_by_step": {str(k): n for k, n in sorted(Counter(p["step"] for p in pairs).items())},
    }


def check_step_records(records: list[dict], dataset) -> None:
    """``BadInput`` naming the first record whose prompt is not an arith-v1 question (before anything is sampled)."""
    from posttrainlab.data.arith.steps import parse_question

    for i, r in enumerate(records):
        if parse_question(r["prompt"]) is None:
            raise BadInput(f"{dataset.path}:{dataset.split} record {i}: not an arith-v1 question; preference.source="
                           f"step needs arith-v1 prompts (their lines are checked exactly)")  # fmt: skip


__all__ = ["check_step_records", "step_pair_counts", "step_pairs"]
