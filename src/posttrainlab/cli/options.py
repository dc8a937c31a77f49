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
- **Output paths are checked first.** Every ``--out`` / ``--output-dir`` option parses its value with ``out_folder``
  (``out_file`` where the output is one file), so an empty value, a file where a folder of the path should be, or a
  place nothing can be written to is refused in one line before the verb starts (``data.atomic.check_writable``,
  the one rule; ``check_out`` applies it to an output path that comes from a settings file instead of a flag).
- **One writer per output folder.** A verb that writes an ``--out`` folder holds its writer lock
  (``lock_out``, ``writer_lock``) from just after its checks (a refused run leaves everything as it was) until its
  outputs are written: a second writer of that folder is refused at once in one line naming the first's PID and
  command (issue #42); readers need no lock.
- **Results are not overwritten silently.** ``check_results`` refuses an output folder that already holds a
  verb's results file unless ``--overwrite`` (``OVERWRITE``). It lives here, in the CLI layer, on purpose: the
  library functions (``runners.policy.evaluate_policy``, ``runners.prm_eval.run``, ``runners.best_of_n.run``) keep
  replacing their outputs, which the quickstart relies on (it skips a stage whose metrics exist and calls the
  library for the others). A verb that writes one file (``data convert``, ``data join``, ``eval judge-summary``)
  applies ``check_out_file``: that rule, and never onto a file it reads, however spelled (issue #42).
"""

from __future__ import annotations

import typing
from contextlib import AbstractContextManager, nullcontext
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


def check_prm(spec: str | Path, flag: str = "--prm") -> None:
    """``check_model``, and for a local folder that it holds a PRM checkpoint (``prm.spec.check_prm_folder``,
    from its JSON files): a policy folder given as the PRM is refused before any sampling, not after it."""
    from posttrainlab.models.loading import is_local
    from posttrainlab.prm.baseline import baseline_policy, is_baseline
    from posttrainlab.prm.spec import check_prm_folder

    if is_baseline(spec):  # baseline:POLICY, the policy's own verifier (prm.baseline): a policy to check
        try:
            policy = baseline_policy(spec)
        except BadInput as e:
            raise BadInput(f"{flag} {e}") from None
        return check_model(policy, flag)
    if is_local(str(spec)) and not Path(spec).expanduser().is_dir():
        raise BadInput(f"{flag} {spec}: no such model folder (PRM)")
    check_model(spec, flag)
    if is_local(str(spec)):
        try:
            check_prm_folder(spec)
        except BadInput as e:
            raise BadInput(f"{flag} {e}") from None


def check_out(out: str | Path, flag: str = "--out", *, file: bool = False) -> Path:
    """``out`` as a ``Path`` when a verb can write its output there (``data.atomic.check_writable``); else one
    ``BadInput`` line naming ``flag`` and the fault."""
    from posttrainlab.data.atomic import check_writable

    try:
        return check_writable(out, file=file)
    except BadInput as e:
        raise BadInput(f"{flag} {out!r}: {e}" if out == "" else f"{flag} {e}") from None


def out_folder(value: str | Path) -> Path:
    """The parser of every ``--out`` option that names a folder (``check_out``): ``typer.Option(..., *OUT,
    parser=out_folder)``. Typer passes the text as typed (``""`` too, which ``Path`` would read as ``.``)."""
    return check_out(value)


def out_file(value: str | Path) -> Path:
    """The parser of every ``--out`` option that names one output file (``check_out(file=True)``)."""
    return check_out(value, file=True)


def lock_out(out: str | Path | None, what: str = "output folder") -> AbstractContextManager:
    """The writer lock of a verb's output folder (``writer_lock``), held by ``with lock_out(out):`` around the verb's
    writing, after its checks and before any model is loaded; no lock when ``out`` is None (no ``--out``: nothing
    is written to a folder of the user's)."""
    from posttrainlab.writer_lock import writer_lock

    return nullcontext() if out is None else writer_lock(out, what=what)


def click_errors() -> tuple[type[Exception], type[Exception]]:
    """``(ClickException, NoArgsIsHelpError)`` of the click that typer runs on (typer >= 0.2x vendors its own copy
    as ``typer._click``; older ones use the ``click`` package, whose no-args help is a plain exit)."""
    try:
        from typer._click import exceptions
    except ImportError:  # typer on the click package
        from click import exceptions
    return exceptions.ClickException, getattr(exceptions, "NoArgsIsHelpError", ())


BACKEND = typer.Option(
    "transformers",
    "--backend",
    help="What samples the policy: transformers (in this process), vllm (vLLM in this process: a CUDA venv with "
    "vllm), vllm-server (a vLLM server from `make vllm`'s venv that the verb starts and stops; docs/vllm.md).",
)


OVERWRITE = typer.Option(
    False, "--overwrite", help="Replace the results an earlier run left in --out (refused without this flag)."
)
#: the policy, PRM and problems of the verbs that sample a policy and score it with a PRM (best-of-N, beam search)
POLICY = typer.Option(..., "--policy", help="Policy to sample: a Hugging Face model folder or Hub id.")
PRM = typer.Option(..., "--prm", help="PRM folder (posttrain train prm) or Hub id.")
PROBLEMS = typer.Option(..., *DATA, help="arith-v1 folder (DIR or DIR:SPLIT; default split test) or file.")


def check_results(
    out: Path, results: str | tuple[str, ...], overwrite: bool, *, what: str = "eval results"
) -> None:  # fmt: skip
    """``BadInput`` when ``out`` holds one of the ``results`` files and ``overwrite`` is off: say which, when it was
    written and what to do (the one overwrite rule of every verb that writes results)."""
    names = (results,) if isinstance(results, str) else results
    found = [Path(out) / name for name in names if (Path(out) / name).exists()]
    if overwrite or not found:
        return
    when = datetime.fromtimestamp(found[0].stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    raise BadInput(
        f"{out} already holds {what} ({found[0].name} from {when}); pass --overwrite to replace them, "
        "or choose another --out"
    )


def check_out_file(out: Path, overwrite: bool, inputs, *, what: str = "a file") -> None:
    """The one rule of every verb that writes one file (``data convert``, ``data join``, ``eval judge-summary``):
    never onto one of its ``inputs`` (``{"--span": path}``), however spelled and ``--overwrite`` or not
    (``data.atomic.check_not_input``); an existing file only with ``--overwrite`` (``check_results``)."""
    from posttrainlab.data.atomic import check_not_input

    check_not_input(out, inputs)
    check_results(out.parent, out.name, overwrite, what=what)


__all__ = [
    "BACKEND",
    "CONCURRENCY",
    "DATA",
    "FLAG_ALIASES",
    "OUT",
    "OVERWRITE",
    "POLICY",
    "PRM",
    "PROBLEMS",
    "THREADS",
    "check_data",
    "check_model",
    "check_out",
    "check_out_file",
    "check_prm",
    "check_results",
    "check_split",
    "choice",
    "click_errors",
    "lock_out",
    "out_file",
    "out_folder",
]
