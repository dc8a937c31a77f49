"""Assemble, write and verify a dataset card from a ``CardSpec``: what one kind of folder says about itself.

A kind (``data.cards.kinds``) fills a ``CardSpec``: the configs and the file of each split, the sections of
its seed card (label counts, value distribution, columns…) and the provenance. ``assemble`` then reads
every split file once (``features.scan_file``: rows, column types, bytes, SHA-256) and writes the card:

    front matter (configs, dataset_info)  # title  summary  ## Configs and splits  ## Loading
    the kind's sections  ## Provenance  ## Files

Every number the card states about a file comes from that pass over the file, never from a writer's
summary, so the card always equals a recount. A split whose file holds no row is left out of the
configs (``datasets`` cannot build an empty split from an empty file) and named under the splits table;
a config left with no split is left out whole.

``card_provenance`` completes what a writer knows (policy, sampling, grader or judge, seeds, data) with
what every card records: the policy's SHA-256 (``model_sha256``), the command line and the lab's version
and commit (``posttrainlab.provenance``). Written by hand: the layout is the seeds'.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from posttrainlab.data.cards.features import FileScan, merge, scan_file
from posttrainlab.data.cards.render import (
    CARD,
    PROVENANCE_LABELS,
    ConfigInfo,
    SplitInfo,
    files_table,
    fmt_int,
    front_matter,
    loading_snippet,
    parse_files_table,
    provenance_section,
    size_category,
    table,
)
from posttrainlab.data.manifest import FileProblem, inside, sha256_file
from posttrainlab.errors import BadInput

#: the files of a model folder whose bytes make its SHA-256 (weights, config, tokenizer)
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)


@dataclass
class CardSpec:
    """What one folder's card says; ``configs`` maps a config to ``{split: file}``, the first is the default."""

    kind: str
    title: str
    summary: str
    configs: dict[str, dict[str, str]]
    sections: list[str] = field(default_factory=list)
    side_files: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    path_hint: str = "path/to/this/folder"


class EmptyDataset(BadInput):
    """No split of the folder holds a row: a card would describe nothing (the Hub wants at least one split)."""


def model_sha256(model: str | os.PathLike | None) -> str | None:
    """SHA-256 of a local model folder's weights, config and tokenizer; ``None`` for a Hub id or served name.

    It hashes the lines ``<name> <sha256 of the file>`` of every ``*.safetensors`` / ``*.bin`` file and of
    ``MODEL_FILES``, sorted by name, so it names the weights and tokenizer, not the folder's logs.
    ``training_args.bin`` (transformers' pickled ``TrainingArguments``, which hold ``output_dir``) is not weights:
    it is left out, so the same weights in another folder hash the same.
    """
    if model is None:
        return None
    folder = Path(model)
    if not folder.is_dir():
        return None
    names = sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file()
        and (p.suffix in (".safetensors", ".bin") or p.name in MODEL_FILES)
        and p.name != "training_args.bin"
    )
    if not names:
        return None
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"{name} {sha256_file(folder / name)}\n".encode())
    return digest.hexdigest()


def card_provenance(kind: str, **known: Any) -> dict[str, Any]:
    """The provenance record of a card: ``known`` (policy, sampling, grader, judge, seeds, data…) and the rest.

    Keys whose value is ``None`` are kept, so a card says a thing was not recorded rather than leave it out.
    No time or host: a run resumed after a kill writes the same card as one that never stopped.
    """
    from posttrainlab.provenance import provenance

    run = provenance()
    record: dict[str, Any] = {"kind": kind}
    if "policy" in known:
        policy, sha = known.pop("policy"), known.pop("policy_sha256", None)
        record["policy"] = None if policy is None else str(policy)
        record["policy_sha256"] = sha or model_sha256(policy)
    record.update(known)
    record["command"] = run["argv"]
    record["lab_version"] = run["versions"].get("posttrainlab")
    record["commit"] = run["commit"] if not run["dirty"] else f"{run['commit']} (with uncommitted changes)"
    return record


def _scan_configs(folder: Path, spec: CardSpec, scans: dict[str, FileScan]) -> tuple[list[ConfigInfo], list[str]]:
    """The non-empty configs with their splits scanned, and the ``config/split`` names left out as empty."""
    configs, empty = [], []
    for index, (name, splits) in enumerate(spec.configs.items()):
        infos, columns = [], {}
        for split, rel in splits.items():
            path = folder / rel
            if not path.is_file():
                raise BadInput(f"{path}: missing (the {spec.kind} card lists it as {name}/{split})")
            scan = scans.setdefault(rel, scan_file(path))
            if scan.rows == 0:
                empty.append(f"{name}/{split}")
                continue
            infos.append(SplitInfo(split, rel, scan.rows, scan.num_bytes))
            for col, t in scan.columns.items():
                try:
                    columns[col] = merge(columns[col], t) if col in columns else t
                except ValueError as e:
                    raise BadInput(f"{path}: column {col!r} differs from the other splits of {name}: {e}") from None
        if infos:
            configs.append(ConfigInfo(name, tuple(infos), columns, default=index == 0))
    return configs, empty


def _splits_section(configs: list[ConfigInfo], empty: list[str]) -> str:
    rows = [[f"`{c.name}`", s.name, fmt_int(s.rows), f"`{s.path}`"] for c in configs for s in c.splits]
    text = "## Configs and splits\n\n" + table(["config", "split", "rows", "file"], rows, right=[2]) + "\n"
    if empty:
        text += f"\nLeft out, for holding no row: {', '.join(f'`{e}`' for e in empty)}.\n"
    return text


def assemble(folder: str | os.PathLike, spec: CardSpec) -> str:
    """The card (``README.md`` text) of ``folder`` (module docstring); ``BadInput`` when a listed file is missing."""
    folder = Path(folder)
    scans: dict[str, FileScan] = {}
    configs, empty = _scan_configs(folder, spec, scans)
    if not configs:
        raise EmptyDataset(f"{folder}: no split of the {spec.kind} dataset holds a row; nothing to describe")
    largest = max(sum(s.rows for s in c.splits) for c in configs)
    meta = {
        "license": spec.meta.get("license", "other"),
        "language": spec.meta.get("language", ["en"]),
        "pretty_name": spec.title,
        "tags": ["posttrainlab", *spec.meta.get("tags", [])],
        "task_categories": spec.meta.get("task_categories", ["text-classification"]),
        "size_categories": [size_category(largest)],
    }
    entries: dict[str, dict[str, Any]] = {}
    for rel in [*scans, *spec.side_files]:
        path = folder / rel
        if rel in entries:
            continue
        if not path.is_file():
            raise BadInput(f"{path}: missing (the {spec.kind} card lists it)")
        scan = scans.get(rel) or (scan_file(path) if path.suffix in (".jsonl", ".parquet") else None)
        entries[rel] = {
            "rows": scan.rows if scan else None,
            "bytes": path.stat().st_size,
            "sha256": scan.sha256 if scan else sha256_file(path),
        }
    parts = [
        front_matter(meta, configs),
        f"\n# {spec.title}\n\n{spec.summary.strip()}\n",
        _splits_section(configs, empty),
        loading_snippet(spec.path_hint, configs),
        *(s.strip() + "\n" for s in spec.sections),
        provenance_section(spec.provenance, PROVENANCE_LABELS),
        files_table(entries),
    ]
    return "\n".join(parts)


def write_card(folder: str | os.PathLike, spec: CardSpec) -> Path:
    """Assemble and write ``folder/README.md`` atomically; its path."""
    from posttrainlab.data.atomic import write_text

    path = Path(folder) / CARD
    write_text(path, assemble(folder, spec))
    return path


def verify_card(folder: str | os.PathLike) -> tuple[int, list[FileProblem]] | None:
    """``(files listed, problems)`` from re-hashing every file of the card's Files table; ``None`` without one."""
    folder = Path(folder)
    path = folder / CARD
    if not path.is_file():
        return None
    listed = parse_files_table(path.read_text(encoding="utf-8"))
    if not listed:
        return None
    problems = []
    for rel, sha in listed.items():
        file = folder / rel
        if not inside(rel):  # never hash a file outside the folder (data.manifest.inside)
            problems.append(FileProblem(file, f"listed in {CARD} but outside {folder} (absolute or '..'); refused"))
        elif not file.is_file():
            problems.append(FileProblem(file, f"listed in {CARD} but missing"))
        elif (found := sha256_file(file)) != sha:
            problems.append(FileProblem(file, f"checksum mismatch: {CARD} says sha256 {sha}, found {found}"))
    return len(listed), problems


__all__ = ["CardSpec", "EmptyDataset", "assemble", "card_provenance", "model_sha256", "verify_card", "write_card"]
