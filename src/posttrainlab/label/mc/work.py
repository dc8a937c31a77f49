"""The resumable work folder ``OUT/work``: the labelling settings, and one JSON Lines file per shard.

``--shard I/K`` takes the problems whose id hashes to I mod K. Each finished problem is appended as one
JSON line to ``OUT/work/shard-I-of-K.jsonl`` (fsynced, ``data.jsonl.append_jsonl``); a new run skips
problems found in any work file, drops a torn last line of its own (``data.runfile.read_run_file``, the
one reader of run files), and refuses a work folder made with other labelling settings
(``OUT/work/config.json``). Written by hand: which settings make a folder's identity is ours.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation.shared_prefix import derive_seed

WORK = "work"


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"I/K"`` -> ``(I, K)`` with 0 <= I < K; None -> ``(0, 1)``.

    >>> parse_shard("1/4"), parse_shard(None)
    ((1, 4), (0, 1))
    """
    if text is None:
        return 0, 1
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise BadInput(f"--shard {text!r}: expected I/K, e.g. 0/4") from None
    if not 0 <= i < k:
        raise BadInput(f"--shard {text!r}: need 0 <= I < K")
    return i, k


def in_shard(problem_id: str, shard: tuple[int, int]) -> bool:
    return derive_seed("shard", problem_id) % shard[1] == shard[0]


class WorkDir:
    """``OUT/work``: the labelling config and one JSON Lines file of finished problems per shard."""

    def __init__(self, out: Path, shard: tuple[int, int]):
        self.dir = Path(out) / WORK
        self.shard = shard
        self.file = self.dir / f"shard-{shard[0]}-of-{shard[1]}.jsonl"

    def check_config(self, config: dict[str, Any]) -> None:
        """Write the config on the first run; refuse a different one later (the labels would mix)."""
        from posttrainlab.data.jsonl import write_json

        path = self.dir / "config.json"
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise BadInput(f"{path}: not valid JSON; remove the work folder or use a new --out") from None
            changed = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
            if changed:
                diff = ", ".join(f"{k}: {old.get(k)!r} -> {config.get(k)!r}" for k in changed)
                raise BadInput(f"{path}: this work folder was labelled with other settings ({diff}); use a new --out")
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(path, config, ensure_ascii=False)

    def finished(self, *, repair: bool = True) -> dict[str, dict[str, Any]]:
        """Every finished problem in any shard's work file, by id (the first record of an id wins).

        With ``repair`` this shard's own file loses a torn last line; other shards' files are only read.
        """
        from posttrainlab.data.runfile import read_run_file

        done: dict[str, dict[str, Any]] = {}
        if not self.dir.is_dir():
            return done
        for path in sorted(self.dir.glob("shard-*.jsonl")):
            records, _notes = read_run_file(path, repair=repair and path == self.file)
            for record in records:
                done.setdefault(record["id"], record)
        return done

    def append(self, record: dict[str, Any]) -> None:
        from posttrainlab.data.jsonl import append_jsonl

        self.dir.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.file, record)


def read_work(out: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The config and every finished record of a labelling run's work folder (for ``mc-agreement``)."""
    work = WorkDir(Path(out), (0, 1))
    path = work.dir / "config.json"
    if not path.is_file():
        raise BadInput(f"{out}: no {WORK}/config.json; is this a `posttrain label mc` output folder?")
    config = json.loads(path.read_text(encoding="utf-8"))
    return config, list(work.finished(repair=False).values())


__all__ = ["WORK", "WorkDir", "in_shard", "parse_shard", "read_work"]
