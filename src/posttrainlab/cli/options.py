"""What the verbs share on the command line: one spelling per concept, choices shown in ``--help``, checks that run
before torch is imported (docs/design.md "CLI contract" and "Layers"; the names are listed in README, "Commands").

- **Names.** An output folder is ``--out`` (also ``--output-dir``), an input dataset ``--data`` (also
  ``--data-file``), torch CPU threads ``--threads``, concurrent requests to an endpoint ``--concurrency``.
  ``--num-threads`` keeps the one meaning it has in the Math-Shepherd-614 script that ``eval judge`` follows
  (concurrent requests): it is the old name of ``--concurrency`` on ``eval judge`` and ``annotate``, and is never
  a name of torch threads, so that no spelling means two things. ``FLAG_ALIASES`` gives the same aliases to the
  verbs whose flags come from a dataclass (``cli.settings``).
- **Choices.** ``choice(VALUES)`` is the annotation of an option that takes one of ``VALUES``: typer shows them as
  ``<a|b|c>`` in ``--help`` and refuses any other value (exit 2) before the verb runs. ``VALUES`` is always the
  tuple the library defines (``generation.factory.BACKENDS``, ``models.loading.DTYPES``...), never a copy.
- **Fail fast.** ``check_data``, ``check_split`` and ``check_model`` refuse a local path that does not exist (or a
  split a dataset lacks), through the library's own resolvers and without importing torch, so a typo costs a
  fraction of a second, not a model load. A verb runs them in its library function's order, so the first fault
  reported stays the same.
- **Results are not overwritten silently.** ``check_results`` refuses an output folder that already holds a
  verb's results file unless ``--overwrite`` (``OVERWRITE``). It lives here, in the CLI layer, on purpose: the
  library functions (``eval.policy.evaluate_policy``, ``eval.prm_eval.run``, ``eval.best_of_n.run``) keep
  replacing their outputs, which the quickstart relies on (it skips a stage whose metrics exist and calls the
  library for the others).
"""

from __future__ import annotations

import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from posttrainlab.errors import BadInput

OUT = ("--out", "--output-dir")
DATA = ("--data", "--data-file")
THREADS = ("--threads",)
CONCURRENCY = ("--concurrency", "--num-threads")
#: second names of dataclass-settings flags (``cli.settings``): alias -> the field's own flag
FLAG_ALIASES = {"output-dir": "out", "data-file": "data"}


def choice(values: typing.Iterable[str]) -> Any:
    """The annotation of an option taking one of ``values``: ``Literal[...]``, which typer lists and checks.

    >>> typing.get_args(choice(("min", "last")))
    ('min', 'last')
    """
    return typing.Literal[tuple(values)]


def check_data(spec: str | Path, flag: str = "--data") -> None:
    """``BadInput`` now when ``spec`` names a local file or folder (``DIR``, ``DIR:SPLIT``, a file) that does not exist.

    A Hub path is left to the loader (it may need the network); ``data.loading`` parses both, as every loader does.
    """
    from posttrainlab.data.loading import parse_data_path, resolve

    ref = parse_data_path(str(spec))
    if not ref.on_hub:
        try:
            resolve(ref)
        except BadInput as e:
            raise BadInput(f"{flag} {e}") from None


def check_split(spec: str, split: str | None, *, default: str) -> None:
    """``BadInput`` now when a local ``spec`` does not exist or holds no such split (``data.loading.split_file``,
    the resolver the verb's library function uses next, checksums included); a Hub path is left to the loader."""
    from posttrainlab.data.loading import parse_data_path, split_file

    check_data(spec)
    if not parse_data_path(str(spec)).on_hub:
        split_file(str(spec), split, default_split=default)


def check_model(spec: str | Path, flag: str = "--model") -> None:
    """``BadInput`` now when ``spec`` is a local model folder that is missing or holds no ``config.json``.

    A Hub id (``owner/name`` that is no local path) is left to the loader, as ``models.loading.is_local`` decides.
    """
    from posttrainlab.models.loading import check_folder, is_local

    if is_local(str(spec)):
        try:
            check_folder(str(spec))
        except BadInput as e:
            raise BadInput(f"{flag} {e}") from None


def click_errors() -> tuple[type[Exception], type[Exception]]:
    """``(ClickException, NoArgsIsHelpError)`` of the click that typer runs on (typer >= 0.2x vendors its own copy
    as ``typer._click``; older ones use the ``click`` package, whose no-args help is a plain exit)."""
    try:
        from typer._click import exceptions
    except ImportError:  # typer on the click package
        from click import exceptions
    return exceptions.ClickException, getattr(exceptions, "NoArgsIsHelpError", ())


OVERWRITE = typer.Option(
    False, "--overwrite", help="Replace the results an earlier run left in --out (refused without this flag)."
)


def check_results(out: Path, results: str, overwrite: bool) -> None:
    """``BadInput`` when ``out/results`` exists and ``overwrite`` is off: say when it was written and what to do."""
    path = Path(out) / results
    if overwrite or not path.is_file():
        return
    when = datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    raise BadInput(
        f"{out} already holds eval results ({results} from {when}); pass --overwrite to replace them, "
        "or choose another --out"
    )


__all__ = [
    "CONCURRENCY",
    "DATA",
    "FLAG_ALIASES",
    "OUT",
    "OVERWRITE",
    "THREADS",
    "check_data",
    "check_model",
    "check_results",
    "check_split",
    "choice",
    "click_errors",
]
