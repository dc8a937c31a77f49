"""arith-v1 problems: small programs of binary integer operations, rendered into text.

A problem is its *key* ``(category, template, operands)`` (the card's contamination unit): the
name and item of a word problem are decoration drawn after the key and never part of it, so a test
problem cannot reappear in training under another name. Executing the program gives every
intermediate result, so the reference solution and answer are correct by construction.

Categories (equal share in every split) and their operand spaces:

========================  =====================================  =====
category                  templates                              steps
========================  =====================================  =====
addition                  ``a + b``, a, b in 10–999              1
subtraction               ``a - b``, 10 <= b <= a <= 999         1
multiplication            ``a * b``, a in 12–199, b in 3–9       1
multi_step                8 two-operation expressions            2
word_problem              8 templates (buy/give away, boxes, …)  2
========================  =====================================  =====

The multiplication space is finite: 188 × 7 = 1,316 problems (the card's number).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

CATEGORIES = ("addition", "subtraction", "multiplication", "multi_step", "word_problem")

INSTRUCTION = (
    "Solve the following problem. Show the calculation, then give the final result on its own last "
    'line in the form "Answer: <integer>".'
)

PREV = "prev"  # an operand that is the previous step's result
Operand = int | str
Step = tuple[str, Operand, Operand]  # (operator, left, right)

OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
}


@dataclass(frozen=True)
class Line:
    """One executed calculation line: ``left op right = result``."""

    op: str
    left: int
    right: int
    result: int

    def render(self) -> str:
        return f"{self.left} {self.op} {self.right} = {self.result}"


def execute(program: tuple[Step, ...]) -> list[Line]:
    """Run a program; ``PREV`` operands take the previous line's result.

    >>> [line.render() for line in execute((("*", 6, 3), ("-", PREV, 15)))]
    ['6 * 3 = 18', '18 - 15 = 3']
    """
    lines: list[Line] = []
    for op, a, b in program:
        left = lines[-1].result if a == PREV else int(a)
        right = lines[-1].result if b == PREV else int(b)
        lines.append(Line(op, left, right, OPERATIONS[op](left, right)))
    return lines


def render_solution(lines: list[Line], answer: int | None) -> str:
    """Calculation lines, then ``Answer: <answer>`` (omitted when ``answer`` is None)."""
    text = "\n".join(line.render() for line in lines)
    return text if answer is None else f"{text}\nAnswer: {answer}"


@dataclass(frozen=True)
class Template:
    """One problem shape: how to draw operands, the program they define, and its wording."""

    id: str
    sample: Callable[[random.Random], tuple[int, ...]]
    program: Callable[[tuple[int, ...]], tuple[Step, ...]]
    question: str  # str.format with a, b, c (and name, item for word problems)
    items: tuple[str, ...] = ()


def _pair(lo: int, hi: int, lo2: int, hi2: int) -> Callable[[random.Random], tuple[int, ...]]:
    return lambda rng: (rng.randint(lo, hi), rng.randint(lo2, hi2))


def _ab_then(op2: str, first: str = "*", prev_left: bool = True):
    """``(a first b) op2 c`` when prev_left, else ``c op2 (a first b)`` with operands (c, a, b)."""
    if prev_left:
        return lambda o: ((first, o[0], o[1]), (op2, PREV, o[2]))
    return lambda o: ((first, o[1], o[2]), (op2, o[0], PREV))


def _two_step(
    id: str, ranges: tuple[tuple[int, int], ...], op2: str, question: str, items: tuple[str, ...] = (),
    first: str = "*", prev_left: bool = True,
) -> Template:  # fmt: skip
    """A two-operation template: a, b, c drawn in that order from the inclusive ``ranges``, the program
    ``_ab_then(op2, first, prev_left)``'s."""
    (lo_a, hi_a), (lo_b, hi_b), (lo_c, hi_c) = ranges

    def sample(rng: random.Random) -> tuple[int, ...]:
        return rng.randint(lo_a, hi_a), rng.randint(lo_b, hi_b), rng.randint(lo_c, hi_c)

    return Template(id, sample, _ab_then(op2, first, prev_left), question, items)


# fmt: off
TEMPLATES: dict[str, tuple[Template, ...]] = {
    "addition": (Template("a+b", _pair(10, 999, 10, 999), lambda o: (("+", o[0], o[1]),), "What is {a} + {b}?"),),
    "subtraction": (Template("a-b", _pair(10, 999, 10, 999), lambda o: (("-", o[0], o[1]),), "What is {a} - {b}?"),),
    "multiplication": (Template("a*b", _pair(12, 199, 3, 9), lambda o: (("*", o[0], o[1]),), "What is {a} * {b}?"),),
    "multi_step": (
        _two_step("a*b+c", ((2, 20), (2, 12), (1, 99)), "+", "What is {a} * {b} + {c}?"),
        _two_step("a*b-c", ((2, 20), (2, 12), (1, 99)), "-", "What is {a} * {b} - {c}?"),
        _two_step("a+b*c", ((1, 99), (2, 20), (2, 12)), "+", "What is {a} + {b} * {c}?", prev_left=False),
        _two_step("a-b*c", ((20, 250), (2, 20), (2, 12)), "-", "What is {a} - {b} * {c}?", prev_left=False),
        _two_step("(a+b)*c", ((1, 50), (1, 50), (2, 9)), "*", "What is ({a} + {b}) * {c}?", first="+"),
        _two_step("(a-b)*c", ((10, 99), (1, 99), (2, 9)), "*", "What is ({a} - {b}) * {c}?", first="-"),
        _two_step("a+b-c", ((10, 500), (10, 500), (1, 500)), "-", "What is {a} + {b} - {c}?", first="+"),
        _two_step("a-b+c", ((10, 500), (1, 500), (1, 500)), "+", "What is {a} - {b} + {c}?", first="-"),
    ),
    "word_problem": (
        _two_step("buy_give_away", ((2, 12), (3, 24), (1, 60)), "-",
                  "{name} buys {a} boxes of {item} with {b} {item} in each box. {name} gives away {c} {item}. "
                  "How many {item} does {name} have now?", ("pencils", "crayons", "stickers", "markers", "erasers")),
        _two_step("boxes", ((2, 15), (4, 30), (1, 20)), "+",
                  "{name} packs {a} boxes with {b} {item} in each box and has {c} {item} left over. "
                  "How many {item} does {name} have in total?", ("apples", "oranges", "cookies", "muffins", "candles")),
        _two_step("wages", ((8, 40), (2, 12), (5, 150)), "-",
                  "{name} earns {a} dollars an hour and works {b} hours. Then {name} spends {c} dollars. "
                  "How many dollars does {name} have left?"),
        _two_step("shelf", ((2, 9), (5, 25), (1, 30)), "+",
                  "A shelf has {a} rows with {b} {item} in each row. {name} adds {c} more {item}. "
                  "How many {item} are on the shelf now?", ("books", "jars", "cans", "plants", "boxes")),
        _two_step("savings", ((5, 200), (3, 40), (2, 12)), "+",
                  "{name} has {a} dollars and saves {b} dollars each week for {c} weeks. "
                  "How many dollars does {name} have then?", prev_left=False),
        _two_step("collect", ((5, 300), (2, 200), (1, 200)), "-",
                  "{name} has {a} {item}. {name} finds {b} more {item}, then gives {c} {item} to a friend. "
                  "How many {item} does {name} have now?", ("marbles", "shells", "stamps", "coins", "cards"),
                  first="+"),
        _two_step("share", ((20, 200), (2, 15), (2, 9)), "-",
                  "{name} has {a} {item} and gives {b} {item} to each of {c} friends. "
                  "How many {item} does {name} have left?", ("stickers", "candies", "cards", "balloons", "beads"),
                  prev_left=False),
        _two_step("reading", ((50, 600), (5, 40), (2, 10)), "-",
                  "A book has {a} pages. {name} reads {b} pages a day for {c} days. "
                  "How many pages are left to read?", prev_left=False),
    ),
}
# fmt: on

# Gender-neutral names; a word problem repeats the name instead of using a pronoun (card).
NAMES = (
    "Alex", "Avery", "Casey", "Charlie", "Dakota", "Drew", "Emerson", "Finley", "Jamie", "Jordan",
    "Kai", "Morgan", "Parker", "Quinn", "Riley", "Robin", "Rowan", "Sam", "Skyler", "Taylor",
)  # fmt: skip

_BY_ID = {(cat, t.id): t for cat, ts in TEMPLATES.items() for t in ts}


@dataclass(frozen=True)
class Problem:
    """One arith-v1 problem. ``key`` identifies it; ``name``/``item`` only decorate word problems."""

    category: str
    template: str
    operands: tuple[int, ...]
    name: str = ""
    item: str = ""

    @property
    def key(self) -> tuple[str, str, tuple[int, ...]]:
        return (self.category, self.template, self.operands)

    @property
    def program(self) -> tuple[Step, ...]:
        return _BY_ID[(self.category, self.template)].program(self.operands)

    def lines(self) -> list[Line]:
        return execute(self.program)

    @property
    def answer(self) -> int:
        return self.lines()[-1].result

    @property
    def question(self) -> str:
        t = _BY_ID[(self.category, self.template)]
        names = dict(zip("abc", self.operands, strict=False))
        return t.question.format(name=self.name, item=self.item, **names)

    @property
    def prompt(self) -> str:
        """The instruction and the question, exactly as shown to the model."""
        return f"{INSTRUCTION}\n\n{self.question}"

    @property
    def solution(self) -> str:
        """The reference solution: one calculation line per step, then the answer line."""
        return render_solution(self.lines(), self.answer)


def valid(problem: Problem) -> bool:
    """Every intermediate and final result is a non-negative integer (the card: all answers >= 0)."""
    return all(line.result >= 0 for line in problem.lines())


def space_size(category: str) -> int | None:
    """Number of distinct problems of a finite category (only multiplication is small enough to matter)."""
    if category == "multiplication":
        return (199 - 12 + 1) * (9 - 3 + 1)
    return None


def draw(category: str, rng: random.Random, taken: set) -> Problem:
    """Draw one valid problem of ``category`` whose key is not in ``taken``, and add its key.

    Rejection sampling: a drawn key is never drawn again. Names and items are drawn after the key
    is accepted, so they cannot influence which problems exist.
    """
    templates = TEMPLATES[category]
    for _ in range(1_000_000):
        t = templates[rng.randrange(len(templates))] if len(templates) > 1 else templates[0]
        problem = Problem(category, t.id, tuple(t.sample(rng)))
        if problem.key in taken or not valid(problem):
            continue
        taken.add(problem.key)
        if category == "word_problem":
            name = NAMES[rng.randrange(len(NAMES))]
            item = t.items[rng.randrange(len(t.items))] if t.items else ""
            problem = Problem(category, t.id, problem.operands, name, item)
        return problem
    raise RuntimeError(f"arith-v1: the {category} space is exhausted")
