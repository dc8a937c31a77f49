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
- ``result``: a causal LM; P(step k correct) = the LM's own probability of the step's **result** tokens
  (``prm.results``: the ``c`` of ``a op b = c``, the ``N`` of ``Answer: N``, any other line whole), read at the
  step's position as the two logits ``[log(1 - P), log P]``. Untrained, it is the zero-training baseline verifier
  (``prm.baseline``) exactly; trained on step labels, the cross-entropy is ``-log P`` on a right step (likelihood
  of its result) and ``-log(1 - P)`` on a wrong one (unlikelihood), so the PRM starts from the policy's own
  arithmetic instead of a random head that has to relearn it. No new weights; the batch carries ``segments``
  (each result token's read position, ``prm.results.segments``).

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
    reads_results = False  # needs no ``segments``

    def logits(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, segments=None) -> torch.Tensor:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits[..., :2]


class VerdictHead:
    """Two-class logits ``[no, yes]`` out of a causal LM's next-token logits."""

    kind = "verdict"
    reads_results = False

    def __init__(self, no_id: int, yes_id: int):
        self.ids = [no_id, yes_id]

    def logits(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, segments=None) -> torch.Tensor:
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.logits[..., self.ids]


class ResultHead:
    """Two-class logits ``[log(1 - P), log P]``, P = the causal LM's probability of each step's result tokens.

    ``segments`` ``[B, T]``: each result token's read position, ``NO_STEP`` (-1) elsewhere
    (``prm.results.segments``). The log-probabilities of one step's result tokens are summed into its read
    position; every other position gets P = 1 - 1e-6 (no label is ever read there).
    """

    kind = "result"
    reads_results = True
    #: log P is held at or below this, so that log(1 - P) stays finite (about -13.8)
    CEILING = -1e-6

    def logits(self, model, input_ids: torch.Tensor, attention_mask: torch.Tensor, segments=None) -> torch.Tensor:
        if segments is None:
            raise ValueError("the result head needs each result token's read position (segments)")
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits[:, :-1].float()
        nxt = input_ids[:, 1:].to(out.device)
        token_logp = out.gather(-1, nxt.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(out, dim=-1)  # of token t + 1
        seg = segments[:, 1:].to(out.device)
        summed = torch.zeros(input_ids.shape, dtype=torch.float32, device=out.device)
        summed.scatter_add_(1, seg.clamp(min=0), torch.where(seg >= 0, token_logp, torch.zeros_like(token_logp)))
        logp = summed.clamp(max=self.CEILING)
        return torch.stack([torch.log(-torch.expm1(logp)), logp], dim=-1)


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
    if spec.head == "result":
        return ResultHead()
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
