"""The ``features`` of a data file in the Hub's ``dataset_info`` form, read from its rows, and one pass over a file.

A dataset card's ``dataset_info`` names every column with its type, in the YAML form ``datasets`` writes
(``datasets.Features._to_yaml_list``)::

    - name: question          - name: steps           - name: messages
      dtype: string             list: string            list:
                                                        - name: role
                                                          dtype: string

The type of a column is read from the values themselves (JSON Lines or Parquet rows, the lab's writers
write both): ``str`` -> ``string``, ``bool`` -> ``bool``, ``int`` -> ``int64``, ``float`` -> ``float64``,
``None`` -> ``null``, a list -> ``list`` of its items' type, a dict -> ``struct`` of its keys (in order
of first appearance). Types met in different rows merge: ``null`` gives way to any type, ``int64`` to
``float64``, structs to the union of their fields; any other mix (a string in one row, a number in the
next) is ``BadInput``, as ``datasets`` would refuse it too. ``scan_file`` counts the rows, merges the
types and hashes the bytes in one pass. Written by hand: a few lines, and the form must be exactly
``datasets``' (tests/data/cards check it against ``datasets.Features``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput

#: a type: ("null",), ("value", dtype), ("list", item type), ("struct", ((name, type), ...))
Type = tuple

NULL: Type = ("null",)


def type_of(value: Any) -> Type:
    """The type of one JSON value.

    >>> type_of([{"role": "user"}])
    ('list', ('struct', (('role', ('value', 'string')),)))
    """
    if value is None:
        return NULL
    if isinstance(value, bool):
        return ("value", "bool")
    if isinstance(value, int):
        return ("value", "int64")
    if isinstance(value, float):
        return ("value", "float64")
    if isinstance(value, str):
        return ("value", "string")
    if isinstance(value, (list, tuple)):
        item: Type = NULL
        for x in value:
            item = merge(item, type_of(x))
        return ("list", item)
    if isinstance(value, dict):
        return ("struct", tuple((str(k), type_of(v)) for k, v in value.items()))
    raise ValueError(f"a {type(value).__name__} is not a JSON value")


def merge(a: Type, b: Type) -> Type:
    """The type that holds values of both ``a`` and ``b``; ``ValueError`` when there is none.

    >>> merge(("value", "int64"), ("value", "float64")), merge(NULL, ("list", NULL))
    (('value', 'float64'), ('list', ('null',)))
    """
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if a[0] == b[0] == "value" and {a[1], b[1]} == {"int64", "float64"}:
        return ("value", "float64")
    if a[0] == b[0] == "list":
        return ("list", merge(a[1], b[1]))
    if a[0] == b[0] == "struct":
        fields = dict(a[1])
        for name, t in b[1]:
            fields[name] = merge(fields[name], t) if name in fields else t
        return ("struct", tuple(fields.items()))
    raise ValueError(f"{describe(a)} and {describe(b)} in one column")


def describe(t: Type) -> str:
    """A short name of a type for a message (``list of string``)."""
    if t[0] == "value":
        return t[1]
    if t[0] == "list":
        return f"list of {describe(t[1])}"
    return "struct" if t[0] == "struct" else "null"


def _yaml_type(t: Type) -> dict[str, Any]:
    """The key (``dtype``, ``list`` or ``struct``) and value that describe ``t`` in ``datasets``' YAML."""
    if t[0] == "null":
        return {"dtype": "null"}
    if t[0] == "value":
        return {"dtype": t[1]}
    if t[0] == "list":
        inner = _yaml_type(t[1])  # an item: its dtype name, a nested {"list": …}, or a struct's field list
        if "dtype" in inner:
            return {"list": inner["dtype"]}
        return {"list": inner if "list" in inner else inner["struct"]}
    return {"struct": [{"name": name, **_yaml_type(sub)} for name, sub in t[1]]}


def features_yaml(columns: dict[str, Type]) -> list[dict[str, Any]]:
    """The ``features`` list of ``dataset_info`` for columns of these types (``datasets``' own YAML form).

    >>> features_yaml({"steps": ("list", ("value", "string")), "spans": ("list", ("list", ("value", "int64")))})
    [{'name': 'steps', 'list': 'string'}, {'name': 'spans', 'list': {'list': 'int64'}}]
    """
    return [{"name": name, **_yaml_type(t)} for name, t in columns.items()]


@dataclass(frozen=True)
class FileScan:
    """One pass over a data file: rows, column types, size and SHA-256."""

    rows: int
    columns: dict[str, Type]
    num_bytes: int
    sha256: str


def scan_file(path: str | os.PathLike) -> FileScan:
    """Count the rows of a ``.jsonl`` or ``.parquet`` file, read its column types and hash it.

    A column missing from some rows is typed from the rows that have it (``datasets`` fills the
    others with null). ``BadInput`` names the file and the column on a type clash.
    """
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.manifest import sha256_file

    path = Path(path)
    columns: dict[str, Type] = {}
    rows = 0
    for i, row in enumerate(iter_rows(path)):
        rows += 1
        for name, value in row.items():
            try:
                columns[name] = merge(columns.get(name, NULL), type_of(value))
            except ValueError as e:
                raise BadInput(f"{path}: row {i}: column {name!r}: {e}") from None
    if rows == 0 and path.suffix == ".parquet":
        columns = {}
    return FileScan(rows, columns, path.stat().st_size, sha256_file(path))


__all__ = ["FileScan", "describe", "features_yaml", "merge", "scan_file", "type_of"]
