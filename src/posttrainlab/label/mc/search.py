"""Binary search for the first zero of V on one trace (``search="binary"``, OmegaPRM-style): pure bisection.

On a trace whose final grade is wrong, bisection rolls out only the prefixes it visits and stops at a
zero ``z`` (measured V = 0) whose predecessor was measured V > 0 (or ``z = 0``); every measured prefix
before ``z`` is > 0, so ``z`` is the first *measured* zero, and when V is monotone (once 0, it stays 0)
it is the first zero. Without monotonicity an earlier unvisited prefix may have V = 0: finding it would
take rolling out every prefix before ``z``, which is the full search. On a correct trace nothing is
rolled out (every prefix has one correct continuation, the trace itself).

Values written: a visited prefix its measured V; an unvisited prefix after ``z`` 0.0; an unvisited
prefix before it the V of the nearest visited prefix after it (which is > 0: the last positive probe,
or the correct trace's 1.0). So the hard labels are what the search concluded, and soft values of
unvisited prefixes are copies. ``how`` in the work file says which rule gave each value, and each row's
``value_source`` says ``measured`` (``rollout``, ``trace``) or ``inferred`` (``carried``,
``after_zero``). Written by hand: the stopping rule and the values of unvisited prefixes are ours, and
this module knows nothing of models (``rollouts`` feeds it measured values), so it is tested exhaustively.
"""

from __future__ import annotations

from collections.abc import Sequence


class FirstZeroSearch:
    """Bisection for a >0 -> 0 step of V on one trace: the first zero when V is monotone (module docstring).

    ``first_zero`` ends measured 0 with ``first_zero - 1`` measured > 0 (or ``first_zero == 0``), and no
    measured prefix before it is 0; ``None`` on a correct trace. ``values()`` gives ``(V, how)`` per prefix.

    >>> s = FirstZeroSearch(num_steps=6, final_value=0.0)
    >>> probes = []
    >>> while (i := s.next_probe()) is not None:
    ...     probes.append(i)
    ...     s.record(i, 0.5 if i < 3 else 0.0)
    >>> probes, s.first_zero
    ([2, 3], 3)
    >>> s.values()  # doctest: +NORMALIZE_WHITESPACE
    [(0.5, 'carried'), (0.5, 'carried'), (0.5, 'rollout'), (0.0, 'rollout'), (0.0, 'after_zero'),
     (0.0, 'trace')]
    """

    def __init__(self, num_steps: int, final_value: float):
        self.num_steps = num_steps
        self.visited: dict[int, float] = {num_steps - 1: final_value}
        self.lo = -1  # the last prefix known to be positive (-1: none yet)
        self.first_zero: int | None = num_steps - 1 if final_value == 0 else None

    def next_probe(self) -> int | None:
        if self.first_zero is None or self.first_zero - self.lo <= 1:
            return None
        return (self.lo + self.first_zero) // 2

    def record(self, step_idx: int, value: float) -> None:
        self.visited[step_idx] = value
        if value > 0:
            self.lo = step_idx
        else:
            self.first_zero = step_idx

    def values(self) -> list[tuple[float, str]]:
        out = []
        last = self.num_steps - 1
        for i in range(self.num_steps):
            if i in self.visited:
                out.append((self.visited[i], "trace" if i == last else "rollout"))
            elif self.first_zero is not None and i > self.first_zero:
                out.append((0.0, "after_zero"))
            else:
                nearest = min(j for j in self.visited if j > i)
                out.append((self.visited[nearest], "carried"))
        return out


def simulate_binary(values: Sequence[float]) -> tuple[list[float], int]:
    """Binary-search values of one trace from its full labelling, and the prefixes it would roll out.

    With per-prefix seeds a binary run measures the same V as a full run at every prefix it visits, so
    this gives its labels exactly from a full run's values (the last value is the trace's own grade).

    >>> simulate_binary([0.75, 0.5, 0.0, 0.25, 0.0])
    ([0.5, 0.5, 0.0, 0.0, 0.0], 2)
    """
    search = FirstZeroSearch(len(values), values[-1])
    visits = 0
    while (i := search.next_probe()) is not None:
        search.record(i, values[i])
        visits += 1
    return [v for v, _ in search.values()], visits


__all__ = ["FirstZeroSearch", "simulate_binary"]
