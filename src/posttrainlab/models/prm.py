"""Process reward models: the one prompt format, the two heads, the Qwen2.5-Math-PRM layout, loading.

Hand-written because nothing else covers it: TRL removed its PRM trainer, ``transformers`` has no
class for Qwen2.5-Math-PRM (it ships as remote code, which docs/design.md forbids unless the user asks),
and the scoring side must read exactly the positions the training side labelled. So the format lives
here once (``format_solution``) and both ``posttrainlab.train.prm`` and ``posttrainlab.prm.PRM`` call it.

**Format** (docs/design.md "PRM conventions", Qwen2.5-Math-PRM's usage): one sequence per solution, each
step followed by the separator (default ``<extra_0>``, a special token, so tokenisation splits on it).

- with a chat template (``spec.chat``): the tokenizer's template over
  ``[system: spec.system_prompt (omitted when empty), user: question,
  assistant: step_1 + SEP + step_2 + SEP + ... + step_n + SEP]``, no generation prompt, tokenised
  without added special tokens (the template writes them) — Qwen2.5-Math-PRM's own recipe;
- plain: ``question + "\\n" + step_1 + SEP + ... + step_n + SEP``, tokenised with the tokenizer's
  special tokens (a BOS where it adds one).
- ``spec.input_format == "policy"``: the policy's own prompt and lines, no separator (``prm_policy_format``).

Steps are used verbatim (not stripped). A question or step holding the separator text is refused:
the separator count would no longer name the steps.

**Heads**, both reduced to two-class logits ``[..., 2]`` (index 0 = wrong / "no", 1 = correct /
"yes"), read at each separator token:

- ``token-cls``: a 2-label token-classification model (``*ForTokenClassification``, or
  Qwen2.5-Math-PRM's ``score`` MLP); reward = softmax index 1, as Qwen2.5-Math-PRM reads it.
- ``verdict``: a causal LM; the next-token logits at the separator for the two verdict tokens, the
  rest of the vocabulary dropped (P(yes) = softmax over {no, yes}). Each verdict string must be one
  token. Defaults ``+`` / ``-`` (Math-Shepherd's tags): single bytes in the tiny byte-level
  tokenizer and single tokens in Qwen's. The "first token of ' yes' / ' no'" trick is refused, not
  used: on a byte-level tokenizer both start with the same space byte.

**Layouts** ``load_prm`` reads: (a) any ``*ForTokenClassification`` checkpoint with 2 labels;
(b) ``Qwen2ForProcessRewardModel`` (Qwen2 backbone ``model.*``, ``score.0`` Linear -> ReLU ->
``score.2`` Linear to 2 classes), natively from safetensors; (c) a causal LM with a ``prm_config.json``
saying ``head: verdict``. ``prm_config.json`` (written by ``posttrain train prm``) also fixes the
separator, chat/plain and system prompt; without it (a, b) the defaults above apply. Its schema
(``PRMSpec``) and the list of heads live in ``models/prm_spec.py``, which needs no torch.

**Weights** are the checkpoint's or nothing: a scoring load (``load_prm``) refuses a checkpoint that
lacks a tensor the model needs or holds one in another shape (``BadInput`` naming them), where
``from_pretrained`` would fill it at random and score noise that differs at each load. Only
``load_for_training`` may make a new token-cls head (on a causal LM, an encoder, or a PRM without
one), and says so in one line instead of transformers' LOAD REPORT table. A verdict head is the LM
head: tied (the tiny model), it is the embedding; untied, a missing ``lm_head.weight`` is refused in
training too, since a random LM head has no verdict to fine-tune.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel

from posttrainlab.errors import BadInput
from posttrainlab.models.prm_spec import (
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


# ---------------------------------------------------------------------------------------------- format


@dataclass(frozen=True)
class Encoded:
    """A tokenised solution: ids, the index of each step's separator token, and (on request) offsets."""

    input_ids: list[int]
    separators: list[int]
    step_spans: list[tuple[int, int]]  # character span of each step's text in the formatted string
    offsets: list[tuple[int, int]] | None = None


def format_solution(tokenizer, spec: PRMSpec, question: str, steps: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The PRM input text of a solution and the character span of each step in it (module docstring).

    The one function that formats a solution: training labels and scoring read the same separators.
    """
    sep = spec.separator
    if sep in question:
        raise ValueError(f"the question contains the separator {sep!r}")
    for k, step in enumerate(steps):
        if sep in step:
            raise ValueError(f"step {k} contains the separator {sep!r}")
    body = "".join(step + sep for step in steps)
    if spec.chat:
        messages = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": body}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        start = text.rfind(body)
        if start < 0:
            raise ValueError("the chat template does not copy the assistant turn verbatim; set chat_template=false")
    else:
        text = question + "\n" + body
        start = len(question) + 1
    spans = []
    for step in steps:
        spans.append((start, start + len(step)))
        start += len(step) + len(sep)
    return text, spans


def separator_id(tokenizer, separator: str) -> int | None:
    """The id of ``separator`` when the tokenizer reads it as one token, else ``None``."""
    ids = tokenizer.encode(separator, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def encode_solution(tokenizer, spec: PRMSpec, question: str, steps: list[str], *, offsets: bool = False) -> Encoded:
    """Tokenise ``format_solution``'s text; ``ValueError`` unless there is exactly one separator per step.

    ``spec.input_format == "policy"``: the policy's own prompt and lines instead (``models.prm_policy_format``).
    """
    if spec.input_format == "policy":
        from posttrainlab.models.prm_policy_format import encode_policy_solution

        return Encoded(*encode_policy_solution(tokenizer, spec, question, steps, offsets=offsets))
    text, spans = format_solution(tokenizer, spec, question, steps)
    enc = tokenizer(text, add_special_tokens=not spec.chat, return_offsets_mapping=offsets)
    ids = list(enc["input_ids"])
    sep_id = separator_id(tokenizer, spec.separator)
    seps = [i for i, t in enumerate(ids) if t == sep_id]
    if len(seps) != len(steps):
        raise ValueError(f"{len(steps)} steps but {len(seps)} separator tokens after tokenisation")
    return Encoded(ids, seps, spans, [tuple(o) for o in enc["offset_mapping"]] if offsets else None)


def ensure_separator(tokenizer, separator: str) -> bool:
    """Add ``separator`` as a special token when the tokenizer does not read it as one; True if added."""
    if separator_id(tokenizer, separator) is not None and separator in tokenizer.get_vocab():
        return False
    tokenizer.add_tokens([separator], special_tokens=True)
    return True


def chat_messages(tokenizer, spec: PRMSpec, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of a judge-prompt row (Polaris MC ``messages``), ending where the verdict would be generated.

    A trailing assistant turn (the card's placeholder ``yes``) is dropped; with a chat template the
    generation prompt is added, so the last position's next-token logits are the verdict's.
    """
    turns = messages[:-1] if messages and messages[-1]["role"] == "assistant" else messages
    if spec.chat:
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    text = "\n".join(t["content"] for t in turns) + "\n"
    return list(tokenizer(text)["input_ids"])


# ----------------------------------------------------------------------------------------------- heads


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    """Qwen2.5-Math-PRM's layout, loadable without remote code: ``model.*`` + ``score`` MLP to 2 classes.

    Same module names as the published checkpoints (``score.0`` Linear(h, h), ReLU, ``score.2``
    Linear(h, 2)), so their safetensors load key for key; ``forward`` returns per-token logits.
    """

    def __init__(self, config: Qwen2Config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        h = config.hidden_size
        self.score = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 2))
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def set_input_embeddings(self, value):
        self.model.embed_tokens = value

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, **kwargs):
        kwargs.pop("use_cache", None)
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=False,
            **kwargs,
        )
        return TokenClassifierOutput(logits=self.score(out.last_hidden_state))


class TokenClsHead:
    """Two-class logits of a 2-label token-classification model."""

    kind = "token-cls"

    def logits(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits[..., :2]


class VerdictHead:
    """Two-class logits ``[no, yes]`` out of a causal LM's next-token logits."""

    kind = "verdict"

    def __init__(self, no_id: int, yes_id: int):
        self.ids = [no_id, yes_id]

    def logits(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits[..., self.ids]


def verdict_ids(tokenizer, spec: PRMSpec) -> tuple[int, int]:
    """``(no_id, yes_id)``: each verdict string must be exactly one token, and the two must differ."""
    ids = []
    for name in ("no_token", "yes_token"):
        text = getattr(spec, name)
        got = tokenizer.encode(text, add_special_tokens=False)
        if len(got) != 1:
            raise BadInput(
                f"verdict {name.split('_')[0]} {text!r} is {len(got)} tokens for this tokenizer; "
                "choose a string that is one token (e.g. '+' / '-')"
            )
        ids.append(got[0])
    if ids[0] == ids[1]:
        raise BadInput(f"verdict tokens {spec.yes_token!r} and {spec.no_token!r} are the same token")
    return ids[0], ids[1]


def make_head(spec: PRMSpec, tokenizer):
    if spec.head == "verdict":
        return VerdictHead(*verdict_ids(tokenizer, spec))
    return TokenClsHead()


def is_causal(config) -> bool:
    """Whether a model attends left to right only (so a step's score cannot see later steps).

    A model type with a causal-LM class and no masked-LM class (Qwen2, Llama, GPT-2 ...), or a config
    flagged ``is_decoder``; BERT-like encoders have both classes and are bidirectional.
    """
    from transformers.models.auto import modeling_auto as auto

    if getattr(config, "is_decoder", False):
        return True
    kind = getattr(config, "model_type", None)
    return kind in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and kind not in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES


# --------------------------------------------------------------------------------------------- loading


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

    if head == "verdict":
        if arch == QWEN_PRM or arch.endswith("ForTokenClassification"):
            raise BadInput(f"{source}: head verdict needs a causal LM, not a {arch} checkpoint")
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
    policy's own prompt (``instruction`` + question) and lines (``models.prm_policy_format``): no separator is
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
