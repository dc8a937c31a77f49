"""The ``posttrain`` command: one thin function per verb (docs/design.md "CLI contract").

Each verb parses its flags, builds a config and calls the library; heavy libraries (torch,
transformers, TRL) are imported only inside the verbs that need them, so ``posttrain --help`` and
``posttrain data …`` start in a fraction of a second.

Exit codes: 0 success; 2 bad usage or bad input (one line naming the file and the fault); 1 any other
failure (an ``OSError`` the machine caused, a full disk say, as one line: ``os_error_line``); 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM, from ``kill``, a job scheduler or a container's stop), each after one line saying
what was kept and how to carry on. SIGTERM takes Ctrl-C's path (``Terminated`` is a ``KeyboardInterrupt``), so every
writer that records an interrupt (the quickstart's ``stages.json``, the run files of resumable verbs) records it too.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import warnings
from contextlib import contextmanager

import typer

from posttrainlab import __version__
from posttrainlab.cli import model_import, pipeline, quickstart, report, serve
from posttrainlab.cli.data import data_app
from posttrainlab.cli.evaluate import eval_app
from posttrainlab.cli.label import label_app
from posttrainlab.cli.model import model_app
from posttrainlab.cli.study import study_app
from posttrainlab.cli.train import train_app
from posttrainlab.errors import PosttrainError

# What a Ctrl-C keeps, by command: every writer here renames finished files into place (data/atomic.py), so an
# interrupt never leaves a half-written output; the commands below also keep finished work and resume from it.
_RESUME = "run the same command again to resume"
INTERRUPT_KEPT = {
    ("quickstart",): f"finished stages and the last complete checkpoint are kept in the run folder; {_RESUME}",
    ("study",): f"finished stages and the last complete checkpoint are kept in the study folder; {_RESUME}",
    ("train",): f"complete checkpoints in the recipe's output_dir are kept; {_RESUME} from the newest",
    ("model", "pretrain"): f"complete checkpoints beside the output folder are kept; {_RESUME}",
    ("label", "mc"): f"finished problems are kept in the work folder; {_RESUME}",
    ("generate",): f"finished problems are kept in the run file; {_RESUME}",
    ("annotate",): f"finished rows are kept in the run file; {_RESUME}",
    ("eval", "judge"): f"finished rows are kept in the run file; {_RESUME}",
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's ``KeyboardInterrupt`` would be, so it takes the same path (module docstring)."""


def _on_sigterm(signum, frame) -> None:
    if os.getpid() != _on_sigterm.pid:  # a forked worker (a process pool): die as SIGTERM would have it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    raise Terminated()


@contextmanager
def sigterm_as_interrupt():
    """Inside the block SIGTERM raises ``Terminated`` in this process; the handler before it is put back after (a
    test calling ``main`` in-process keeps its own). Main thread only, where Python runs signal handlers."""
    _on_sigterm.pid = os.getpid()
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (main() called from a thread): leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted(exc: BaseException, args: list[str]) -> int:
    """Print the one line of an interrupt (Ctrl-C or SIGTERM) and return its exit code (130, or 143)."""
    line = interrupt_message(args)
    if isinstance(exc, Terminated):
        print(line.replace("interrupted;", "terminated (SIGTERM);", 1), file=sys.stderr)
        return 128 + signal.SIGTERM
    print(line, file=sys.stderr)
    return 130


#: an OSError the machine or the file system caused, not the program: one line, not a traceback (exit 1)
MACHINE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EROFS", "EIO", "EFBIG", "EMFILE", "ENFILE", "ENOMEM")
    if hasattr(errno, name)
)  # fmt: skip


def os_error_line(e: OSError) -> str:
    """The one line of a machine ``OSError``: what failed, on which file, and that finished outputs are kept.

    >>> os_error_line(OSError(28, "No space left on device", "data/.x.tmp"))  # doctest: +ELLIPSIS
    'posttrain: error: data/.x.tmp: No space left on device (errno 28); outputs written before it are kept ...'
    """
    where = f"{e.filename}: " if e.filename else ""
    return (
        f"posttrain: error: {where}{e.strerror or e} (errno {e.errno}); outputs written before it are kept (every "
        "file is renamed into place only once complete); fix the cause (free space...) and run the same command again"
    )


def interrupt_message(args: list[str]) -> str:
    """The one line printed on Ctrl-C: what was kept and how to carry on, for the command in ``args``.

    >>> interrupt_message(["label", "mc", "--out", "work"])
    'posttrain: interrupted; finished problems are kept in the work folder; run the same command again to resume'
    >>> interrupt_message(["data", "prepare"])
    'posttrain: interrupted; earlier outputs are untouched and nothing half-written was left in place'
    """
    words = [a for a in args if not a.startswith("-")]
    for key in sorted(INTERRUPT_KEPT, key=len, reverse=True):
        if tuple(words[: len(key)]) == key:
            return f"posttrain: interrupted; {INTERRUPT_KEPT[key]}"
    return "posttrain: interrupted; earlier outputs are untouched and nothing half-written was left in place"


class _InterruptibleGroup(typer.core.TyperGroup):
    """The root group: a Ctrl-C anywhere in a verb prints ``interrupt_message`` and exits 130.

    Typer itself turns ``KeyboardInterrupt`` into a silent ``Exit(130)`` before ``main`` could see it, so the line is
    printed here, inside the invocation, where the interrupt still arrives as ``KeyboardInterrupt``.
    """

    def invoke(self, ctx):
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]  # click empties both while it dispatches
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            raise typer.Exit(interrupted(e, args)) from None


app = typer.Typer(
    cls=_InterruptibleGroup,
    name="posttrain",
    help="posttrainlab: process supervision of math reasoning (data, graders, PRMs, judges, SFT/DPO/GRPO).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(data_app, name="data")
model_import.register(model_app)  # model import
app.add_typer(model_app, name="model")
app.add_typer(eval_app, name="eval")
app.add_typer(train_app, name="train")
app.add_typer(label_app, name="label")
app.add_typer(study_app, name="study")
pipeline.register(app)  # generate, annotate
serve.register(app)
quickstart.register(app)
report.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"posttrain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """posttrainlab: process supervision of math reasoning."""


def usage_line(e: Exception) -> str:
    """A usage error (unknown flag, a value not among an option's choices, a missing option) as one line, with the
    ``--help`` to read: the same form as a ``BadInput`` (docs/design.md, exit codes).

    click prints usage errors over three lines or more (usage, a hint, the error); posttrain says what is wrong in
    one line, as it does for every other bad input.
    """
    text = " ".join(e.format_message().split()).replace("Value error, ", "")  # typer's Literal check adds the prefix
    ctx = getattr(e, "ctx", None)
    hint = f" (`{ctx.command_path} --help` lists them)" if ctx is not None else ""
    return f"posttrain: error: {text}{hint}"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn ``PosttrainError`` and usage errors into one line and their
    exit code (2 for bad usage or bad input)."""
    from posttrainlab.cli.options import click_errors
    from posttrainlab.threads import configure_threads

    configure_threads(None)  # the thread policy's OpenMP variables, before any verb imports torch (threads.py)
    click_exception, no_args_is_help = click_errors()
    # TRL 1.16 reads `model.is_gradient_checkpointing`, which transformers 5.24 deprecates: a warning at every
    # checkpoint save that no user of this CLI can act on
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    try:
        with sigterm_as_interrupt():  # SIGTERM takes Ctrl-C's path (module docstring)
            code = app(args=argv, prog_name="posttrain", standalone_mode=False)
    except PosttrainError as e:
        print(f"posttrain: error: {e}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except no_args_is_help as e:  # `posttrain train`: the group's help, as click shows it
        e.show()
        raise SystemExit(e.exit_code) from None
    except click_exception as e:
        print(usage_line(e), file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt as e:  # outside a verb (while parsing flags, say)
        raise SystemExit(interrupted(e, list(sys.argv[1:] if argv is None else argv))) from None
    except OSError as e:
        if e.errno not in MACHINE_ERRNOS:
            raise
        print(os_error_line(e), file=sys.stderr)
        raise SystemExit(1) from None
    if isinstance(code, int) and code:  # typer.Exit(code), e.g. 130 after an interrupt inside a verb
        raise SystemExit(code)
