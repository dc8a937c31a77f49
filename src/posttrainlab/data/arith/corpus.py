"""The synthetic pretraining corpus for the tiny base model, contamination-checked against arith-v1.

A tiny model trained from scratch on arith-v1's few thousand SFT rows memorises them (the policy-lab
issue measured 4–10% on held-out problems), so the embedded default first learns arithmetic from a
large corpus generated on the fly from a seed: single equations ``a op b = c`` and two-operation
chains written as two calculation lines. None of it uses arith-v1's prompt; loss is taken on the
results only (see ``segments``), since operands are random and cannot be predicted.

Contamination control is by *program*: the sequence of operations with their literal operands. Every
item whose program equals the program of a problem in arith-v1's evaluation pools (test, validation,
dev; preference_test is built from test) is rejected while drawing, and ``contamination_report``
re-checks the finished corpus. Program equality is stricter than the card's key: it also catches a
chain that computes exactly a word problem of the test set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

from posttrainlab.data.arith.problems import PREV, Step, execute

EVAL_POOLS = ("test", "validation", "dev")  # preference_test is derived from test


@dataclass
class CorpusConfig:
    """What the pretraining corpus holds (configs/models/tiny-base.yaml, ``corpus:``)."""

    seed: int = 20251018
    size: int = 100_000  # items (equations, chains or worked problems)
    chain_share: float = 0.25  # share of two-operation chains
    worked_share: float = 0.2  # share of worked problems ("Compute <expression>." then its calculation lines)
    max_digits: int = 3  # operands of + and - have up to max_digits digits
    small_share: float = 0.15  # share of + and - equations with a uniform digit count (else uniform 10..10^d-1)


class Item(NamedTuple):
    """One corpus item: a program, and whether it is written as a worked problem."""

    program: tuple[Step, ...]
    worked: bool = False


def _operand(rng: random.Random, max_digits: int) -> int:
    """Uniform digit count, then a uniform number with that many digits (small numbers get their share)."""
    digits = rng.randint(1, max_digits)
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


def single_program(rng: random.Random, cfg: CorpusConfig) -> tuple[Step, ...]:
    op = rng.choice("+-*")
    if op == "*":
        if rng.random() < 0.7:
            a, b = rng.randint(1, 199), rng.randint(1, 12)
        else:
            a, b = rng.randint(2, 40), rng.randint(2, 40)
        if rng.random() < 0.5:
            a, b = b, a
        return ((op, a, b),)
    if rng.random() < cfg.small_share:
        a, b = _operand(rng, cfg.max_digits), _operand(rng, cfg.max_digits)
    else:  # the sizes arith-v1 asks about: carries through every column are common
        a, b = rng.randint(10, 10**cfg.max_digits - 1), rng.randint(10, 10**cfg.max_digits - 1)
    if op == "-" and b > a:
        a, b = b, a
    return ((op, a, b),)


def _chain(rng: random.Random, cfg: CorpusConfig) -> tuple[Step, ...]:
    first = single_program(rng, CorpusConfig(max_digits=2))[0]
    op2 = rng.choice("+-*")
    c = rng.randint(2, 12) if op2 == "*" else _operand(rng, cfg.max_digits)
    if rng.random() < 0.5:
        return (first, (op2, PREV, c))
    return (first, (op2, c, PREV))


def _valid(program: tuple[Step, ...]) -> bool:
    return all(line.result >= 0 for line in execute(program))


def eval_programs() -> set[tuple[Step, ...]]:
    """The programs of every problem in arith-v1's evaluation pools."""
    from posttrainlab.data.arith.generator import draw_pools

    pools = draw_pools()
    return {p.program for name in EVAL_POOLS for p in pools[name]}


def draw_corpus(cfg: CorpusConfig, exclude: set | None = None) -> tuple[list[Item], int]:
    """``cfg.size`` items drawn from ``cfg.seed``, none whose program is in ``exclude``; also how many were rejected."""
    exclude = eval_programs() if exclude is None else exclude
    rng = random.Random(f"arith-corpus:{cfg.seed}")
    items: list[Item] = []
    rejected = 0
    while len(items) < cfg.size:
        u = rng.random()
        worked = u < cfg.worked_share
        chain = worked and rng.random() < 0.5 or (not worked and u < cfg.worked_share + cfg.chain_share)
        program = _chain(rng, cfg) if chain else single_program(rng, cfg)
        if not _valid(program):
            continue
        if program in exclude:
            rejected += 1
            continue
        items.append(Item(program, worked))
    return items, rejected


_PRECEDENCE = {"+": 1, "-": 1, "*": 2}


def expression(program: tuple[Step, ...]) -> str:
    """The program as one infix expression, with the brackets its order of operations needs.

    >>> expression((("*", 6, 3), ("-", PREV, 15))), expression((("+", 6, 3), ("*", PREV, 4)))
    ('6 * 3 - 15', '(6 + 3) * 4')
    >>> expression((("*", 6, 3), ("+", 15, PREV))), expression((("-", 6, 3), ("-", 15, PREV)))
    ('15 + 6 * 3', '15 - (6 - 3)')
    """
    text = ""
    for i, (op, a, b) in enumerate(program):
        if i == 0:
            text = f"{a} {op} {b}"
            continue
        prev_op = program[i - 1][0]
        if a == PREV:
            inner = f"({text})" if _PRECEDENCE[prev_op] < _PRECEDENCE[op] else text
            text = f"{inner} {op} {b}"
        else:
            inner = text if _PRECEDENCE[prev_op] > _PRECEDENCE[op] else f"({text})"
            text = f"{a} {op} {inner}"
    return text


def segments(item: Item | tuple[Step, ...]) -> list[tuple[str, bool]]:
    """Text pieces of one item and whether each is trained on.

    An equation or chain trains on its results only (operands are random); a worked problem trains
    on its whole solution (copying the operands from the question is the skill it teaches), written
    in a wording arith-v1 never uses ("Compute …", "Result:").

    >>> segments((("*", 6, 3), ("-", PREV, 15)))
    [('6 * 3 =', False), (' 18\\n', True), ('18 - 15 =', False), (' 3\\n', True)]
    >>> segments(Item((("*", 6, 3),), worked=True))
    [('Compute 6 * 3.\\n', False), ('6 * 3 = 18\\nResult: 18\\n', True)]
    """
    if not isinstance(item, Item):
        item = Item(item)
    lines = execute(item.program)
    if item.worked:
        body = "".join(f"{line.render()}\n" for line in lines) + f"Result: {lines[-1].result}\n"
        return [(f"Compute {expression(item.program)}.\n", False), (body, True)]
    out: list[tuple[str, bool]] = []
    for line in lines:
        out.append((f"{line.left} {line.op} {line.right} =", False))
        out.append((f" {line.result}\n", True))
    return out


def contamination_report(items: list[Item], rejected: int, exclude: set | None = None) -> dict:
    """Re-check a drawn corpus against the evaluation pools; ``overlap`` must be 0."""
    exclude = eval_programs() if exclude is None else exclude
    overlap = sum(1 for item in items if item.program in exclude)
    return {
        "checked_against": [*EVAL_POOLS, "preference_test (derived from test)"],
        "unit": "program: the operations with their literal operands (stricter than the card's key)",
        "eval_programs": len(exclude),
        "corpus_items": len(items),
        "rejected_while_drawing": rejected,
        "overlap": overlap,
    }
