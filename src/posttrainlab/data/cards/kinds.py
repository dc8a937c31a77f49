"""The kinds of dataset folder the lab writes, how to tell them apart, and the one call every writer makes.

``write_folder_card(folder, kind, known)`` writes ``folder/README.md``: the provenance is what the folder's
own files record (the kind's ``derive``) updated with ``known`` (what only the writer knows: the judge's
endpoint, the source data…) and completed by ``card.card_provenance`` (policy hash, command line, lab
version). ``posttrain data card DIR`` calls it with ``keep=True``: the provenance of the card already
there is kept (it describes how the data was made, not who rewrote the card).

Kinds, in the order ``detect_kind`` tries them:

=================  ======================================================  ===================================
kind               written by                                              recognised by
=================  ======================================================  ===================================
arith-v1           ``posttrain data prepare``                              manifest.json ``dataset: arith-v1``
arith-prm          ``posttrain data arith-prm``                            manifest.json ``dataset: arith-prm``
sharp              ``posttrain data sharp-build``, ``annotate``            all/span.jsonl + summary.json
mc-values          ``posttrain label mc``                                  summary.json with ``value_table``
preference-pairs   ``posttrain train dpo`` (``policy``/``step``), ``pairs/``  train.jsonl + preference_pairs.json
annotations        ``posttrain annotate``                                  annotations.jsonl
generations        ``posttrain generate``                                  generations.jsonl + generate.json
=================  ======================================================  ===================================

Written by hand: the registry of the lab's own layouts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrainlab.data.cards import labels, runs
from posttrainlab.data.cards.card import CardSpec, EmptyDataset, card_provenance, verify_card, write_card
from posttrainlab.data.cards.render import CARD, parse_provenance
from posttrainlab.data.cards.sections import json_object
from posttrainlab.data.manifest import FileProblem
from posttrainlab.errors import BadInput
from posttrainlab.run_layout import MANIFEST

#: the folder of a DPO run that holds its on-policy pairs as a dataset
PAIRS_DIR = "pairs"


@dataclass(frozen=True)
class Kind:
    name: str
    detect: Callable[[Path], bool]
    derive: Callable[[Path, dict[str, Any]], dict[str, Any]]
    spec: Callable[[Path, dict[str, Any]], CardSpec]


def _is_arith_v1(folder: Path) -> bool:
    return json_object(folder / MANIFEST).get("dataset") == "arith-v1"


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("arith-v1", _is_arith_v1, lambda f, known: {}, lambda f, p: None),  # data.arith.card writes it
        Kind("arith-prm", labels.is_arith_prm, labels.arith_prm_derive, labels.arith_prm_spec),
        Kind("sharp", labels.is_sharp, labels.sharp_derive, labels.sharp_spec),
        Kind("mc-values", runs.is_mc, runs.mc_derive, runs.mc_spec),
        Kind("preference-pairs", runs.is_pairs, runs.pairs_derive, runs.pairs_spec),
        Kind("annotations", runs.is_annotations, runs.annotations_derive, runs.annotations_spec),
        Kind("generations", runs.is_generations, runs.generations_derive, runs.generations_spec),
    )
}


def detect_kind(folder: str | os.PathLike) -> str:
    """The kind of a dataset folder; ``BadInput`` for a missing folder or one of no known kind."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"{folder}: no such folder")
    for kind in KINDS.values():
        if kind.detect(folder):
            return kind.name
    if (folder / "preference_pairs.jsonl").is_file():
        raise BadInput(f"{folder}: a DPO run folder; its pairs are the dataset {folder / PAIRS_DIR}")
    raise BadInput(
        f"{folder}: not a dataset folder of a known kind ({', '.join(KINDS)}); the lab writes cards only for its own"
    )


def _arith_v1_card(folder: Path) -> Path:
    from posttrainlab.data.arith.card import render_card
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.manifest import load_manifest

    manifest = load_manifest(folder)
    files = {}
    for rel in manifest["files"]:
        if not (folder / rel).is_file():
            raise BadInput(f"{folder / rel}: listed in manifest.json but missing")
        files[rel] = (folder / rel).read_bytes()
    write_text(folder / CARD, render_card(manifest, files))
    return folder / CARD


def write_folder_card(
    folder: str | os.PathLike, kind: str | None = None, known: dict[str, Any] | None = None, *, keep: bool = False
) -> Path | None:
    """Write ``folder/README.md`` for a folder of ``kind`` (detected when ``None``); the card's path.

    ``known``: provenance only the writer knows (it wins over what the folder's files record). ``keep``:
    reuse the provenance of the card already in the folder, when it has one (``posttrain data card``).
    A writer's output with no row in any split gets no card (``None``; a stale one is removed); with
    ``keep`` that is ``card.EmptyDataset`` (exit 2).
    """
    folder = Path(folder)
    kind = kind or detect_kind(folder)
    if kind not in KINDS:
        raise BadInput(f"unknown dataset kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind == "arith-v1":
        return _arith_v1_card(folder)
    entry = KINDS[kind]
    provenance = None
    if keep and (folder / CARD).is_file():
        provenance = parse_provenance((folder / CARD).read_text(encoding="utf-8"))
    if provenance is None:
        provenance = card_provenance(kind, **entry.derive(folder, dict(known or {})))
    try:
        return write_card(folder, entry.spec(folder, provenance))
    except EmptyDataset:
        if keep:  # posttrain data card: say so (exit 2)
            raise
        (folder / CARD).unlink(missing_ok=True)  # a writer's empty output (e.g. every annotation failed): no card
        return None


def check_recorded(folder: str | os.PathLike, rehash: bool = False) -> list[FileProblem]:
    """Before ``posttrain data card`` writes a card: the folder's files must still match what ``manifest.json`` and
    the card's Files table record, else the card would mix recorded numbers (``records``, SHA-256, provenance) with
    recounted ones (issue #42). A mismatch is ``BadInput`` naming the files, unless ``rehash``: then the manifest's
    entries (and arith-v1's records per split) are rewritten from the files as they are, and the card follows them.
    Returns the mismatches that ``rehash`` accepted."""
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.manifest import file_entry, has_manifest, load_manifest, manifest_text, verify_dir

    folder = Path(folder)
    problems = verify_dir(folder) if has_manifest(folder) else []
    problems += (verify_card(folder) or (0, []))[1]
    if not problems:
        return []
    if not rehash:
        names = list(dict.fromkeys(str(p.path) for p in problems))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise BadInput(
            f"{folder}: {len(names)} file(s) no longer match what {MANIFEST} / {CARD} record ({shown}: "
            f"{problems[0].fault}); run `posttrain data verify {folder}`, or pass --rehash to record the files as "
            "they are now"
        )
    if has_manifest(folder):
        manifest = load_manifest(folder)
        for rel in manifest["files"]:
            if (folder / rel).is_file():
                manifest["files"][rel] = {**manifest["files"][rel], **file_entry(folder / rel)}
        for name, info in (manifest.get("splits") or {}).items():  # arith-v1: the card's table of splits
            rel = f"{info.get('config')}/{name}.jsonl" if isinstance(info, dict) else None
            if rel in manifest["files"]:
                info["records"] = manifest["files"][rel]["records"]
        write_text(folder / MANIFEST, manifest_text(manifest))
    return problems


def upstream_provenance(path: str | os.PathLike | None) -> dict[str, Any]:
    """Policy, sampling, judge and data of the card beside ``path`` (a folder, or a file in one); ``{}`` if none.

    The SHARP views read it from their annotation run's card, so their card names the policy too.
    """
    if path is None:
        return {}
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    record = parse_provenance((folder / CARD).read_text(encoding="utf-8")) if (folder / CARD).is_file() else None
    if not record:
        return {}
    keys = ("policy", "policy_sha256", "sampling", "judge", "data")
    return {k: record[k] for k in keys if k in record}


def publish_pairs(run_dir: str | os.PathLike, pairs: str, summary: str) -> Path:
    """The DPO run's pairs as a dataset folder ``run_dir/pairs/`` (``train.jsonl``, the summary, a card).

    The files are hard links to the run's own (a copy where links are not possible); the folder is replaced
    whole, atomically. Returns its path.
    """
    from posttrainlab.data.atomic import check_output_folder, staging_dir

    run_dir = Path(run_dir)
    out = run_dir / PAIRS_DIR
    own = {"train.jsonl", "preference_pairs.json", CARD}
    check_output_folder(out, own.__contains__, what="pairs folder")
    with staging_dir(out) as tmp:
        for src, name in ((pairs, "train.jsonl"), (summary, "preference_pairs.json")):
            try:
                os.link(run_dir / src, tmp / name)
            except OSError:
                shutil.copyfile(run_dir / src, tmp / name)
        write_folder_card(tmp, "preference-pairs")
    return out


def verify_folder(folder: str | os.PathLike) -> tuple[list[str], list[FileProblem]]:
    """Re-hash a dataset folder against its ``manifest.json`` and its card's Files table, where each exists.

    Returns ``(one line per source checked: "all N files match …", problems)``; ``BadInput`` when the folder
    has neither (the message names ``manifest.json``, as ``posttrain data verify`` always has).
    """
    from posttrainlab.data.manifest import has_manifest, load_manifest, verify_dir

    folder = Path(folder)
    checked, problems = [], []
    if has_manifest(folder):
        problems += verify_dir(folder)
        checked.append(f"all {len(load_manifest(folder)['files'])} files match manifest.json")
    card = verify_card(folder)
    if card is not None:
        problems += card[1]
        checked.append(f"all {card[0]} files match {CARD}")
    if not checked:
        if not folder.is_dir():
            load_manifest(folder)  # the old one-line refusal: "DIR/manifest.json: no manifest.json in DIR"
        raise BadInput(f"{folder}: no manifest.json, and no dataset card ({CARD}) with a Files table")
    return checked, problems


__all__ = [
    "KINDS",
    "PAIRS_DIR",
    "check_recorded",
    "detect_kind",
    "publish_pairs",
    "upstream_provenance",
    "verify_folder",
    "write_folder_card",
]
