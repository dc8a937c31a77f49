"""Loading a PRM: the Qwen2.5-Math-PRM layout and the others, for scoring (``load_prm``) and training.

Hand-written because nothing else covers it: TRL removed its PRM trainer, ``transformers`` has no
class for Qwen2.5-Math-PRM (it ships as remote code, which docs/design.md forbids unless the user asks),
and the scoring side must read exactly the positions the training side labelled (``prm.format``).

**Layouts** ``load_prm`` reads: (a) any ``*ForTokenClassification`` checkpoint with 2 labels;
(b) ``Qwen2ForProcessRewardModel`` (Qwen2 backbone ``model.*``, ``score.0`` Linear -> ReLU ->
``score.2`` Linear to 2 classes; ``prm.heads``), natively from safetensors; (c) a causal LM with a
``prm_config.json`` saying ``head: verdict`` or ``head: result``. ``prm_config.json`` (written by ``posttrain
train prm``) also fixes the separator, chat/plain and system prompt; without it (a, b) the defaults of
``prm.format`` apply. Its schema (``PRMSpec``) and the list of heads live in ``prm/spec.py``, which needs no torch.

**Weights** are the checkpoint's or nothing: a scoring load (``load_prm``) refuses a checkpoint that
lacks a tensor the model needs or holds one in another shape (``BadInput`` naming them), where
``from_pretrained`` would fill it at random and score noise that differs at each load. Only
``load_for_training`` may make a new token-cls head (on a causal LM, an encoder, or a PRM without
one), and says so in one line instead of transformers' LOAD REPORT table. A verdict (or result) head is the LM
head: tied (the tiny model), it is the embedding; untied, a missing ``lm_head.weight`` is refused in
training too, since a random LM head has no verdict to fine-tune.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from transformers.models.qwen2.modeling_qwen2 import Qwen2Config

from posttrainlab.errors import BadInput
from posttrainlab.prm.format import ensure_separator, separator_id
from posttrainlab.prm.heads import Qwen2ForProcessRewardModel, make_head
from posttrainlab.prm.spec import (
    DEFAULT_SEPARATOR,
    DEFAULT_SYSTEM,
    HEADS,
    INPUT_FORMATS,
    PRM_CONFIG,
    QWEN_PRM,
    PRMSpec,
    architecture,
    checkpoint_head,
    not_a_prm,
)

log = logging.getLogger(__name__)

LABELS = {0: "wrong", 1: "correct"}


def _resolve(path: str) -> tuple[str, bool, str | None]:
    """``(source, local_only, offline_reason)`` for a folder or Hub id, as ``load_causal_lm`` resolves it."""
    from posttrainlab.data import hub
    from posttrainlab.models.loading import check_folder, is_local, probe_model

    if is_local(path):
        return str(check_folder(path)), True, None
    if hub.offline_env():
        return path, True, "HF_HUB_OFFLINE is set"
    reason = probe_model(path)
    return path, reason is not None, reason


def _read_json(source: str, name: str, local_only: bool) -> dict | None:
    """A JSON file of a model folder or Hub repo, or ``None`` when it has no such file."""
    folder = Path(source)
    if folder.is_dir():
        path = folder / name
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

        try:
            path = Path(hf_hub_download(source, name, local_files_only=local_only))
        except (EntryNotFoundError, LocalEntryNotFoundError):
            return None
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise BadInput(f"{source}: {name} is not readable JSON ({e})") from None


def _model_class(arch: str, head: str, source: str):
    """The class to load ``arch`` with for ``head``; ``BadInput`` for a mismatch."""
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

    if head in ("verdict", "result"):  # both read the LM's own next-token logits
        if arch == QWEN_PRM or arch.endswith("ForTokenClassification"):
            raise BadInput(f"{source}: head {head} needs a causal LM, not a {arch} checkpoint")
        return AutoModelForCausalLM
    return Qwen2ForProcessRewardModel if arch == QWEN_PRM else AutoModelForTokenClassification


def _load(path: str, *, head: str | None, dtype, trust_remote_code: bool, for_training: bool):
    """``(model, tokenizer, saved spec or None, head)``; ``head=None`` means "what the checkpoint is"."""
    from transformers import AutoTokenizer

    from posttrainlab.models.loading import load_weights, one_line_load_error, resolve_dtype

    source, local_only, offline_reason = _resolve(path)
    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_only}
    try:
        config = _read_json(source, "config.json", local_only)
        if config is None:  # offline and not cached, or not a model repo: let the mapping below say which
            raise OSError(f"{path}: no config.json")
        saved = _read_json(source, PRM_CONFIG, local_only)
        saved = None if saved is None else PRMSpec.from_dict(saved, f"{path}/{PRM_CONFIG}")
        arch = architecture(config)
        if head is None:  # scoring: the checkpoint must say what it is
            head = checkpoint_head(config, saved)
            if head is None:
                raise not_a_prm(path, config)
        cls = _model_class(arch, head, path)
        kwargs: dict[str, Any] = {"dtype": resolve_dtype(dtype), "use_safetensors": True, **common}
        if cls is Qwen2ForProcessRewardModel:
            kwargs["config"] = Qwen2Config.from_pretrained(source, local_files_only=local_only)
        elif head == "token-cls" and not arch.endswith("ForTokenClassification"):
            if not for_training:
                raise BadInput(f"{path}: a {arch} checkpoint has no token-classification head")
            kwargs |= {"num_labels": 2, "id2label": LABELS, "label2id": {v: k for k, v in LABELS.items()}}
        tokenizer = AutoTokenizer.from_pretrained(source, **common)
        model, weights = load_weights(cls, source, **kwargs)
        _check_weights(path, model, weights, head=head, training=for_training)
    except BadInput:
        raise
    except Exception as e:
        mapped = one_line_load_error(path, e, local_only=local_only, offline_reason=offline_reason)
        if mapped is None:
            raise
        raise mapped from None
    if head == "token-cls" and getattr(model.config, "num_labels", 2) != 2 and cls is not Qwen2ForProcessRewardModel:
        raise BadInput(f"{path}: a token-classification PRM needs 2 labels, this one has {model.config.num_labels}")
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise BadInput(f"{path}: tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return model, tokenizer, saved, head


def _check_weights(path: str, model, weights, *, head: str, training: bool) -> None:
    """Refuse randomly initialised tensors, except a new token-cls head in ``training``.

    The head is what lies outside the backbone (``base_model_prefix``): ``score``, ``classifier``.
    A verdict head is the LM head (``lm_head``), never made anew.
    """
    from posttrainlab.models.loading import listed

    fresh = weights.fresh
    if not fresh:
        weights.replay()  # only unexpected tensors, if any: transformers' report says which
        return
    backbone = getattr(model, "base_model_prefix", "")
    if training and head == "token-cls" and backbone and not any(k.startswith(backbone + ".") for k in fresh):
        modules = ", ".join(f"`{m}`" for m in sorted({k.split(".")[0] for k in fresh}))
        unused = f" (checkpoint tensors not used: {listed(sorted(weights.unexpected))})" if weights.unexpected else ""
        log.warning("prm: new token-classification head %s (2 classes) on top of %s; its weights start random%s",
                    modules, path, unused)  # fmt: skip
        return
    what = "train on" if training else "score with"
    raise BadInput(f"{path}: {weights.describe()}; refusing to {what} randomly initialised weights")


def load_prm(path: str | os.PathLike, *, dtype="float32", trust_remote_code: bool = False):
    """``(model, tokenizer, spec)`` of a PRM checkpoint in any of the three layouts, in eval mode.

    Every tensor comes from the checkpoint: one missing or of another shape is ``BadInput``.
    """
    path = str(path)
    model, tokenizer, saved, head = _load(
        path, head=None, dtype=dtype, trust_remote_code=trust_remote_code, for_training=False
    )
    spec = saved or PRMSpec(head=head, chat=bool(tokenizer.chat_template))
    if spec.input_format == "qwen" and separator_id(tokenizer, spec.separator) is None:
        raise BadInput(f"{path}: the tokenizer does not read the separator {spec.separator!r} as one token")
    make_head(spec, tokenizer)  # checks the verdict tokens
    model.eval()
    return model, tokenizer, spec


def load_for_training(
    path: str | os.PathLike,
    *,
    head: str,
    separator: str = DEFAULT_SEPARATOR,
    chat: bool | None = None,
    system_prompt: str = DEFAULT_SYSTEM,
    yes_token: str = "+",
    no_token: str = "-",
    trust_remote_code: bool = False,
    input_format: str = "qwen",
    instruction: str = "",
):
    """``(model, tokenizer, spec)`` to train a PRM with ``head`` from a causal LM, an encoder or a PRM.

    A token-cls head on a model without one gets a fresh 2-label head, announced in one warning line
    (any other tensor the checkpoint lacks is ``BadInput``, as in ``load_prm``). The separator is added as a
    special token when the tokenizer lacks it, and the embeddings are resized to match.
    ``chat=None`` uses the tokenizer's chat template when it has one. ``input_format="policy"`` reads the
    policy's own prompt (``instruction`` + question) and lines (``prm.policy_format``): no separator is
    added and the embeddings stay as they are.
    """
    if head not in HEADS:
        raise BadInput(f"head {head!r}: choose one of {', '.join(HEADS)}")
    model, tokenizer, _, _ = _load(
        str(path), head=head, dtype="float32", trust_remote_code=trust_remote_code, for_training=True
    )
    added = input_format == "qwen" and ensure_separator(tokenizer, separator)
    if added and len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    spec = PRMSpec(
        head=head,
        separator=separator,
        chat=bool(tokenizer.chat_template) if chat is None else chat,
        system_prompt=system_prompt,
        yes_token=yes_token,
        no_token=no_token,
        input_format=input_format,
        instruction=instruction,
    )
    if spec.input_format not in INPUT_FORMATS:
        raise BadInput(f"input_format {input_format!r}: choose one of {', '.join(INPUT_FORMATS)}")
    if spec.input_format == "qwen" and spec.chat and not tokenizer.chat_template:
        raise BadInput(f"{path}: chat_template is true but the tokenizer has no chat template")
    make_head(spec, tokenizer)
    return model, tokenizer, spec
