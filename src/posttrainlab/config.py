"""Typed run configs: dataclasses whose fields a YAML file sets and ``key=value`` overrides change.

Built on OmegaConf's structured configs (the loader torchtune uses), which type-check every value
against the dataclass and refuse keys the dataclass does not have. What this module adds is the
project's error contract: any fault in a config file or an override becomes one ``BadInput`` line
naming the file (or the override) and the key, and the CLI exits 2.
"""

from __future__ import annotations

import os
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from posttrainlab.errors import BadInput

T = TypeVar("T")


def one_line(e: Exception) -> str:
    """OmegaConf's messages span several lines (key, type, value); keep the first, add the key."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    key = getattr(e, "full_key", None)
    return f"{text} (key: {key})" if key and key not in text else text


def load_config(
    cls: type[T], path: str | os.PathLike | None = None, overrides: list[str] | None = None, *, start: T | None = None
) -> T:
    """Build a ``cls`` from defaults (or the instance ``start``), then the YAML at ``path``, then overrides."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    schema = OmegaConf.structured(start if start is not None else cls)
    where = "config"
    try:
        if path is not None:
            where = str(path)
            if not Path(path).is_file():
                raise BadInput(f"{path}: no such config file")
            loaded = OmegaConf.load(path)
            if loaded is None or not hasattr(loaded, "keys"):
                raise BadInput(f"{path}: expected a YAML mapping of config fields")
            schema = OmegaConf.merge(schema, loaded)
        for item in overrides or []:
            where = f"override {item!r}"
            if "=" not in item:
                raise BadInput(f"{where}: expected key=value")
            schema = OmegaConf.merge(schema, OmegaConf.from_dotlist([item]))
        return OmegaConf.to_object(schema)
    except OmegaConfBaseException as e:
        raise BadInput(f"{where}: {one_line(e)}") from None
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise BadInput(f"{where}: {one_line(e)}") from None


def to_dict(config: Any) -> dict[str, Any]:
    """A plain dict of a dataclass config (for saving beside a run)."""
    return asdict(config) if is_dataclass(config) else dict(config)


def save_config(config: Any, path: str | os.PathLike) -> None:
    """Write a config as YAML (atomically) so a run records exactly what it ran with."""
    import yaml

    from posttrainlab.data.atomic import write_text

    write_text(path, yaml.safe_dump(to_dict(config), sort_keys=False))
