"""What each kind of dataset folder says about itself: its title, summary, the Hub's metadata and columns.

They are written once, in ``about.yaml`` (text, not code); ``card_spec`` makes a kind's ``card.CardSpec`` from them
and what the kind counted in its folder (``labels``, ``runs``), ``columns_section`` its Columns section.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from functools import cache
from typing import Any

from posttrainlab.data.cards.card import CardSpec
from posttrainlab.data.cards.sections import columns_table


@cache
def _about() -> dict[str, dict[str, Any]]:
    from importlib import resources

    import yaml

    text = resources.files("posttrainlab.data.cards").joinpath("about.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def columns(kind: str, table: str = "columns") -> dict[str, tuple[str, str]]:
    """``{column: (type, meaning)}`` of a kind (``table``: another table of it, ``columns_math_shepherd``).

    >>> columns("preference-pairs")["chosen_source"]
    ('str', 'policy or reference')
    """
    return {name: (type_, meaning) for name, (type_, meaning) in _about()[kind][table].items()}


def columns_section(kind: str, first_row: dict[str, Any] | None = None, table: str = "columns") -> str:
    """The columns table: those of ``first_row`` (the kind's own list when there is no row), each with its meaning."""
    meanings = columns(kind, table)
    return columns_table(first_row or meanings, meanings)


def card_spec(
    kind: str, configs: dict[str, dict[str, str]], sections: list[str], provenance: dict[str, Any],
    side_files: Iterable[str] = (),
) -> CardSpec:  # fmt: skip
    """The ``CardSpec`` of a folder of ``kind``: ``about.yaml``'s title, summary and metadata, and what was counted."""
    about = _about()[kind]
    return CardSpec(kind=kind, title=about["title"], summary=about["summary"], configs=configs, sections=sections,
                    side_files=list(side_files), provenance=provenance, meta=copy.deepcopy(about["meta"]))  # fmt: skip


__all__ = ["card_spec", "columns", "columns_section"]
