"""Flags of a verb whose settings are one flat dataclass config: ``--some-flag VALUE`` is ``some_flag=VALUE``.

A verb with many settings (``posttrain label mc``) takes ``--config FILE.yaml`` and ``key=value`` overrides
(``posttrainlab.config.load_config``, as ``posttrain train`` does) and keeps every flag it had: each flag
names a field of the config, so ``flag_overrides`` turns the flags into overrides generically, in
command-line order (a later setting of a key wins), from the field's type:

- ``bool``: ``--key`` is ``key=true``, ``--no-key`` (or the field's ``off`` name) ``key=false``;
- ``tuple[X, X]``: ``--key A B`` takes that many values; ``tuple[X, ...]``: ``--key A`` is repeatable;
- anything else: ``--key VALUE`` or ``--key=VALUE``.

Text values travel quoted (a text field keeps ``1`` or ``null`` as written), numbers as typed; OmegaConf
checks each against the field's type and refuses it with the key named. The help text of each setting is
written once, on its dataclass field (``metadata["help"]``), and ``settings_help`` lists them for ``--help``.
Written by hand: click parses declared options only, and declaring the fields again as options would
list each setting twice; this reads the one list, the dataclass.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, fields, replace
from typing import Any

from posttrainlab.cli.options import FLAG_ALIASES
from posttrainlab.errors import BadInput

Choices = Mapping[str, Sequence[str]]


def _not_none(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(hint) if a is not type(None))
    return hint


def _arity(hint: Any) -> int | str:
    """``"bool"``, ``"many"`` (a repeatable flag), or the number of values the flag takes."""
    hint = _not_none(hint)
    if hint is bool:
        return "bool"
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        return "many" if len(args) == 2 and args[1] is Ellipsis else len(args)
    return 1


def _metavar(hint: Any) -> str:
    """``INT``, ``FLOAT``, ``TEXT`` (``FLOAT FLOAT`` for a pair; the element's name for a repeatable flag)."""
    hint = _not_none(hint)
    if typing.get_origin(hint) is tuple:
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return " ".join(_metavar(a) for a in args)
    return {int: "INT", float: "FLOAT"}.get(hint, "TEXT")


def _settings(cls: type) -> dict[str, tuple[Field, int | str, str]]:
    hints = typing.get_type_hints(cls)
    return {f.name: (f, _arity(hints[f.name]), _metavar(hints[f.name])) for f in fields(cls)}


def flag_overrides(cls: type, tokens: list[str], *, command: str) -> list[str]:
    """``tokens`` (``key=value`` and flags, in order) as ``key=value`` overrides of ``cls`` (module docstring)."""
    settings = _settings(cls)
    off = {f.metadata["off"]: name for name, (f, _, _) in settings.items() if "off" in f.metadata}
    out: list[str] = []
    repeated: dict[str, list[str]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--"):
            out.append(token)  # key=value: load_config checks it
            continue
        flag, has_value, inline = token[2:].partition("=")
        key = flag.replace("-", "_")
        if key not in settings and FLAG_ALIASES.get(flag) in settings:
            key = FLAG_ALIASES[flag]
        value: Any = True
        if key not in settings and flag in off:
            key, value = off[flag], False
        elif key not in settings and key.startswith("no_") and settings.get(key[3:], (None, None))[1] == "bool":
            key, value = key[3:], False
        if key not in settings:
            raise BadInput(f"--{flag}: no such setting; `{command} --help` lists them")
        arity = settings[key][1]
        if arity == "bool":
            if has_value:
                raise BadInput(f"--{flag}: takes no value (--{flag} or --no-{flag})")
            out.append(f"{key}={json.dumps(value)}")
            continue
        if has_value:
            if arity not in (1, "many"):
                raise BadInput(f"--{flag}: takes {arity} values, as --{flag} {' '.join('V' * arity)}")
            values = [inline]
        else:
            count = 1 if arity == "many" else arity
            values = tokens[i : i + count]
            if len(values) < count:
                raise BadInput(f"--{flag}: needs {count} value{'s' if count > 1 else ''}")
            i += count
        if arity == "many":
            repeated.setdefault(key, []).extend(values)
            values = repeated[key]
        text = "TEXT" in settings[key][2]  # strings quoted (a str field keeps "1" or "null"); numbers as typed
        shown = [json.dumps(v) if text else v for v in values]
        out.append(f"{key}={shown[0] if arity == 1 else '[' + ', '.join(shown) + ']'}")
    return out


def _flag_text(field: Field, arity: int | str, metavar: str, choices: Sequence[str] | None = None) -> str:
    flag = "--" + field.name.replace("_", "-")
    names = flag + "".join(f"/--{alias}" for alias, name in FLAG_ALIASES.items() if name == field.name)
    if arity == "bool":
        return f"{flag}/--{field.metadata.get('off', 'no-' + flag[2:])}"
    if choices:
        metavar = "<" + "|".join(choices) + ">"
    return f"{names} {field.metadata.get('metavar', metavar)}" + (" (repeatable)" if arity == "many" else "")


def settings_help(cls: type, choices: Choices | None = None) -> str:
    """``--help`` lines for each setting of ``cls``: flag, YAML key, default, help (``\\b``: click keeps the layout);
    a setting in ``choices`` shows its values as ``<a|b>``, as typer shows a choice option."""
    choices = choices or {}
    lines = ["\b"]
    for name, (field, arity, metavar) in _settings(cls).items():
        default = field.default if field.default is not MISSING else None
        shown = json.dumps(list(default) if isinstance(default, tuple) else default)
        lines.append(f"  {_flag_text(field, arity, metavar, choices.get(name))}  [{field.name}: {shown}]")
        lines.append(f"      {field.metadata.get('help', '')}")
    return "\n".join(lines)


def check_choices(config: Any, choices: Choices) -> None:
    """``BadInput`` naming the flag when a setting in ``choices`` holds a value not among its choices (each value
    of a repeatable one); ``None`` (not set) passes.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class C:
    ...     search: str = "full"
    >>> check_choices(C(), {"search": ("full", "binary")})
    >>> check_choices(C("fast"), {"search": ("full", "binary")})
    Traceback (most recent call last):
    ...
    posttrainlab.errors.BadInput: --search 'fast': choose one of full, binary
    """
    for name, allowed in choices.items():
        value = getattr(config, name)
        for v in value if isinstance(value, (tuple, list)) else [value]:
            if v is not None and v not in allowed:
                raise BadInput(f"--{name.replace('_', '-')} {v!r}: choose one of {', '.join(allowed)}")


def hide_secrets(config: Any) -> Any:
    """``config`` with each ``secret`` field that is set shown as ``***`` (what ``--print-config`` prints)."""
    hidden = {f.name: "***" for f in fields(config) if f.metadata.get("secret") and getattr(config, f.name) is not None}
    return replace(config, **hidden)


__all__ = ["check_choices", "flag_overrides", "hide_secrets", "settings_help"]
