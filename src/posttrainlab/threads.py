"""The thread policy of every torch command: how many intra-op threads, and how idle OpenMP threads wait.

Why one policy: on the lab's 2-core machines a torch job at torch's default of 2 threads was measured 10-15x
slower as soon as another process used a core (pretraining 4 it/s -> 0.28 it/s; ``eval policy`` 30 s -> 310 s),
while at 1 thread it lost far less (issue #17). This torch (the 2.13 CPU wheel) parallelises with GNU OpenMP:
``torch.__config__.parallel_info()`` reports "ATen parallel backend: OpenMP" and the wheel ships
``libgomp.so.1``. After each parallel region, libgomp's worker threads spin on their core (``GOMP_SPINCOUNT``
iterations, 300,000 by default) before they sleep, and every region waits for its slowest thread; with the
other core busy, the worker sharing it is descheduled, so each of thousands of small regions per step waits out
a scheduler time slice. ``OMP_WAIT_POLICY=PASSIVE`` makes idle workers sleep at once, a small
``GOMP_SPINCOUNT`` after a short spin; one thread has no workers to wait for. (An Intel OpenMP build would
read ``KMP_BLOCKTIME`` instead; this wheel has none.)

``CANDIDATES`` are the policies ``bench/bench_threads.py`` measures, each alone and beside a busy process.
``DEFAULT_POLICY`` is the one every command applies when ``--threads`` is not given (``cli.main`` calls
``configure_threads(None)`` before any verb imports torch): ``passive``, torch's thread count with
``OMP_WAIT_POLICY=PASSIVE``. Measured by the bench on the 2-core machine (steps/s of the tiny model; alone, then
beside one busy-loop process), against torch's default:

=========  =================  ==================  =================  ==================
policy     train alone        train beside        generate alone     generate beside
=========  =================  ==================  =================  ==================
default    4.28               1.24 (0.29x alone)  11.13              2.59 (0.23x alone)
threads1   2.39 (0.56x)       2.54 (2.04x)        9.56 (0.86x)       9.84 (3.79x)
passive    3.89 (0.91x)       2.26 (1.82x)        7.20 (0.65x)       7.55 (2.91x)
=========  =================  ==================  =================  ==================

``passive`` degrades gracefully: a busy neighbour costs it 0.58x (train) and nothing (generate) instead of
0.29x and 0.23x, while alone it keeps 0.91x of training speed; one thread would keep only 0.56x. The price is
small-batch generation alone (0.65x: sleeping workers wake up late for thousands of tiny parallel regions).
``OMP_WAIT_POLICY=ACTIVE`` in the environment (a variable the user set is kept) or ``--threads`` brings back
torch's own behaviour.

Order matters: libgomp reads ``OMP_*`` / ``GOMP_*`` once, when torch is first imported, so
``configure_threads`` sets the policy's variables only while torch is not imported yet (the CLI imports
torch inside the verbs, docs/design.md "Layers", so a verb calls it first), and a variable the user set in
the environment is kept. ``torch.set_num_threads`` works at any time; ``--threads N`` beats the policy,
and a user's ``OMP_NUM_THREADS`` beats the policy's thread count. This module never imports torch itself
unless a thread count is to be set.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from posttrainlab.errors import BadInput


@dataclass(frozen=True)
class ThreadPolicy:
    """Intra-op threads (``None``: torch's default, one per physical core) and OpenMP variables to set."""

    threads: int | None = None
    env: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """``"2 threads, OMP_WAIT_POLICY=PASSIVE"``-style text (``default`` for torch's own count).

        >>> ThreadPolicy(env=(("OMP_WAIT_POLICY", "PASSIVE"),)).describe(), ThreadPolicy(threads=1).describe()
        ('default threads, OMP_WAIT_POLICY=PASSIVE', '1 thread')
        """
        count = "default threads" if self.threads is None else f"{self.threads} thread{'s' * (self.threads != 1)}"
        return ", ".join([count, *(f"{k}={v}" for k, v in self.env)])


#: the policies the bench compares (bench/bench_threads.py); the keys are the names it prints
CANDIDATES = {
    "default": ThreadPolicy(),
    "threads1": ThreadPolicy(threads=1),
    "passive": ThreadPolicy(env=(("OMP_WAIT_POLICY", "PASSIVE"),)),
    "spin10k": ThreadPolicy(env=(("GOMP_SPINCOUNT", "10000"),)),
}
#: what every torch command applies when ``--threads`` is not given; switch it after running the bench
DEFAULT_POLICY = CANDIDATES["passive"]


def check_threads(threads: int | None, flag: str = "--threads") -> None:
    """``BadInput`` unless ``threads`` is ``None`` (not given) or a whole number of at least 1.

    >>> check_threads(None), check_threads(2)
    (None, None)
    >>> check_threads(0)
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: --threads 0: must be at least 1
    """
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise BadInput(f"{flag} {threads}: must be at least 1")


def configure_threads(
    threads: int | None = None, *, flag: str = "--threads", policy: ThreadPolicy | None = None
) -> int | None:
    """Apply the thread policy: call it at the start of a torch command, before anything imports torch.

    ``threads`` is the command's ``--threads`` (``None`` when not given); ``policy`` defaults to
    ``DEFAULT_POLICY``, read at call time. Sets the policy's OpenMP variables that the environment does not set
    already (only while torch is not imported: later they would do nothing), then ``torch.set_num_threads``
    with ``threads``, else the policy's count unless ``OMP_NUM_THREADS`` is set. Returns the count it set, or
    ``None`` when it left torch's own. ``BadInput`` for a count below 1.
    """
    check_threads(threads, flag)
    policy = DEFAULT_POLICY if policy is None else policy
    if "torch" not in sys.modules:
        for key, value in policy.env:
            os.environ.setdefault(key, value)
    count = threads
    if count is None and "OMP_NUM_THREADS" not in os.environ:
        count = policy.threads
    if count is None:
        return None
    import torch

    torch.set_num_threads(count)
    return count


__all__ = ["CANDIDATES", "DEFAULT_POLICY", "ThreadPolicy", "check_threads", "configure_threads"]
