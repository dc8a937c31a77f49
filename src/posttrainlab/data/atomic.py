"""Write files and folders so that a failed run never leaves a half-written output in place.

docs/design.md "Reliability conventions": write to a temporary name beside the target, then rename into
place. ``os.replace`` is atomic for files on one filesystem; a folder is swapped in two renames with
the old one kept until the new one is in place.

A command never deletes a file it did not write: ``check_output_folder`` is the one rule every
writer of an output folder applies before it writes (or swaps a staged folder in). Each writer
says which files are its own, from its manifest or from the files it writes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from posttrainlab.errors import BadInput

#: foreign files named in a refusal; the rest are counted
SHOWN = 3


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def folder_files(folder: str | os.PathLike) -> list[str]:
    """Every file (and link) under ``folder``, as sorted relative POSIX paths; empty folders hold none."""
    folder = Path(folder)
    found = (p for p in folder.rglob("*") if p.is_file() or p.is_symlink())
    return sorted(p.relative_to(folder).as_posix() for p in found)


def check_writable(path: str | os.PathLike, *, file: bool = False) -> Path:
    """``path`` when a command can write there: a folder (``file``: a file) that exists or can be created.

    Checked before any work, so that a run never fails at its last step, its results lost (docs/faults.md
    "Output paths"): an empty path (``""``, which ``Path`` would read as the current folder), a file where the
    folder, or one of its parents, should be, a folder where the file should be, and a place nothing can be written
    to (a read-only or virtual file system, ``/proc``; a folder without write permission) are ``BadInput``. The
    last is found by trying: an empty folder is made, then removed, in the nearest folder that exists (``path``
    itself when it is one), as permission bits do not tell for root or for ``/proc``.
    """
    if isinstance(path, str) and not path:
        raise BadInput(f"empty path: name a {'file' if file else 'folder'} ('.' is the current folder)")
    path = Path(path)
    if path.exists() and path.is_dir() == file:
        raise BadInput(f"{path}: is a folder, not a file" if file else f"{path}: exists and is not a folder")
    where = path if path.is_dir() else next(p for p in path.parents if p.exists() or p.is_symlink())
    if not where.is_dir():
        raise BadInput(f"{path}: {where} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".posttrain-check-", dir=where))
    except OSError as e:
        raise BadInput(f"{path}: cannot write in {where} ({e.strerror or e})") from None
    return path


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file or folder, however spelled (``x``, ``./x/``, a link to it, ``~/x``).

    Both existing: ``os.path.samefile`` (links and hard links too); otherwise their resolved absolute paths.

    >>> same_path("runs/x", "./runs//x/"), same_path("runs/x", "runs/y")
    (True, False)
    """
    a, b = Path(a).expanduser(), Path(b).expanduser()
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_not_input(out: str | os.PathLike, inputs, *, flag: str = "--out") -> None:
    """``BadInput`` when the output ``out`` is one of ``inputs`` (``{"--span": path}``, or ``(name, path)`` pairs;
    ``None`` and ``hf://`` paths are skipped), however spelled: a command never writes over what it reads,
    ``--overwrite`` or not."""
    for name, path in inputs.items() if isinstance(inputs, dict) else inputs:
        if path is not None and not str(path).startswith("hf://") and same_path(out, path):
            raise BadInput(f"{flag} {out}: the same place as {name} {path}; a command never writes over what it reads")


def check_output_folder(out: str | os.PathLike, is_own: Callable[[str], bool], *, what: str) -> Path:
    """``out`` when it is absent, holds no file, or only files ``is_own`` accepts; else ``BadInput``.

    ``is_own`` gets each file's path relative to ``out`` (``sub/name.ext``) and says whether the
    command wrote it (an earlier output, which it may replace). ``what`` names that output in the
    message ("arith-v1 build"). The refusal names the first few foreign files. ``out`` must be a place that
    can be written (``check_writable``).
    """
    out = check_writable(out)
    if not out.is_dir():
        return out
    foreign = [rel for rel in folder_files(out) if not is_own(rel)]
    if foreign:
        shown = ", ".join(foreign[:SHOWN]) + (f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else "")
        raise BadInput(f"{out}: folder holds other files ({shown}); choose an empty folder or an earlier {what}")
    return out


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; the output is an ordinary file
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def replace_dir(new: str | os.PathLike, target: str | os.PathLike) -> None:
    """Move the finished folder ``new`` onto ``target``, replacing an earlier one.

    The earlier folder is renamed aside first and removed only once ``new`` is in place, so an
    interruption leaves either the old or the new output, never a mixture.
    """
    new, target = Path(new), Path(target)
    if not target.exists():
        os.replace(new, target)
        return
    aside = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.replace(target, aside)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def staging_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty folder beside ``target``; on success it replaces ``target`` (see ``replace_dir``)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; the output is an ordinary folder
    try:
        yield tmp
        replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
