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
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
