"""Typed run configs: dataclasses whose fields a YAML file sets and ``key=value`` overrides change.

Built on OmegaConf's structured configs (the loader torchtune uses), which type-check every value
against the dataclass and refuse keys the dataclass does not have. What this module adds is the
project's error contract: any fault in a config file or an override becomes one ``BadInput`` line
naming the file (or the override) and the key, and the CLI exits 2; and the shipped configs: the YAML
files under ``posttrainlab/configs/`` are package data, and a documented path such as
``configs/arith/sft.yaml`` that does not exist under the working directory loads the shipped file
(``config_path``), so the README's commands work from a pip install as they do from the repository.

**Kinds.** A config file may say what it configures in a top-level ``kind:`` line (every shipped recipe does:
``kind: sft``, ``kind: prm``...). ``load_config(..., kind=K)`` refuses a file whose ``kind`` is not ``K`` in one
line, and takes the line out before the fields are merged. This is the rule that tells ``posttrain train dpo
--config configs/arith/sft.yaml`` apart from a DPO recipe: every key of the SFT file is also a DPO field, so the
keys alone cannot (a key a recipe class lacks is refused anyway). A file without ``kind:`` (one of your own, or a
run's ``recipe.yaml``) is checked by its keys only; without ``kind=``, a ``kind:`` line is taken out unchecked.

**Extends.** A config file may start from another: a top-level ``extends: OTHER`` (a YAML path, relative to the file
or a shipped ``configs/...`` path, or, where the caller names a folder of presets, a preset's name) loads OTHER
first and this file's keys over it (chains allowed, cycles refused), so a preset states only what it changes.

**Values.** OmegaConf checks a value's type, not its sense: ``optim.epochs=-3`` is a float. A config class says which
values are impossible in a ``check()`` method (``BadInput`` naming the field); ``load_config`` runs every ``check()``
of the config and of the configs inside it (``check_settings``), so a setting no run can use (a batch size of 0, an
unknown choice) is one line, exit 2, when the config is loaded, ``--print-config`` included, not after the work.
"""

from __future__ import annotations

import os
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from posttrainlab.errors import BadInput

T = TypeVar("T")

#: the configs shipped inside the package (the repository's top-level ``configs`` links here)
SHIPPED = Path(__file__).resolve().parent / "configs"


def config_error_line(e: Exception) -> str:
    """OmegaConf's messages span several lines (key, type, value); keep the first, add the key."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    key = getattr(e, "full_key", None)
    return f"{text} (key: {key})" if key and key not in text else text


def config_path(path: str | os.PathLike) -> Path:
    """``path`` as given when it is a file; else, for a relative ``configs/...`` path, the shipped file of that name.

    >>> config_path("configs/arith/sft.yaml").resolve() == SHIPPED / "arith" / "sft.yaml"  # from any folder
    True
    """
    given = Path(path)
    if given.is_file() or given.is_absolute() or given.parts[:1] != ("configs",):
        return given
    shipped = SHIPPED.joinpath(*given.parts[1:])
    return shipped if shipped.is_file() else given


def preset_file(name: str, folder: Path, what: str = "preset") -> Path:
    """The YAML file of preset ``name``: ``folder/NAME.yaml`` for a shipped name, ``name`` itself for a ``.yaml`` or
    ``.yml`` path; ``BadInput`` listing the shipped ones for any other name (the quickstart's and the study's)."""
    if name.endswith((".yaml", ".yml")):
        return Path(name)
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    if name not in names:
        raise BadInput(f"unknown {what} {name!r}: choose one of {', '.join(names)}, or a YAML file")
    return folder / f"{name}.yaml"


def load_config(
    cls: type[T],
    path: str | os.PathLike | None = None,
    overrides: list[str] | None = None,
    *,
    start: T | None = None,
    kind: str | None = None,
    presets: Path | None = None,
) -> T:
    """Build a ``cls`` from defaults (or the instance ``start``), then the YAML at ``path`` (``config_path``),
    then overrides; a ``kind:`` line in the YAML must equal ``kind`` when that is given, and ``extends:`` names a
    file, or a preset in ``presets`` (module docstring)."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    schema = OmegaConf.structured(start if start is not None else cls)
    where = "config"
    try:
        if path is not None:
            where = str(path)
            path = config_path(path)
            if not path.is_file():
                shipped = f" here or among the shipped ones ({SHIPPED})" if path.parts[:1] == ("configs",) else ""
                raise BadInput(f"{where}: no such config file{shipped}")
            schema = OmegaConf.merge(schema, _load_file(path, cls, kind, presets, (), where))
        for item in overrides or []:
            where = f"override {item!r}"
            if "=" not in item:
                raise BadInput(f"{where}: expected key=value")
            schema = OmegaConf.merge(schema, OmegaConf.from_dotlist([item]))
        config = OmegaConf.to_object(schema)
    except OmegaConfBaseException as e:
        raise BadInput(f"{where}: {config_error_line(e)}") from None
    except (OSError, ValueError, yaml.YAMLError) as e:
        raise BadInput(f"{where}: {config_error_line(e)}") from None
    check_settings(config)
    return config


def _load_file(path: Path, cls: type, kind: str | None, presets: Path | None, seen: tuple[Path, ...],
               where: str | None = None) -> Any:  # fmt: skip
    """The YAML mapping at ``path`` (named ``where`` in errors: as the user spelled it), over the file its
    ``extends:`` names (``Extends`` in the module docstring)."""
    from dataclasses import fields, is_dataclass

    from omegaconf import OmegaConf

    where = where or str(path)
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise BadInput(f"{where}: extends itself ({chain})")
    loaded = OmegaConf.load(path)
    if loaded is None or not hasattr(loaded, "keys"):
        raise BadInput(f"{where}: expected a YAML mapping of config fields")
    _check_kind(loaded, cls, kind, where)
    if "extends" not in loaded or (is_dataclass(cls) and "extends" in {f.name for f in fields(cls)}):
        return loaded
    parent = loaded.pop("extends")
    if not isinstance(parent, str) or not parent:
        raise BadInput(f"{where}: extends: expected a preset name or a YAML path, got {parent!r}")
    if parent.endswith((".yaml", ".yml")):
        beside = path.parent / parent
        target = beside if beside.is_file() else config_path(parent)
        if not target.is_file():
            raise BadInput(f"{where}: extends: {parent}: no such config file")
    elif presets is not None:
        target = preset_file(parent, presets)
    else:
        raise BadInput(f"{where}: extends: {parent!r}: expected a YAML path (.yaml)")
    return OmegaConf.merge(_load_file(target, cls, kind, presets, (*seen, path.resolve())), loaded)


def check_settings(config: Any, prefix: str = "") -> None:
    """Run ``config.check()`` and that of every dataclass field inside it, depth first in field order (``Values``
    in the module docstring). A nested config's refusal names its field from the top: ``optim.epochs=-3.0: ...``
    from a recipe, ``sft.optim.epochs=-3.0: ...`` from the quickstart's config."""
    from dataclasses import fields, is_dataclass

    if not is_dataclass(config) or isinstance(config, type):
        return
    for f in fields(config):
        value = getattr(config, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            check_settings(value, f"{prefix}{f.name}.")
    check = getattr(config, "check", None)
    if callable(check):
        try:
            check()
        except BadInput as e:
            raise BadInput(f"{prefix}{e}") from None


def _check_kind(loaded: Any, cls: type, kind: str | None, where: str) -> None:
    """Take the file's ``kind:`` line out of ``loaded`` (unless ``cls`` has a field of that name); refuse it when it
    is not ``kind``."""
    from dataclasses import fields, is_dataclass

    if "kind" not in loaded or (is_dataclass(cls) and "kind" in {f.name for f in fields(cls)}):
        return
    found = loaded.pop("kind")
    if kind is not None and found != kind:
        raise BadInput(f"{where}: kind {found!r} (its kind: line), but this command takes kind {kind!r}")


def to_dict(config: Any) -> dict[str, Any]:
    """A plain dict of a dataclass config (for saving beside a run)."""
    return asdict(config) if is_dataclass(config) else dict(config)


def to_yaml(config: Any) -> str:
    """A config as YAML, fields in their dataclass order (``recipe.yaml``, ``--print-config``)."""
    import yaml

    return yaml.safe_dump(to_dict(config), sort_keys=False)


def save_config(config: Any, path: str | os.PathLike) -> None:
    """Write a config as YAML (atomically) so a run records exactly what it ran with."""
    from posttrainlab.data.atomic import write_text

    write_text(path, to_yaml(config))
