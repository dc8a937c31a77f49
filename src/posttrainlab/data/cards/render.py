"""The parts every dataset card of the lab shares: the YAML front matter, the files table, the provenance.

The front matter is the Hub's dataset-card form, the form of the seeds' cards: ``configs`` (each with
``data_files``, one entry per split, its exact path) and ``dataset_info`` (each config's ``features``
and its splits' ``num_examples``). ``datasets.load_dataset(folder, config, split=...)`` reads the
configs, and refuses a split whose row count differs from ``num_examples`` (``NonMatchingSplitsSizesError``),
so a card that states a wrong count cannot be loaded. ``num_bytes`` is the size of the split's file on
disk (the Hub recomputes its own); ``datasets`` requires the key but does not check it.

The body ends with two sections a program reads back:

- **Provenance**: a table for the reader, then the same record as a JSON block, which
  ``posttrain data card DIR`` keeps when it rewrites the card (``parse_provenance``);
- **Files**: one row per file, ``| `path` | rows | bytes | sha256 |``; ``posttrain data verify DIR``
  re-hashes every file against it (``parse_files_table``).

Written by hand: the layout is the seeds' and the lab's own; ``yaml.safe_dump`` writes the YAML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from posttrainlab.data.cards.features import Type, features_yaml
from posttrainlab.data.jsonl import strict_json

CARD = "README.md"
FILES_HEADING = "## Files"
PROVENANCE_HEADING = "## Provenance"
#: how the Provenance table names each key of the record
PROVENANCE_LABELS = {
    "kind": "dataset kind",
    "policy": "policy (model sampled)",
    "policy_sha256": "policy SHA-256 (weights, config, tokenizer)",
    "sampling": "sampling settings",
    "grader": "grader",
    "judge": "judge",
    "seeds": "seeds",
    "data": "source data",
    "command": "command line",
    "lab_version": "posttrainlab version",
    "commit": "posttrainlab commit",
}
#: the Hub's size buckets (``datasets``' ``size_categories.json``), by upper bound
SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
)


@dataclass(frozen=True)
class SplitInfo:
    """One split of a config: its name, its file (relative to the folder), rows and bytes."""

    name: str
    path: str
    rows: int
    num_bytes: int


@dataclass(frozen=True)
class ConfigInfo:
    """One config: its splits and the types of its columns (one schema for all its splits)."""

    name: str
    splits: tuple[SplitInfo, ...]
    columns: dict[str, Type] = field(default_factory=dict)
    default: bool = False


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` bucket of a row count.

    >>> size_category(999), size_category(1000), size_category(126_987)
    ('n<1K', '1K<n<10K', '100K<n<1M')
    """
    for bound, name in SIZE_CATEGORIES:
        if rows < bound:
            return name
    return "n>1T" if rows > 10**12 else "100M<n<1B"


def front_matter(meta: dict[str, Any], configs: Iterable[ConfigInfo], *, dataset_info: bool = True) -> str:
    """``---`` YAML ``---``: ``meta`` (license, language, pretty_name, tags…), then ``configs`` and ``dataset_info``.

    >>> print(front_matter({"pretty_name": "x"}, [ConfigInfo("default", (SplitInfo("train", "train.jsonl", 2, 9),),
    ...       {"q": ("value", "string")})]), end="")
    ---
    pretty_name: x
    configs:
    - config_name: default
      data_files:
      - split: train
        path: train.jsonl
    dataset_info:
    - config_name: default
      features:
      - name: q
        dtype: string
      splits:
      - name: train
        num_bytes: 9
        num_examples: 2
      download_size: 9
      dataset_size: 9
    ---
    """
    import yaml

    configs = list(configs)
    header: dict[str, Any] = dict(meta)
    header["configs"] = []
    for c in configs:
        entry: dict[str, Any] = {"config_name": c.name}
        if c.default:
            entry["default"] = True
        entry["data_files"] = [{"split": s.name, "path": s.path} for s in c.splits]
        header["configs"].append(entry)
    if dataset_info:
        header["dataset_info"] = [
            {
                "config_name": c.name,
                "features": features_yaml(c.columns),
                "splits": [{"name": s.name, "num_bytes": s.num_bytes, "num_examples": s.rows} for s in c.splits],
                "download_size": sum(s.num_bytes for s in c.splits),
                "dataset_size": sum(s.num_bytes for s in c.splits),
            }
            for c in configs
        ]
    text = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1000)
    return f"---\n{text}---\n"


def fmt_int(n: int) -> str:
    """A count with thousands separators, as the seeds write them (``7,559``)."""
    return f"{n:,}"


def table(head: Iterable[str], rows: Iterable[Iterable[Any]], *, right: Iterable[int] = ()) -> str:
    """A Markdown table; the columns numbered in ``right`` are right-aligned.

    >>> print(table(["a", "b"], [[1, 2]], right=[1]))
    | a | b |
    |---|---:|
    | 1 | 2 |
    """
    head = list(head)
    right = set(right)
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|",
    ]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def files_table(entries: dict[str, dict[str, Any]]) -> str:
    """The Files section: ``{path: {"sha256", "rows" (or None), "bytes"}}`` as one table row each."""
    rows = [
        [
            f"`{rel}`",
            "-" if e.get("rows") is None else e["rows"],
            "-" if e.get("bytes") is None else e["bytes"],
            e["sha256"],
        ]
        for rel, e in entries.items()
    ]
    return f"{FILES_HEADING}\n\n" + table(["file", "rows", "bytes", "SHA-256"], rows, right=[1, 2]) + "\n"


_FILE_ROW = re.compile(r"^\| `(?P<rel>[^`]+)` \| [^|]* \| [^|]* \| (?P<sha>[0-9a-f]{64}) \|$")


def section(text: str, heading: str) -> str | None:
    """The body of the ``## heading`` section of a Markdown text, up to the next ``## `` heading."""
    lines = text.splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        return None
    body = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        body.append(line)
    return "\n".join(body)


def parse_files_table(text: str) -> dict[str, str]:
    """``{path: sha256}`` from a card's Files section (empty when it has none).

    >>> head = "## Files\\n\\n| file | rows | bytes | SHA-256 |\\n|---|---:|---:|---|\\n"
    >>> parse_files_table(head + "| `a.jsonl` | 2 | 9 | " + "0" * 64 + " |\\n")
    {'a.jsonl': '0000000000000000000000000000000000000000000000000000000000000000'}
    """
    body = section(text, FILES_HEADING)
    if body is None:
        return {}
    return {m["rel"]: m["sha"] for line in body.splitlines() if (m := _FILE_ROW.match(line.strip()))}


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return "`" + strict_json(value, ensure_ascii=False).replace("|", "\\|") + "`"
    return str(value).replace("|", "\\|").replace("\n", " ")


def provenance_section(record: dict[str, Any], labels: dict[str, str]) -> str:
    """The Provenance section: one table row per key of ``record`` (``labels`` names them), then the JSON."""
    rows = [[labels.get(key, key), _cell(value)] for key, value in record.items()]
    block = strict_json(record, indent=2, ensure_ascii=False)  # a card is strict JSON too (data.jsonl)
    return (
        f"{PROVENANCE_HEADING}\n\n"
        + table(["field", "value"], rows)
        + "\n\nThe same record, as `posttrain data card` reads it back:\n\n```json\n"
        + block
        + "\n```\n"
    )


def parse_provenance(text: str) -> dict[str, Any] | None:
    """The JSON record of a card's Provenance section; ``None`` when there is none or it does not parse."""
    body = section(text, PROVENANCE_HEADING)
    if body is None:
        return None
    match = re.search(r"```json\n(.*?)\n```", body, re.S)
    if match is None:
        return None
    try:
        record = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def loading_snippet(path_hint: str, configs: Iterable[ConfigInfo]) -> str:
    """The Loading section: ``load_dataset`` on every config, with its first split."""
    lines = ["## Loading", "", "```python", "from datasets import load_dataset", ""]
    for c in configs:
        var = re.sub(r"\W", "_", c.name).strip("_") or "ds"
        lines.append(f'{var} = load_dataset("{path_hint}", "{c.name}", split="{c.splits[0].name}")')
    lines += ["```", ""]
    return "\n".join(lines)


__all__ = [
    "CARD",
    "PROVENANCE_LABELS",
    "ConfigInfo",
    "SplitInfo",
    "files_table",
    "fmt_int",
    "front_matter",
    "loading_snippet",
    "parse_files_table",
    "parse_provenance",
    "provenance_section",
    "section",
    "size_category",
    "table",
]
