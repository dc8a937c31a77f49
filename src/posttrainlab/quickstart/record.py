"""What a run folder knows about how it was made: ``OUT/stages.json``, and the check made before anything runs.

``stages.json`` holds, per stage, the resolved settings it ran with (``plan.Stage.settings``, run-folder paths
written ``OUT/…``), the hashes of the stages it read (``after``), a hash of both, its status (``started`` when it
began, ``done`` when its marker was written) and, for stages that make models, the SHA-256 of their weights.

``check_run_folder`` runs before the quickstart writes a byte (docs/faults.md "Quickstart run folders"):

- a non-empty ``--out`` that holds no ``stages.json`` was not made by this quickstart: refused, unchanged;
- a planned stage recorded with other settings, or made after another version of a stage it reads, is refused,
  naming the stage and each setting ``key: old -> new`` (a finished run is never taken over by another preset);
- a planned stage's folder that exists without a record of that stage (a file of the user's, or a folder from
  somewhere else) is refused, naming it;
- ``OUT/base`` that is not the link the quickstart makes is refused.

A stage recorded with the same hash is carried on (training resumes from its last checkpoint) while it is
``started``. A ``done`` stage is reused only when what it made is still what it made (``stale``): its marker and
its weights exist with the SHA-256 recorded when it finished. A missing or changed artefact is named; that stage
and every stage that reads it (``after``, transitively) run again, their folders first moved to
``OUT/.stale/<stage>-<time>/`` (nothing is deleted), or, with ``--no-rerun``, the run is refused.

A ``started`` stage recorded with other settings whose folder holds nothing (its stage refused its input before
writing a byte) is not held against the next run: the corrected command carries on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.quickstart.plan import Stage
from posttrainlab.run_layout import RunLayout

#: differences named in a refusal; the rest are counted
SHOWN = 4


def _plain(value: Any, root: str) -> Any:
    """``value`` as JSON data, with every path inside the run folder written ``OUT/…``."""
    if is_dataclass(value):
        value = asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v, root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, root) for v in value]
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str) and (value == root or value.startswith(root + "/")):
        return "OUT" + value[len(root) :]
    return value


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: value}


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class StageRecords:
    """``OUT/stages.json``: read at start, checked against the plan, updated as stages start and finish."""

    def __init__(self, layout: RunLayout):
        self.layout = layout
        self.path = layout.stages_json
        self.records: dict[str, dict] = self._read()
        self.hashes: dict[str, str] = {}  # this run's hash of each planned stage

    def _read(self) -> dict[str, dict]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise BadInput(f"{self.path}: unreadable ({e}); it records how this run folder was made") from None
        stages = data.get("stages") if isinstance(data, dict) else None
        if not isinstance(stages, dict):
            raise BadInput(f"{self.path}: no 'stages' object; it records how this run folder was made")
        return stages

    def entry(self, stage: Stage) -> dict[str, Any]:
        """The record ``stage`` would get now: its settings, the hashes of what it reads, and their hash."""
        settings = _plain(stage.settings, str(self.layout.root))
        after = {name: self.hashes.get(name) for name in stage.after}
        return {"settings": settings, "after": after, "hash": _digest([settings, after])}

    def check(self, stages: list[Stage]) -> None:
        """``BadInput`` for the first planned stage this run folder cannot carry on with (module docstring)."""
        from posttrainlab.data.atomic import check_writable

        root = check_writable(self.layout.root)  # a file in its path, a place nothing can be written: refused
        if root.is_dir() and not self.path.is_file() and any(root.iterdir()):
            shown = sorted(p.name for p in root.iterdir())
            more = f" and {len(shown) - SHOWN} more" if len(shown) > SHOWN else ""
            raise BadInput(
                f"{root}: not a quickstart run folder of this version (no {self.path.name}; holds "
                f"{', '.join(shown[:SHOWN])}{more}); choose a new or empty --out"
            )
        base = self.layout.base
        if base.exists() and not base.is_symlink():
            raise BadInput(f"{base}: not the link the quickstart makes to its base model; move it away")
        for stage in stages:
            entry = self.entry(stage)
            self.hashes[stage.name] = entry["hash"]
            if stage.rebuilt:
                continue
            old = self.records.get(stage.name)
            if old is not None and old.get("status") != "done" and old.get("hash") != entry["hash"]:
                if stage.folder is not None and not (stage.folder.is_dir() and any(stage.folder.iterdir())):
                    old = None  # started with other settings, wrote nothing: the corrected command carries on
                    del self.records[stage.name]
            if old is None:
                if stage.folder is not None and stage.folder.exists():
                    raise BadInput(
                        f"{stage.folder}: exists, but this run folder has no record of stage {stage.name} "
                        f"writing it; move it away or choose another --out"
                    )
                continue
            if old.get("hash") != entry["hash"]:
                raise BadInput(f"stage {stage.name}: {root} was made with other settings ({_differences(old, entry)}); "
                               f"use another --out, or the settings it was made with")  # fmt: skip

    def stale(self, stages: list[Stage]) -> dict[str, str]:
        """``{stage: why}`` for every planned stage recorded ``done`` whose outputs are no longer what it made (a
        marker or weights file missing or changed since), and every stage that reads one of them; in plan order."""
        why: dict[str, str] = {}
        for stage in stages:
            record = self.records.get(stage.name)
            if record is None or record.get("status") != "done" or stage.folder is None:
                continue
            reason = self._changed(stage, record)
            if reason is None:
                upstream = [name for name in stage.after if name in why]
                reason = f"it reads {upstream[0]}, which runs again" if upstream else None
            if reason is not None:
                why[stage.name] = reason
        return why

    def _changed(self, stage: Stage, record: dict) -> str | None:
        from posttrainlab.data.manifest import sha256_file

        files = dict(record.get("weights") or {})
        if stage.marker is not None:
            if not stage.marker.is_file():
                return f"{stage.marker} is missing"
            if record.get("marker"):
                files[self.layout.relative(stage.marker)] = record["marker"]
        for name, sha in sorted(files.items()):
            path = self.layout.absolute(name)
            if not path.is_file():
                return f"{path} is missing"
            if sha256_file(path) != sha:
                return f"{path} changed since the stage made it (SHA-256 {sha[:12]}…)"
        return None

    def forget(self, stage: Stage, now: str) -> Path | None:
        """Make ``stage`` run again: its folder moved to ``OUT/.stale/<stage>-<now>/`` (returned), its record
        dropped."""
        moved = None
        if stage.folder is not None and stage.folder.exists():
            moved = self.layout.root / ".stale" / f"{stage.name}-{now}"
            moved.parent.mkdir(parents=True, exist_ok=True)
            stage.folder.rename(moved)
        self.records.pop(stage.name, None)
        self.save()
        return moved

    def started(self, stage: Stage) -> None:
        self.records[stage.name] = {**self.entry(stage), "status": "started"}
        self.save()

    def finished(self, stage: Stage) -> dict[str, str]:
        """Mark ``stage`` done; return the SHA-256 of each model file it made (``models``), hashed once."""
        record = self.records.get(stage.name)
        if record is not None and record.get("status") == "done" and record.get("hash") == self.hashes[stage.name]:
            return record.get("weights", {})
        from posttrainlab.data.manifest import sha256_file

        weights = {}
        for folder in stage.models:
            weights.update(model_hashes(folder, self.layout))
        record = {**self.entry(stage), "status": "done", "weights": weights}
        if stage.marker is not None and stage.marker.is_file():  # what says it is done, checked before reuse
            record["marker"] = sha256_file(stage.marker)
        self.records[stage.name] = record
        self.save()
        return weights

    def save(self) -> None:
        from posttrainlab.data.jsonl import write_json

        write_json(self.path, {"stages": self.records}, sort_keys=True)


def _differences(old: dict, new: dict) -> str:
    a, b = _flat({"": old.get("settings")}), _flat({"": new.get("settings")})
    diffs = [f"{k.lstrip('.') or 'settings'}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b))
             if a.get(k) != b.get(k)]  # fmt: skip
    after_old, after_new = old.get("after") or {}, new.get("after") or {}
    diffs += [f"made after another {name}" for name in new.get("after", {}) if after_old.get(name) != after_new[name]]
    diffs = diffs or ["a stage it reads changed"]
    more = f" and {len(diffs) - SHOWN} more" if len(diffs) > SHOWN else ""
    return "; ".join(diffs[:SHOWN]) + more


def model_hashes(folder: Path, layout: RunLayout) -> dict[str, str]:
    """The SHA-256 of each weights file (``*.safetensors``, ``pytorch_model*.bin``) in ``folder``, by ``OUT/…`` path
    (``training_args.bin`` and the other files a trainer saves are not weights)."""
    from posttrainlab.data.manifest import sha256_file

    folder = Path(folder)
    weights = ("*.safetensors", "pytorch_model*.bin")
    files = sorted(p for pattern in weights for p in folder.glob(pattern) if p.is_file())
    return {layout.relative(p): sha256_file(p) for p in files}  # OUT/… inside the run folder, else the full path
