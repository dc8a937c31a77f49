"""The math grader: math-verify, run in a process pool with a hard per-item timeout.

Why a process pool. math-verify (``parse`` / ``verify``) stops a long parse or comparison with
``signal.alarm``, which works only in the main thread of the main interpreter: anywhere else (a
trainer's reward thread, a server's request handler, a thread pool) it raises ``ValueError``. And
without a timeout one pathological answer hangs the run: ``\\boxed{9^{9^{9}}}`` graded against ``5``
makes sympy build the integer ``9**387420489`` (370 million digits; over ten minutes on one core, see
tests/grading). So each item runs in a worker process with math-verify's own timeouts switched off,
and the parent enforces the time limit from outside, which works from any thread.

Why pebble. ``concurrent.futures.ProcessPoolExecutor`` cannot stop a task that has started:
``future.result(timeout=...)`` only stops *waiting*, and the worker keeps burning a CPU until the
computation ends; killing the worker by hand breaks the whole executor (``BrokenProcessPool``).
``pebble.ProcessPool.schedule(fn, args, timeout=...)`` kills the worker that overruns, fails only
that future with ``TimeoutError``, starts a fresh worker and carries on.

Workers start with ``forkserver`` where the platform has it (else ``spawn``) rather than a plain
``fork`` of the parent, which may be a trainer holding CUDA and a dozen threads (Python 3.14 made
``forkserver`` the Linux default for that reason). Like any ``spawn``/``forkserver`` user, a script
that grades at top level needs the ``if __name__ == "__main__":`` guard, or ``start_method="fork"``.
Each worker imports math-verify once, in its initializer, so ``import posttrainlab.grading.math``
stays cheap (no sympy in the parent). Workers also lift Python's 4,300-digit limit on str <-> int
conversion, under which math-verify reads a long number as no answer at all; the timeout bounds the cost.

Settings. :class:`MathGraderConfig` holds math-verify's comparison settings (``verify``'s
``float_rounding``, ``numeric_precision``, ``strict``, ``allow_set_relation_comp``), its extraction
targets (``parse``'s ``LatexExtractionConfig`` / ``ExprExtractionConfig``, used for the reference and the
response alike) and the per-item timeout; the defaults are math-verify's own. A recipe that names its
grader by a string passes them as ``math:KEY=VALUE,...`` (``get_grader``). With the settings each case
was written for, the grader agrees with all 270 of Math-Verify's own test cases
(``tests/grading/math_verify_cases.jsonl``).

The response is never an exception: ``None`` is ``missing_answer``, any other non-``str``
``malformed`` (``grading.base.grade_of_non_text``), a crash or overrun of its worker ``timeout``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import multiprocessing
import os
import re
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.grading.base import Grade, grade_of_non_text

#: ``parsed`` is cut to this many characters: it is for reading and logging, not for grading.
_PARSED_MAX_CHARS = 200
#: An unescaped ``$``, or an explicit LaTeX environment / box, means "already marked up".
_MARKED_UP = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")
#: LaTeX syntax outside a command: a reference holding any of these is LaTeX and read in ``$...$``.
_LATEX = re.compile(r"[\\^_{}]")
#: One plain number with digit groups: ``1,22`` (a decimal comma), ``1 000``, ``7,425,000``.
_GROUPED_NUMBER = re.compile(r"[+-]?[0-9]+(?:[, ][0-9]+)+(?:\.[0-9]+)?")
#: A word (two letters or more: one letter is a variable) next to a number: ``18 dollars``.
_WORD = re.compile(r"[A-Za-z]{2,}")
#: Words that are mathematics, not units: a reference holding one (``sin 30``, ``2 pi``) is read in ``$...$``.
_MATH_WORDS = frozenset(
    "sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp sqrt pi infty inf mod gcd lcm "
    "max min det".split()
)
_DIGIT = re.compile(r"[0-9]")
_EXTRACTIONS = ("latex", "expr")


@dataclass(frozen=True)
class MathGraderConfig:
    """How the math grader parses and compares (defaults: math-verify's own ``parse`` / ``verify``)."""

    #: ``verify(float_rounding=)``: decimal places both sides are rounded to before a numeric comparison.
    float_rounding: int = 6
    #: ``verify(numeric_precision=)``: significant digits sympy evaluates numbers to.
    numeric_precision: int = 15
    #: ``verify(strict=)``: variables must match by name and sets are not tuples; False matches variables
    #: by position and lets a set equal a tuple.
    strict: bool = True
    #: ``verify(allow_set_relation_comp=)``: an interval against a relation (``x in [-2, 7]`` vs
    #: ``-2 <= x <= 7``) either way; False only when the prediction is the set.
    allow_set_relation_comp: bool = False
    #: ``parse(extraction_config=)``: ``latex`` (LatexExtractionConfig), ``expr`` (ExprExtractionConfig)
    #: or both, for the reference and the response.
    extraction: tuple[str, ...] = _EXTRACTIONS
    #: ``LatexExtractionConfig(boxed_match_priority=)``: 0 tries ``\boxed{}`` first, 50 after "final answer
    #: is" patterns, -1 never.
    boxed_match_priority: int = 50
    #: Seconds one item may run (parse and verify) before its worker is killed: outcome ``timeout``.
    timeout: float = 5.0

    def __post_init__(self) -> None:
        if isinstance(self.extraction, list):  # YAML and JSON give lists
            object.__setattr__(self, "extraction", tuple(self.extraction))
        self.check()

    def check(self) -> None:
        """``BadInput`` naming the first setting out of range (settings come from configs and flags)."""
        for name in ("float_rounding", "numeric_precision", "boxed_match_priority"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadInput(f"math grader setting {name}={value!r}: must be an integer")
        if self.float_rounding < 0 or self.numeric_precision < 1:
            raise BadInput(
                f"math grader settings float_rounding={self.float_rounding}, numeric_precision="
                f"{self.numeric_precision}: need float_rounding >= 0 and numeric_precision >= 1"
            )
        for name in ("strict", "allow_set_relation_comp"):
            if not isinstance(getattr(self, name), bool):
                raise BadInput(f"math grader setting {name}={getattr(self, name)!r}: must be true or false")
        extraction = self.extraction
        if not extraction or not isinstance(extraction, tuple) or not set(extraction) <= set(_EXTRACTIONS):
            raise BadInput(f"math grader setting extraction={extraction!r}: choose latex, expr or latex+expr")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float)) or not self.timeout > 0:
            raise BadInput(f"math grader setting timeout={self.timeout!r}: must be a positive number of seconds")

    def replace(self, settings: Mapping[str, Any]) -> MathGraderConfig:
        """This config with ``settings`` applied; string values (from ``KEY=VALUE``) read by field type.

        >>> c = MathGraderConfig().replace({"strict": "false", "extraction": "latex", "float_rounding": "2"})
        >>> c.strict, c.extraction, c.float_rounding, c.timeout
        (False, ('latex',), 2, 5.0)
        """
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        changes = {}
        for key, value in settings.items():
            if key not in fields:
                raise BadInput(f"unknown math grader setting {key!r}: choose from {', '.join(fields)}")
            changes[key] = _read_setting(key, value, fields[key]) if isinstance(value, str) else value
        return dataclasses.replace(self, **changes)


def _read_setting(key: str, text: str, default: Any) -> Any:
    """A ``KEY=VALUE`` value as the type of the field's default."""
    text = text.strip()
    if isinstance(default, tuple):
        return tuple(part.strip() for part in text.split("+"))
    if isinstance(default, bool):
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise BadInput(f"math grader setting {key}={text!r}: must be true or false")
    try:
        return int(text) if isinstance(default, int) else float(text)
    except ValueError:
        raise BadInput(f"math grader setting {key}={text!r}: must be a number") from None


def reference_text(answer: Any) -> str:
    """The reference answer as the text math-verify parses: LaTeX goes in ``$...$``, plain text may not.

    Without the dollars math-verify reads a bare reference through its plain-expression path, which
    reads ``(1, 2]`` as ``2`` and ``2\\sqrt{3}`` as ``2``, and ``\\pi`` not at all; inside ``$...$``
    they become the interval, ``2*sqrt(3)`` and ``pi``. But ``$...$`` also changes the reading of plain
    text: ``1,22`` becomes the set {1, 22} (bare: 1.22, as Math-Verify's own tests read it), ``1 000``
    becomes 1*000 = 0, ``18 dollars`` a product of letters. So a reference stays bare when it holds no
    LaTeX syntax (``\\ ^ _ { }``) and is either one number with digit groups or a number with words
    that are not mathematics (``sin 30`` is wrapped); every other one is wrapped, and marked-up text is
    left alone. A worker still wraps a bare reference when its bare reading drops one of its digits or
    reads nothing.

    >>> reference_text("\\\\frac{1}{2}"), reference_text(0.5), reference_text("\\\\boxed{3}")
    ('$\\\\frac{1}{2}$', '$0.5$', '\\\\boxed{3}')
    >>> reference_text("1,22"), reference_text("18 dollars"), reference_text("1, 2")
    ('1,22', '18 dollars', '$1, 2$')
    """
    if answer is None or isinstance(answer, bool) or (isinstance(answer, float) and not math.isfinite(answer)):
        raise BadInput(f"math grader: reference answer {answer!r} is not an answer")
    if isinstance(answer, int):
        answer = Decimal(answer)  # str() of an int past 4,300 digits raises ValueError; a Decimal's does not
    text = str(answer).strip()
    if not text:
        raise BadInput(f"empty reference answer {answer!r}")
    if _MARKED_UP.search(text) or _is_plain(text):
        return text
    return f"${text}$"


def _is_plain(text: str) -> bool:
    """Plain text whose reading ``$...$`` would change (``reference_text``)."""
    if _LATEX.search(text):
        return False
    words = {w.lower() for w in _WORD.findall(text)}
    return bool(_GROUPED_NUMBER.fullmatch(text) or (words and _DIGIT.search(text) and not words & _MATH_WORDS))


class MathGrader:
    """Grade free-form math answers with math-verify; every item runs in a worker with a time limit.

    Outcomes: ``correct``; ``wrong_answer`` (math-verify extracted an answer and it does not verify);
    ``missing_answer`` (nothing extractable: an empty response, no math, ``None``); ``malformed`` (the
    response is not a ``str``); ``timeout`` (the item ran past ``config.timeout`` seconds, or its worker
    died or failed, e.g. out of memory: no verdict, never correct). ``parsed`` is the extracted answer as
    a short string.

    ``config`` (a :class:`MathGraderConfig`) sets the parsing and comparison; keyword ``settings``
    override its fields (``MathGrader(timeout=3.0, strict=False)``). ``workers`` and ``start_method``
    only decide where items run, never a grade.

    The pool starts on first use and is shut by :meth:`close`, by leaving a ``with`` block, when the
    grader is garbage-collected, or at interpreter exit. A closed grader starts a new pool if used again.

    >>> with MathGrader(workers=1) as grader:
    ...     grader.grade("So the probability is $\\\\boxed{\\\\dfrac{1}{2}}$.", "0.5")
    Grade(correct=True, outcome='correct', parsed='\\\\frac{1}{2}')
    """

    def __init__(
        self,
        config: MathGraderConfig | None = None,
        *,
        workers: int | None = None,
        start_method: str | None = None,
        **settings: Any,
    ):
        self.config = (config or MathGraderConfig()).replace(settings)
        self.workers = workers if workers is not None else _available_cpus()
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise BadInput(f"math grader workers={self.workers!r}: must be at least 1")
        self.start_method = start_method or _default_start_method()
        self._pool = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    @property
    def timeout(self) -> float:
        """Seconds one item may run (``config.timeout``)."""
        return float(self.config.timeout)

    def grade(self, response: str, answer: Any) -> Grade:
        """Grade one response (in a worker, like every item, so it is under the timeout too)."""
        return self.grade_many([response], [answer])[0]

    def grade_many(self, responses: Sequence[str], answers: Sequence[Any]) -> list[Grade]:
        """Grade ``responses[i]`` against ``answers[i]`` in parallel; grades come back in input order.

        Raises ``BadInput`` when a reference answer is empty or math-verify cannot parse it.
        """
        if len(responses) != len(answers):
            raise ValueError(f"{len(responses)} responses but {len(answers)} answers")
        references = [reference_text(a) for a in answers]
        not_text = [grade_of_non_text(r) for r in responses]
        todo = [i for i, g in enumerate(not_text) if g is None]
        pool = self._get_pool() if todo else None
        futures = {
            i: pool.schedule(_grade_in_worker, args=(responses[i], references[i], self.config), timeout=self.timeout)
            for i in todo
        }
        try:
            return [not_text[i] or self._collect(futures[i], answers[i]) for i in range(len(responses))]
        finally:
            for f in futures.values():  # after a BadInput or Ctrl-C, do not leave work queued
                f.cancel()

    def _collect(self, future, answer: Any) -> Grade:
        from pebble import ProcessExpired

        try:
            outcome, parsed = future.result()
        except (concurrent.futures.TimeoutError, ProcessExpired):
            return Grade(False, "timeout", None)
        except Exception as e:  # math-verify or sympy failed on this one item: no verdict, like an overrun
            logging.getLogger(__name__).warning("math grader: an item failed in its worker (graded timeout): %r", e)
            return Grade(False, "timeout", None)
        if outcome == "bad_reference":
            raise BadInput(f"math-verify cannot parse the reference answer {answer!r}")
        return Grade(outcome == "correct", outcome, parsed)

    def _get_pool(self):
        with self._lock:
            if self._pool is None:
                from pebble import ProcessPool

                context = multiprocessing.get_context(self.start_method)
                self._pool = ProcessPool(max_workers=self.workers, initializer=_init_worker, context=context)
                # Not atexit.register(self.close): that would keep every grader alive until exit.
                self._finalizer = weakref.finalize(self, _stop_pool, self._pool)
            return self._pool

    def close(self) -> None:
        """Stop the workers now (an item still running is killed). Safe to call twice."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._pool, self._finalizer = None, None

    def __enter__(self) -> MathGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop_pool(pool) -> None:
    pool.stop()
    pool.join()


def _available_cpus() -> int:
    """CPUs this process may run on (the affinity mask, which containers and ``taskset`` narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _default_start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _init_worker() -> None:
    """Import math-verify and warm up its LaTeX parser, so no item pays for it against its timeout."""
    from math_verify import parse

    # Its one-time "timeout is disabled, handle it yourself" warning: we do, in the parent.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if hasattr(sys, "set_int_max_str_digits"):  # this process only; the pool's timeout bounds the cost
        sys.set_int_max_str_digits(0)
    parse("$1$", parsing_timeout=None)


def _targets(config: MathGraderConfig) -> list:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    latex = LatexExtractionConfig(boxed_match_priority=config.boxed_match_priority)
    return [latex if name == "latex" else ExprExtractionConfig() for name in config.extraction]


def _parse_reference(reference: str, targets: list) -> list:
    """math-verify's reading of the reference: bare text as it is, unless that drops a digit or reads
    nothing (then in ``$...$``, see ``reference_text``)."""
    from math_verify import parse

    if _MARKED_UP.search(reference):
        return parse(reference, targets, parsing_timeout=None)
    bare = parse(reference, targets, parsing_timeout=None)
    if bare and _DIGIT.findall(str(bare[-1])) == _DIGIT.findall(reference):
        return bare
    return parse(f"${reference}$", targets, parsing_timeout=None)


def _grade_in_worker(response: str, reference: str, config: MathGraderConfig) -> tuple[str, str | None]:
    """Runs in a worker: ``(outcome, parsed)``, plain strings so the result pickles and serializes.

    math-verify's own timeouts are off (``None``): they rely on ``signal.alarm``; the pool's timeout
    is the one that holds.
    """
    from math_verify import parse, verify

    targets = _targets(config)
    gold = _parse_reference(reference, targets)
    if not gold:
        return "bad_reference", None
    pred = parse(response, targets, parsing_timeout=None)
    if not pred:
        return "missing_answer", None
    # parse() returns [sympy object, the matched text] on success, [the matched text] otherwise.
    parsed = str(pred[1] if len(pred) > 1 else pred[0])[:_PARSED_MAX_CHARS]
    ok = verify(
        gold,
        pred,
        float_rounding=config.float_rounding,
        numeric_precision=config.numeric_precision,
        strict=config.strict,
        allow_set_relation_comp=config.allow_set_relation_comp,
        timeout_seconds=None,
    )
    return ("correct" if ok else "wrong_answer"), parsed
