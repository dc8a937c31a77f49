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
stays cheap (no sympy in the parent).
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.grading.base import Grade

#: ``parsed`` is cut to this many characters: it is for reading and logging, not for grading.
_PARSED_MAX_CHARS = 200
#: An unescaped ``$``, or an explicit LaTeX environment / box, means "already marked up".
_MARKED_UP = re.compile(r"(?<!\\)\$|\\\(|\\\[|\\boxed")


def reference_text(answer: Any) -> str:
    """The reference answer as text math-verify parses: bare strings and numbers go in ``$...$``.

    Without the dollars math-verify reads a bare reference through its plain-expression path, which
    reads ``(1, 2]`` as ``2`` and ``2\\sqrt{3}`` as ``2``, and ``\\pi`` not at all; inside ``$...$``
    they become the interval, ``2*sqrt(3)`` and ``pi``.

    >>> reference_text("\\\\frac{1}{2}")
    '$\\\\frac{1}{2}$'
    >>> reference_text(0.5), reference_text("$0.5$"), reference_text("\\\\boxed{3}")
    ('$0.5$', '$0.5$', '\\\\boxed{3}')
    """
    text = str(answer).strip()
    if not text:
        raise BadInput(f"empty reference answer {answer!r}")
    return text if _MARKED_UP.search(text) else f"${text}$"


class MathGrader:
    """Grade free-form math answers with math-verify; every item runs in a worker with a time limit.

    Outcomes: ``correct``; ``wrong_answer`` (math-verify extracted an answer and it does not verify);
    ``missing_answer`` (nothing extractable: an empty response, no math); ``timeout`` (the item ran
    past ``timeout`` seconds, or its worker died, e.g. out of memory: no verdict, never correct).
    ``parsed`` is the extracted answer as a short string.

    The pool starts on first use and is shut by :meth:`close`, by leaving a ``with`` block, when the
    grader is garbage-collected, or at interpreter exit. A closed grader starts a new pool if used again.

    >>> with MathGrader(workers=1) as grader:
    ...     grader.grade("So the probability is $\\\\boxed{\\\\dfrac{1}{2}}$.", "0.5")
    Grade(correct=True, outcome='correct', parsed='\\\\frac{1}{2}')
    """

    def __init__(self, timeout: float = 5.0, workers: int | None = None, *, start_method: str | None = None):
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = float(timeout)
        self.workers = workers if workers is not None else _available_cpus()
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        self.start_method = start_method or _default_start_method()
        self._pool = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

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
        pool = self._get_pool()
        futures = [
            pool.schedule(_grade_in_worker, args=(r, ref), timeout=self.timeout)
            for r, ref in zip(responses, references, strict=True)
        ]
        try:
            return [self._collect(f, answer) for f, answer in zip(futures, answers, strict=True)]
        finally:
            for f in futures:  # after a BadInput or Ctrl-C, do not leave work queued
                f.cancel()

    def _collect(self, future, answer: Any) -> Grade:
        from pebble import ProcessExpired

        try:
            outcome, parsed = future.result()
        except (concurrent.futures.TimeoutError, ProcessExpired):
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
    parse("$1$", parsing_timeout=None)


def _grade_in_worker(response: str, reference: str) -> tuple[str, str | None]:
    """Runs in a worker: ``(outcome, parsed)``, plain strings so the result pickles and serializes.

    math-verify's own timeouts are off (``None``): they rely on ``signal.alarm``; the pool's timeout
    is the one that holds.
    """
    from math_verify import parse, verify

    gold = parse(reference, parsing_timeout=None)
    if not gold:
        return "bad_reference", None
    pred = parse(response, parsing_timeout=None)
    if not pred:
        return "missing_answer", None
    # parse() returns [sympy object, the matched text] on success, [the matched text] otherwise.
    parsed = str(pred[1] if len(pred) > 1 else pred[0])[:_PARSED_MAX_CHARS]
    ok = verify(gold, pred, timeout_seconds=None)
    return ("correct" if ok else "wrong_answer"), parsed
