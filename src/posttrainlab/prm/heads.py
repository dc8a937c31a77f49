"""The PRM's heads and Qwen2.5-Math-PRM's model class, both reduced to two-class logits ``[..., 2]``.

Index 0 = wrong / "no", 1 = correct / "yes", read at each separator token (``prm.format``):

- ``token-cls``: a 2-label token-classification model (``*ForTokenClassification``, or
  Qwen2.5-Math-PRM's ``score`` MLP, ``Qwen2ForProcessRewardModel``); reward = softmax index 1, as
  Qwen2.5-Math-PRM reads it.
- ``verdict``: a causal LM; the next-token logits at the separator for the two verdict tokens, the
  rest of the vocabulary dropped (P(yes) = softmax over {no, yes}). Each verdict string must be one
  token. Defaults ``+`` / ``-`` (Math-Shepherd's tags): single bytes in the tiny byte-level
  tokenizer and single tokens in Qwen's. The "first token of ' yes' / ' no'" trick is refused, not
  used: on a byte-level tokenizer both start with the same space byte.

Hand-written because ``transformers`` has no class for Qwen2.5-Math-PRM (it ships as remote code, which
docs/design.md forbids unless the user asks); the losses on these logits are ``prm.losses``'.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2Config, Qwen2Model, Qwen2PreTrainedModel

from posttrainlab.errors import BadInput
from posttrainlab.prm.spec import PRMSpec


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
