"""The one progress bar of long library work (generation, scoring, labelling): rich, on stderr.

``progress_bar(enabled)`` gives a ``rich.progress.Progress`` with "description, bar, done/total,
elapsed" columns; ``enabled=False`` turns it off (tests, library callers with their own bars).
"""

from __future__ import annotations


def progress_bar(enabled: bool = True, *, transient: bool = False):
    """A ``rich`` Progress on stderr; add tasks with ``bar.add_task(description, total=...)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=transient,
    )
