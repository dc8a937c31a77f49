"""The two kinds of failure the CLI tells apart (docs/design.md "Exit codes").

``BadInput`` is the user's to fix: a missing or edited file, an unknown split, a bad flag value.
The CLI prints its message as one line and exits 2. Messages name the file and the fault.
Any other exception is a bug or an environment failure and exits 1.
"""

from __future__ import annotations

import math


class PosttrainError(Exception):
    """Base class for errors the CLI reports as one line instead of a traceback."""

    exit_code = 1


class BadInput(PosttrainError):
    """Bad usage or bad input: a one-line reason naming the file and the fault (exit 2)."""

    exit_code = 2


class HubUnavailable(PosttrainError):
    """A Hub path was given where the Hub cannot be reached (offline machine, wrong endpoint)."""

    exit_code = 2


class EndpointError(PosttrainError):
    """A model endpoint failed (after the client's retries, for a transient fault): the run stops (exit 1).

    Defined here, beside the other errors every layer may raise, because the sampling backend
    (``generation``), the judge client (``eval``) and the run pool that stops on it (``data.pool``)
    all need the one class. ``transient`` tells a fault worth retrying (timeout, connection,
    HTTP 408/409/429/5xx) from one that is not; ``retries`` is how many retries were spent on it, and
    the message says so.
    """

    def __init__(self, message: str, transient: bool = False, retries: int = 0):
        self.reason, self.transient, self.retries = message, transient, retries
        super().__init__(f"{message} (after {retries + 1} tries)" if transient and retries else message)


class Diverged(PosttrainError):
    """A training step whose loss or gradient norm is not finite (``train.finite``): the run stops there, with no
    model saved and no ``train_summary.json``, so nothing downstream trains or evaluates from NaN weights (exit 1)."""

    exit_code = 1


def finite(shown: str, value: float | None, *, positive: bool = False) -> None:
    """``BadInput`` when ``value`` (``None``: not set, passes) is NaN or infinite, or with ``positive`` not above 0.
    ``shown`` is the setting as the user spells it (``optim.learning_rate``, ``--timeout``); a flag (``--x``) is
    shown as ``--x nan``, a key as ``key=nan``.

    >>> finite("beta", 0.1, positive=True)
    >>> finite("--timeout", float("nan"), positive=True)
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: --timeout nan: must be a finite number greater than 0
    """
    if value is None or isinstance(value, bool):
        return
    if not math.isfinite(value) or (positive and not value > 0):
        text = f"{shown} {value}" if shown.startswith("--") else f"{shown}={value}"
        raise BadInput(f"{text}: must be a finite number{' greater than 0' if positive else ''}")


def at_least_one(flags: bool = False, **values: int | None) -> None:
    """``BadInput`` for the first of ``values`` below 1 (``None``, not set, passes): ``name=0: must be at least 1``,
    or with ``flags`` as the command line spells it, ``--name 0: must be at least 1`` (a field's flag is its name
    with dashes).

    >>> at_least_one(limit=None, k=2)
    >>> at_least_one(True, k=2, max_tokens=0)
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: --max-tokens 0: must be at least 1
    """
    for name, value in values.items():
        if value is not None and value < 1:
            shown = f"--{name.replace('_', '-')} {value}" if flags else f"{name}={value}"
            raise BadInput(f"{shown}: must be at least 1")


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line (whitespace collapsed), cut to ``limit`` characters.

    >>> one_line(ValueError("bad value\\n  at line 3"))
    'bad value at line 3'
    """
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
