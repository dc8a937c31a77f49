"""Write an arith-v1 release to disk, or check that a rebuild is byte-identical (``--check``).

Writing goes through a staging folder beside the target that replaces it only once every file is
written, so a failed build leaves an earlier good output untouched. A target folder that holds
anything other than an earlier arith-v1 build is refused rather than overwritten.

The golden manifests in ``golden/<version>.json`` are the committed record of every release's
hashes (no data). ``check`` rebuilds in memory, compares with the golden manifest and with the build
in ``out`` when there is one, and writes nothing.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from posttrainlab.data.arith.generator import DATASET, LATEST, Build, build, check_version
from posttrainlab.data.atomic import check_output_folder, staging_dir
from posttrainlab.data.manifest import MANIFEST, has_manifest, sha256_file


def golden_manifest(version: str) -> dict[str, Any]:
    """The committed manifest of a release."""
    text = resources.files("posttrainlab.data.arith").joinpath("golden", f"{check_version(version)}.json")
    return json.loads(text.read_text(encoding="utf-8"))


def _build_files(folder: Path) -> set[str]:
    """The files of the arith-v1 build in ``folder`` (its manifest's, the manifest, the card); none if not one."""
    if not has_manifest(folder):
        return set()
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return set()
    if not isinstance(manifest, dict) or manifest.get("dataset") != DATASET:
        return set()
    return set(manifest.get("files", {})) | {MANIFEST, "README.md"}


def _check_target(out: Path) -> None:
    check_output_folder(out, _build_files(out).__contains__, what="arith-v1 build")


def write(result: Build, out: str | Path) -> Path:
    """Write a built release into ``out`` atomically (see the module docstring)."""
    out = Path(out)
    _check_target(out)
    with staging_dir(out) as tmp:
        for rel, data in result.files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return out


def prepare(out: str | Path, version: str = LATEST) -> Build:
    """Build a release and write it to ``out``; return the build (records and manifest)."""
    _check_target(Path(out))  # fail before spending the build time
    result = build(version)
    write(result, out)
    return result


def check(version: str = LATEST, out: str | Path | None = None) -> list[str]:
    """Rebuild in memory and list every difference from the golden manifest and from ``out``.

    Empty list: the rebuild is byte-identical to the golden manifest (and to ``out``'s files when
    ``out`` holds a build of the same release). Nothing is written.
    """
    result = build(version)
    problems: list[str] = []
    golden = golden_manifest(version)
    rebuilt = result.manifest
    for rel in sorted(set(golden["files"]) | set(rebuilt["files"])):
        g, r = golden["files"].get(rel), rebuilt["files"].get(rel)
        if g != r:
            problems.append(f"{rel}: golden {g} != rebuilt {r}")
    if not problems and golden != rebuilt:
        keys = sorted(k for k in set(golden) | set(rebuilt) if golden.get(k) != rebuilt.get(k))
        problems.append(f"manifest.json: fields differ from the golden manifest: {', '.join(keys)}")
    if out is not None and has_manifest(out):
        out = Path(out)
        for rel, entry in rebuilt["files"].items():
            path = out / rel
            if not path.is_file():
                problems.append(f"{path}: missing from the build in {out}")
            elif (found := sha256_file(path)) != entry["sha256"]:
                problems.append(f"{path}: sha256 {found} != rebuilt {entry['sha256']}")
        for rel in (MANIFEST, "README.md"):
            path = out / rel
            if path.is_file() and path.read_bytes() != result.files[rel]:
                problems.append(f"{path}: differs from the rebuilt {rel}")
    return problems
