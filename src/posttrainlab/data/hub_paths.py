"""Hub paths, parsed: ``hf://owner/name[/CONFIG][:SPLIT]``, ``hf://datasets/owner/name…`` and plain ``owner/name``.

Pure string work, no network and no import of ``huggingface_hub``: a loader tells a Hub path from a
local one with these, and ``data.hub`` fetches what they name. The forms are the arith-v1 card's
``hf://owner/name[/CONFIG][:SPLIT]`` and Hugging Face's own ``hf://datasets/owner/name`` (docs/design.md);
a name follows the Hub's repo-id rule, a split the rule of ``datasets``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from posttrainlab.errors import BadInput

PREFIX = "hf://"
DATASETS_NAMESPACE = "datasets/"  # hf://datasets/owner/name, the Hugging Face file-system form

# Hub repo ids: letters, digits, '-', '_', '.'; no leading/trailing '-' or '.', no '--' or '..'.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_CONFIG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SPLIT = re.compile(r"\w+(?:\.\w+)*")  # the split-name rule of `datasets`
# A missing local *file* should not be mistaken for a Hub id ("data/test.jsonl").
_FILE_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".tsv", ".txt", ".arrow", ".yaml", ".yml", ".gz")


@dataclass(frozen=True)
class HubRef:
    """A parsed Hub path: the dataset repo and, optionally, its configuration and split."""

    repo_id: str
    config: str | None = None
    split: str | None = None

    @property
    def spec(self) -> str:
        """The ``hf://`` path back: ``hf://owner/name[/CONFIG][:SPLIT]``."""
        text = PREFIX + self.repo_id
        if self.config is not None:
            text += "/" + self.config
        if self.split is not None:
            text += ":" + self.split
        return text


def valid_name(part: str) -> bool:
    return bool(_NAME.fullmatch(part)) and "--" not in part and ".." not in part


def parse_hub_spec(spec: str) -> HubRef | None:
    """Parse ``hf://owner/name[/CONFIG][:SPLIT]``; ``None`` when ``spec`` is not an ``hf://`` path.

    Hugging Face's own form for a dataset, ``hf://datasets/owner/name…`` (``huggingface_hub``'s file system), is the
    same path: ``datasets`` is a reserved namespace on the Hub, never an owner.

    >>> parse_hub_spec("hf://ZaandaTeika/SHARP/SHARP-Math:test")
    HubRef(repo_id='ZaandaTeika/SHARP', config='SHARP-Math', split='test')
    >>> parse_hub_spec("hf://datasets/ZaandaTeika/SHARP/SHARP-Math:test")
    HubRef(repo_id='ZaandaTeika/SHARP', config='SHARP-Math', split='test')
    >>> parse_hub_spec("hf://M-amir1998/arith-v1")
    HubRef(repo_id='M-amir1998/arith-v1', config=None, split=None)
    >>> parse_hub_spec("data/arith-v1") is None
    True
    """
    if not isinstance(spec, str) or not spec.startswith(PREFIX):
        return None
    body = spec[len(PREFIX) :]
    if body.startswith(DATASETS_NAMESPACE):
        body = body[len(DATASETS_NAMESPACE) :]
    path, sep, split = body.partition(":")
    if sep:
        if not split:
            raise BadInput(f"{spec}: empty split after ':' (expected hf://owner/name[/CONFIG][:SPLIT])")
        if not _SPLIT.fullmatch(split):
            raise BadInput(f"{spec}: bad split name {split!r} (letters, digits, '_' and '.' only)")
    parts = path.split("/")
    if len(parts) < 2:
        raise BadInput(f"{spec}: expected hf://owner/name[/CONFIG][:SPLIT], got no '/name'")
    if len(parts) > 3:
        raise BadInput(f"{spec}: too many '/' parts (expected hf://owner/name[/CONFIG][:SPLIT])")
    owner, name = parts[0], parts[1]
    for label, part in (("owner", owner), ("dataset name", name)):
        if not part:
            raise BadInput(f"{spec}: empty {label} (expected hf://owner/name[/CONFIG][:SPLIT])")
        if not valid_name(part):
            raise BadInput(
                f"{spec}: bad {label} {part!r} (letters, digits, '-', '_', '.'; "
                "no leading or trailing '-'/'.', no '--' or '..')"
            )
    config = parts[2] if len(parts) == 3 else None
    if config is not None and not _CONFIG.fullmatch(config):
        what = "empty configuration" if not config else f"bad configuration name {config!r}"
        raise BadInput(f"{spec}: {what} (expected hf://owner/name[/CONFIG][:SPLIT])")
    return HubRef(f"{owner}/{name}", config, split if sep else None)


def looks_like_hub_id(spec: str) -> bool:
    """True for a plain ``owner/name`` that could be a Hub dataset id.

    Call it only for a path that does not exist locally: ``"M-amir1998/arith-v1"`` could be a folder.
    Names ending in a data-file suffix (``.jsonl``, ``.json``, ``.parquet``, ...) are taken for
    missing local files, not Hub ids.

    >>> looks_like_hub_id("M-amir1998/arith-v1"), looks_like_hub_id("data/test.jsonl")
    (True, False)
    """
    if not isinstance(spec, str) or spec.startswith(PREFIX):
        return False
    parts = spec.split("/")
    if len(parts) != 2 or not all(valid_name(p) for p in parts):
        return False
    return not parts[1].lower().endswith(_FILE_SUFFIXES)
