"""The two kinds of failure the CLI tells apart (DESIGN.md "Exit codes").

``BadInput`` is the user's to fix: a missing or edited file, an unknown split, a bad flag value.
The CLI prints its message as one line and exits 2. Messages name the file and the fault.
Any other exception is a bug or an environment failure and exits 1.
"""

from __future__ import annotations


class PosttrainError(Exception):
    """Base class for errors the CLI reports as one line instead of a traceback."""

    exit_code = 1


class BadInput(PosttrainError):
    """Bad usage or bad input: a one-line reason naming the file and the fault (exit 2)."""

    exit_code = 2


class HubUnavailable(PosttrainError):
    """A Hub path was given where the Hub cannot be reached (offline machine, wrong endpoint)."""

    exit_code = 2
