"""One writer per output folder: an exclusive lock a command holds on the folder it writes, for its lifetime.

Two ``posttrain quickstart --out qs`` started together both ran every stage, and one died when the other deleted a
file it was writing (issue #42). ``writer_lock(folder)`` makes the second one stop at once with one line naming the
first's PID and command.

How: ``fcntl.flock`` on a lock file kept outside the folder, ``$POSTTRAIN_CACHE/locks/<sha256 of the folder's
resolved path>.lock``. Written by hand rather than with the ``filelock`` package because flock alone gives the three
properties needed: the kernel drops the lock when its process ends however it ends (``kill -9`` included), so a lock
whose process is gone is simply taken over, with no stale-file rules; the folder holds nothing of the lock, so a run
refused by its checks leaves the folder exactly as it was and readers (``posttrain report``, ``eval compare``) need
no lock; and the file records who holds it (PID, command line, since when) for the refusal. POSIX only: elsewhere
(no ``fcntl``) the lock is not taken. In a multi-process launch (``accelerate launch``, ``torchrun``: ``RANK`` set)
the process of rank 0 holds it for all of them; the other ranks write through it.

Re-entrant within one process: a ``writer_lock`` of a folder this process already holds (a verb calling a library
function that locks the same folder) is a no-op, counted in ``_HELD``; the lock is released at the outermost exit.
Two ``flock`` calls on separate ``open``s of one file conflict even in one process, so without the count a process
would refuse itself.

Who holds it: ``posttrain quickstart`` and ``study`` (the run folder, ``quickstart.run``), ``posttrain train`` (the
recipe's ``output_dir``), and every verb that writes an ``--out`` folder (``cli.options.lock_out``: the ``eval``
verbs, ``data prepare``/``arith-prm``/``sharp-build``, ``generate``, ``annotate``, ``label mc``, ``model
init``/``pretrain``/``import``), taken after the verb's own checks and before anything is written or loaded.
``label mc --shard I/K`` locks its shard's work file instead, so the K shards of one folder may run in parallel.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from posttrainlab.errors import BadInput
from posttrainlab.paths import cache_dir

#: lock file -> how many ``writer_lock`` blocks of this process hold it (re-entrancy, module docstring)
_HELD: dict[Path, int] = {}


def lock_path(folder: str | os.PathLike) -> Path:
    """The lock file of ``folder`` (module docstring): one per resolved path, whatever the spelling."""
    key = hashlib.sha256(str(Path(folder).resolve()).encode()).hexdigest()[:32]
    return cache_dir() / "locks" / f"{key}.lock"


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says (``PID 123: posttrain quickstart ...``)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536).decode("utf-8"))
        return f"PID {data['pid']} since {data['since']}: {' '.join(data['argv'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def writer_lock(folder: str | os.PathLike, what: str = "run folder") -> Iterator[None]:
    """Hold the exclusive writer lock of ``folder`` while the block runs; ``BadInput`` at once when another process
    holds it, naming that process."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock (module docstring)
        yield
        return
    if os.environ.get("RANK", "0") != "0":  # another rank of one launch: rank 0 holds the lock for the job
        yield
        return
    path = lock_path(folder)
    if _HELD.get(path):  # this process holds it already: re-entrant (module docstring)
        _HELD[path] += 1
        try:
            yield
        finally:
            _HELD[path] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(f"{folder}: another posttrain is writing this {what} ({_holder(fd)}); wait for it to "
                           f"finish, or choose another --out") from None  # fmt: skip
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        record = {"pid": os.getpid(), "argv": ["posttrain", *sys.argv[1:]], "since": since, "folder": str(folder)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record, allow_nan=False).encode("utf-8"), 0)  # strict JSON, no data.jsonl below
        _HELD[path] = 1
        try:
            yield
        finally:
            del _HELD[path]
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
