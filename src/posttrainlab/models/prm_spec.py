"""How a PRM reads a solution (``PRMSpec``, saved as ``prm_config.json``), without torch.

Apart from ``models/prm.py`` (which needs torch and transformers) so that the PRM recipe
(``train.prm_recipe``) can check its ``head`` against the one list of heads, and ``posttrain train
prm --print-config`` can run, without loading either. ``models/prm.py`` says what each field does.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput

PRM_CONFIG = "prm_config.json"
HEADS = ("token-cls", "verdict")
DEFAULT_SEPARATOR = "<extra_0>"
#: Qwen2.5-Math-PRM's system prompt (its model card's usage example).
DEFAULT_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class PRMSpec:
    """How a PRM reads a solution; saved as ``prm_config.json`` beside the weights."""

    head: str = "token-cls"  # token-cls | verdict
    separator: str = DEFAULT_SEPARATOR
    chat: bool = True  # format with the tokenizer's chat template (False: plain)
    system_prompt: str = DEFAULT_SYSTEM
    yes_token: str = "+"  # verdict head only: the token whose probability is the reward
    no_token: str = "-"

    @classmethod
    def from_dict(cls, data: Any, where: str) -> PRMSpec:
        known = {f.name: f.type for f in fields(cls)}
        if not isinstance(data, dict):
            raise BadInput(f"{where}: expected a JSON object")
        extra = sorted(set(data) - set(known))
        if extra:
            raise BadInput(f"{where}: unknown key(s) {', '.join(extra)}; known: {', '.join(known)}")
        spec = cls(**data)
        if spec.head not in HEADS:
            raise BadInput(f"{where}: head {spec.head!r}: choose one of {', '.join(HEADS)}")
        for name in ("separator", "system_prompt", "yes_token", "no_token"):
            if not isinstance(getattr(spec, name), str):
                raise BadInput(f"{where}: {name} must be a string")
        if not isinstance(spec.chat, bool):
            raise BadInput(f"{where}: chat must be true or false")
        return spec


def write_spec(spec: PRMSpec, folder: str | os.PathLike) -> None:
    """Write ``spec`` as ``folder/prm_config.json`` (atomically)."""
    from posttrainlab.data.atomic import write_text

    write_text(Path(folder) / PRM_CONFIG, json.dumps(asdict(spec), indent=2) + "\n")
