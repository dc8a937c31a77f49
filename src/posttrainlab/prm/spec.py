"""How a PRM reads a solution (``PRMSpec``, saved as ``prm_config.json``), without torch.

Apart from ``prm/heads.py`` and ``prm/loading.py`` (which need torch and transformers) so that the PRM recipe
(``train.prm_recipe``) can check its ``head`` against the one list of heads, and ``posttrain train
prm --print-config`` can run, without loading either. ``prm/format.py`` and ``prm/heads.py`` say what each field
does.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.run_layout import PRM_CONFIG  # the name's one place (prm.loading imports it from here)

HEADS = ("token-cls", "verdict", "result")
#: How a solution becomes the PRM's input (``prm.format.encode_solution``): ``qwen`` = Qwen2.5-Math-PRM's layout
#: (system prompt, question, steps each followed by the separator token); ``policy`` = the policy's own prompt
#: (chat template over instruction + question) and its own lines, each ending in a newline, read at the newline
#: (``prm.policy_format``).
INPUT_FORMATS = ("qwen", "policy")
QWEN_PRM = "Qwen2ForProcessRewardModel"
DEFAULT_SEPARATOR = "<extra_0>"
#: Qwen2.5-Math-PRM's system prompt (its model card's usage example).
DEFAULT_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True)
class PRMSpec:
    """How a PRM reads a solution; saved as ``prm_config.json`` beside the weights."""

    head: str = "token-cls"  # token-cls | verdict | result (prm.heads)
    separator: str = DEFAULT_SEPARATOR
    chat: bool = True  # format with the tokenizer's chat template (False: plain)
    system_prompt: str = DEFAULT_SYSTEM
    yes_token: str = "+"  # verdict head only: the token whose probability is the reward
    no_token: str = "-"
    input_format: str = "qwen"  # qwen | policy (INPUT_FORMATS)
    instruction: str = ""  # policy format: the user turn is instruction + "\n\n" + question ("": the question alone)
    # the step best-of-N and beam search append to a finished solution without an answer line ("": none); set by
    # training when its rows hold arith-prm's explicit missing-answer step (data.arith.prm_labels.NO_ANSWER_STEP)
    no_answer_step: str = ""
    # an outcome reward model (ORM): trained on outcome labels (``PRMRecipe.supervision`` outcome | outcome-last),
    # so a step's score is its estimate that the whole solution ends right (a value), and a solution's score is its
    # last step's: best-of-N's ``orm`` selectors, beam search's ``last`` aggregation (docs/process-vs-outcome.md)
    orm: bool = False

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
        if spec.input_format not in INPUT_FORMATS:
            raise BadInput(f"{where}: input_format {spec.input_format!r}: choose one of {', '.join(INPUT_FORMATS)}")
        for name in ("separator", "system_prompt", "yes_token", "no_token", "instruction", "no_answer_step"):
            if not isinstance(getattr(spec, name), str):
                raise BadInput(f"{where}: {name} must be a string")
        for name in ("chat", "orm"):
            if not isinstance(getattr(spec, name), bool):
                raise BadInput(f"{where}: {name} must be true or false")
        return spec


def is_orm(scorer: Any) -> bool:
    """Whether a loaded scorer (``prm.PRM``, or anything with a ``spec``) is an outcome reward model."""
    return bool(getattr(getattr(scorer, "spec", None), "orm", False))


def is_orm_folder(path: str | os.PathLike) -> bool:
    """Whether a local model folder's ``prm_config.json`` says ``"orm": true`` (read without torch; ``False`` when it
    has none: a Hub id is told once loaded, ``is_orm``)."""
    try:
        saved = json.loads((Path(path).expanduser() / PRM_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(saved, dict) and saved.get("orm") is True


def architecture(config: dict) -> str:
    """The first of a ``config.json``'s ``architectures``, ``""`` when it names none."""
    archs = config.get("architectures") or []
    return archs[0] if archs else ""


def checkpoint_head(config: dict, saved: PRMSpec | None) -> str | None:
    """The head a checkpoint scores with: its ``prm_config.json``'s, else ``token-cls`` for a token-classification
    or Qwen2.5-Math-PRM architecture; ``None`` when it is no PRM (a policy, say)."""
    if saved is not None:
        return saved.head
    arch = architecture(config)
    return "token-cls" if arch == QWEN_PRM or arch.endswith("ForTokenClassification") else None


def not_a_prm(path: str, config: dict) -> BadInput:
    return BadInput(
        f"{path}: not a PRM checkpoint ({architecture(config) or 'no architectures'} and no {PRM_CONFIG}; "
        "expected a 2-label *ForTokenClassification, Qwen2ForProcessRewardModel or a verdict- or result-head PRM)"
    )


def check_prm_folder(path: str | os.PathLike) -> None:
    """``BadInput`` unless the local folder ``path`` holds a PRM checkpoint (``checkpoint_head``), read from its
    ``config.json`` and ``prm_config.json`` alone: a policy folder given as the PRM is refused before the sampling
    that comes first in best-of-N and beam search, not after it."""
    folder = Path(path).expanduser()

    def read(name: str) -> Any:
        try:
            return json.loads((folder / name).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise BadInput(f"{folder / name}: not readable JSON ({e})") from None

    config = read("config.json")
    if not isinstance(config, dict):
        raise BadInput(f"{path}: no such model folder (no config.json in it; expected a Hugging Face model folder)")
    saved = read(PRM_CONFIG)
    spec = None if saved is None else PRMSpec.from_dict(saved, f"{path}/{PRM_CONFIG}")
    if checkpoint_head(config, spec) is None:
        raise not_a_prm(str(path), config)


def write_spec(spec: PRMSpec, folder: str | os.PathLike) -> None:
    """Write ``spec`` as ``folder/prm_config.json`` (atomically)."""
    from posttrainlab.data.jsonl import write_json

    write_json(Path(folder) / PRM_CONFIG, asdict(spec))
