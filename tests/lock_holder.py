"""A folder's writer lock (``posttrainlab.writer_lock``) held or tried from ANOTHER process (importable from any test
folder): ``writer_lock`` is re-entrant within one process, so only another process shows what a second writer sees.
The subprocess inherits ``os.environ``, ``POSTTRAIN_CACHE`` (where the lock files live) included."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_HOLD = """
import sys, time
from posttrainlab.writer_lock import writer_lock
with writer_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""

_TRY = """
import sys
from posttrainlab.errors import BadInput
from posttrainlab.writer_lock import writer_lock
try:
    with writer_lock(sys.argv[1]):
        print("taken")
except BadInput:
    print("refused")
"""


@contextmanager
def held_elsewhere(folder: str | Path) -> Iterator[subprocess.Popen]:
    """Another process holds ``folder``'s lock inside the block (it has it when the block starts); it is killed
    (``kill -9``) at the end, unless the block killed it already."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def free_elsewhere(folder: str | Path) -> bool:
    """Whether another process could take ``folder``'s lock now (it lets it go at once)."""
    out = subprocess.run([sys.executable, "-c", _TRY, str(folder)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() in ("taken", "refused"), out.stderr
    return out.stdout.strip() == "taken"
