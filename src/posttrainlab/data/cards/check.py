"""The offline checks the Hub's own libraries make of a dataset card, gathered in one place.

``huggingface_hub.RepoCard.validate`` posts the card to the Hub, so it cannot run offline; what can:

- ``huggingface_hub.DatasetCard.load(..., ignore_metadata_errors=False)``: the front matter is YAML, a
  mapping, and parses into ``DatasetCardData``;
- ``datasets``' ``MetadataConfigs.from_dataset_card_data``: every ``configs`` entry and its ``data_files``
  are well formed (the check ``load_dataset`` makes);
- ``datasets``' ``DatasetInfosDict.from_dataset_card_data``: every ``dataset_info`` entry parses, its
  ``features`` into ``datasets.Features`` and its splits (name, ``num_bytes``, ``num_examples``) into a
  ``SplitDict``; the configs and their splits are the same in both lists;
- ``size_categories`` and ``language`` are values of the lists ``datasets`` ships (``utils/resources``).

``check_card(folder)`` returns one line per problem (empty: the card passes). It imports ``datasets``
and ``huggingface_hub`` inside, so ``posttrain data …`` stays fast. Written by hand: the glue between the
two libraries' checks.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from posttrainlab.data.cards.render import CARD


def _known(name: str) -> set[str]:
    data = json.loads(resources.files("datasets.utils").joinpath("resources", name).read_text(encoding="utf-8"))
    return set(data) if isinstance(data, (list, dict)) else set()


def check_card(folder: str | os.PathLike) -> list[str]:
    """Every problem the offline checks of ``huggingface_hub`` and ``datasets`` find in ``folder/README.md``."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    path = Path(folder) / CARD
    if not path.is_file():
        return [f"{path}: no dataset card"]
    try:
        card = DatasetCard.load(path, ignore_metadata_errors=False)
    except Exception as e:  # the library raises ValueError or yaml errors
        return [f"{path}: front matter does not parse: {e}"]
    data = card.data
    problems = []
    try:
        configs = MetadataConfigs.from_dataset_card_data(data)
    except Exception as e:
        return [f"{path}: configs: {e}"]
    try:
        infos = DatasetInfosDict.from_dataset_card_data(data)
    except Exception as e:
        return [f"{path}: dataset_info: {e}"]
    if not configs:
        problems.append(f"{path}: no configs")
    for name, config in configs.items():
        info = infos.get(name)
        if info is None:
            problems.append(f"{path}: config {name!r} has no dataset_info")
            continue
        if info.features is None:
            problems.append(f"{path}: config {name!r}: no features")
        declared = [entry["split"] for entry in config.get("data_files", [])]
        if info.splits is None or sorted(info.splits) != sorted(declared):
            problems.append(f"{path}: config {name!r}: data_files splits {declared} differ from dataset_info's")
    for name in set(infos) - set(configs):
        problems.append(f"{path}: dataset_info names config {name!r}, which configs does not")
    sizes = data.get("size_categories") or []
    bad = [s for s in sizes if s not in _known("size_categories.json")]
    if bad:
        problems.append(f"{path}: unknown size_categories {bad}")
    bad = [lang for lang in data.get("language") or [] if lang not in _known("languages.json")]
    if bad:
        problems.append(f"{path}: unknown language {bad}")
    return problems


__all__ = ["check_card"]
