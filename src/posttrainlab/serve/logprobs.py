"""Token log-probabilities for ``posttrain serve``: one scoring pass, and OpenAI's two shapes of them.

What is reported, and why:

- **The model's own distribution**: each token's log-probability is ``log_softmax`` of the model's
  logits over the full vocabulary at temperature 1, before ``temperature``, ``top_p``, ``top_k`` or
  ``min_p`` (vLLM's default, ``raw_logprobs``), so a number does not depend on how the token was drawn,
  and a prompt scored with ``echo`` gets what a generated token would. ``top`` is the ``k`` most likely
  tokens of that distribution, most likely first.
- **One scoring forward pass** (:func:`score`) over prompt + generated tokens, after generation, rather
  than the sampler's per-step numbers: the sampler (``generation.shared_prefix``) records only the drawn
  token's log-probability, while clients ask for the top ``k`` and, with ``echo``, for the prompt's own
  tokens (lm-evaluation-harness's log-likelihood requests are exactly that). Rows are left-padded with
  position ids from the mask (a padded row scores what it would alone, as ``runners.policy.sequence_logprobs``
  does) and batched by a budget of scored positions, so a long prompt of a 49k-token vocabulary does
  not hold gigabytes of logits. It runs in the batcher's worker thread, between generation calls.
- **OpenAI's shapes**: chat's ``choices[].logprobs.content = [{token, logprob, bytes, top_logprobs}]``
  (:func:`chat_content`) and legacy completions' ``{tokens, token_logprobs, top_logprobs, text_offset}``
  (:func:`completion_logprobs`), where a position's ``top_logprobs`` dict also holds the chosen token (so up
  to ``k + 1`` entries, as OpenAI documents) and the first token of an echoed prompt, which has no
  context, has ``null`` for both.
- **Token names** (:class:`TokenNames`): ``token`` is the token's text (``decode([id])``; a special token's
  own text); a byte-level BPE token that is part of a UTF-8 character is named ``bytes:\\xNN...`` as OpenAI
  names it, so no two tokens of such a tokenizer share a name (lm-evaluation-harness keys dicts by it).
  ``bytes`` are the token's real bytes for a byte-level BPE (GPT-2, SmolLM2, the tiny tokenizer), else
  its text's UTF-8. ``text_offset`` counts the characters the tokens before it spell in the returned text
  (special tokens spell none), from 0 with ``echo``, else from the prompt's length (OpenAI's rule).
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass

#: The most top log-probabilities one position may ask for (OpenAI's chat limit, vLLM's default ``max_logprobs``).
MAX_LOGPROBS = 20

#: Per forward pass: rows x positions whose logits are kept, and rows x padded width (the activations).
POSITION_BUDGET, TOKEN_BUDGET = 4096, 16384


@dataclass(frozen=True)
class TokenLogprob:
    """One position: its token, its log-probability and the ``k`` most likely tokens (None: no context)."""

    token: int
    logprob: float | None
    top: tuple[tuple[int, float], ...] | None


def score(
    model, pad_id: int, sequences: Sequence[Sequence[int]], starts: Sequence[int], k: int
) -> list[list[TokenLogprob]]:
    """For each sequence, its positions from ``starts[i]`` on, scored (module docstring).

    Position ``t`` gets the log-probability of ``sequence[t]`` given ``sequence[:t]``; position 0 (scored
    when ``starts[i] == 0``) has no context and gets None.
    """
    import inspect

    import torch

    from posttrainlab.generation.prompts import left_pad

    out: list[list[TokenLogprob]] = [[] for _ in sequences]
    todo = []
    for i, (seq, start) in enumerate(zip(sequences, starts, strict=True)):
        if start == 0 and seq:
            out[i].append(TokenLogprob(seq[0], None, None))
        if len(seq) > max(start, 1):
            todo.append(i)
    keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
    todo.sort(key=lambda i: -len(sequences[i]))
    device = model.device
    with torch.inference_mode():
        kept = [len(s) - max(t, 1) + 1 for s, t in zip(sequences, starts, strict=True)]
        for batch in _batches(todo, [len(s) for s in sequences], kept):
            ids, mask = left_pad([list(sequences[i]) for i in batch], pad_id)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            keep = max(len(sequences[i]) - max(starts[i], 1) for i in batch) + 1
            kwargs = {"logits_to_keep": keep} if keeps_logits else {}
            logits = model(
                input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), **kwargs
            ).logits[:, -keep:]
            for j, i in enumerate(batch):
                seq, first = sequences[i], max(starts[i], 1)
                n = len(seq) - first
                # the token at position t is predicted by the logits at t - 1
                logp = logits[j, keep - n - 1 : keep - 1].float().log_softmax(-1)
                targets = torch.tensor(seq[first:], device=logp.device)
                chosen = logp.gather(-1, targets[:, None])[:, 0].tolist()
                if k > 0:
                    values, indices = logp.topk(min(k, logp.shape[-1]), dim=-1)
                    pairs = zip(indices.tolist(), values.tolist(), strict=True)
                    tops = [tuple(zip(r, v, strict=True)) for r, v in pairs]
                else:
                    tops = [()] * n
                out[i] += [TokenLogprob(t, lp, top) for t, lp, top in zip(seq[first:], chosen, tops, strict=True)]
    return out


def _batches(order: list[int], width: list[int], kept: list[int]) -> list[list[int]]:
    """``order`` (longest first) cut into batches within both budgets (a row over them runs alone).

    >>> _batches([0, 1, 2], width=[9000, 8000, 10], kept=[5, 5, 5])
    [[0], [1, 2]]
    """
    batches: list[list[int]] = []
    for i in order:
        if batches:
            rows = len(batches[-1]) + 1
            most_kept = max(kept[j] for j in (*batches[-1], i))
            if rows * width[batches[-1][0]] <= TOKEN_BUDGET and rows * most_kept <= POSITION_BUDGET:
                batches[-1].append(i)
                continue
        batches.append([i])
    return batches


class TokenNames:
    """Each token id's ``token`` string, ``bytes`` and text length, as the responses show them (module docstring)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        decoder = getattr(getattr(tokenizer, "backend_tokenizer", None), "decoder", None)
        self._byte_level = type(decoder).__name__ == "ByteLevel"
        if self._byte_level:
            from posttrainlab.models.tokenizer import bytes_to_unicode

            self._unbyte = {c: b for b, c in bytes_to_unicode().items()}
        self._special = set(getattr(tokenizer, "all_special_ids", ()) or ())
        self._cache: dict[int, tuple[str, bytes]] = {}

    def name(self, token: int) -> tuple[str, bytes]:
        """``(token string, its bytes)``."""
        if token not in self._cache:
            self._cache[token] = self._name(token)
        return self._cache[token]

    def _name(self, token: int) -> tuple[str, bytes]:
        text = self.tokenizer.decode([token], skip_special_tokens=False)
        raw = text.encode("utf-8")
        if self._byte_level and token not in self._special:
            piece = self.tokenizer.convert_ids_to_tokens(token)
            if isinstance(piece, str) and piece and all(c in self._unbyte for c in piece):
                raw = bytes(self._unbyte[c] for c in piece)
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
        return text, raw

    def text_bytes(self, token: int) -> bytes:
        """The bytes the token adds to a decoded text (none for a special token, which decoding skips)."""
        return b"" if token in self._special else self.name(token)[1]

    def entry(self, token: int, logprob: float) -> dict:
        text, raw = self.name(token)
        return {"token": text, "logprob": logprob, "bytes": list(raw)}


def chat_content(names: TokenNames, scored: Sequence[TokenLogprob]) -> list[dict]:
    """Chat's ``logprobs.content``: one entry per token, with its ``top_logprobs`` list."""
    out = []
    for p in scored:
        assert p.logprob is not None  # chat scores generated tokens only: every one has a context
        out.append({**names.entry(p.token, p.logprob), "top_logprobs": [names.entry(t, lp) for t, lp in p.top or ()]})
    return out


def completion_logprobs(names: TokenNames, scored: Sequence[TokenLogprob], first_offset: int) -> dict:
    """Legacy completions' ``logprobs``: parallel lists, ``text_offset`` from ``first_offset`` (module docstring)."""
    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    chars = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset = first_offset
    for p in scored:
        tokens.append(names.name(p.token)[0])
        token_logprobs.append(p.logprob)
        offsets.append(offset)
        offset += len(chars.decode(names.text_bytes(p.token)))
        if p.logprob is None:
            top_logprobs.append(None)
            continue
        top: dict[str, float] = {}
        for t, lp in (*(p.top or ()), (p.token, p.logprob)):  # the chosen token too: up to k + 1 entries
            top.setdefault(names.name(t)[0], lp)
        top_logprobs.append(top)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs, "text_offset": offsets}


__all__ = [
    "MAX_LOGPROBS",
    "TokenLogprob",
    "TokenNames",
    "chat_content",
    "completion_logprobs",
    "score",
]
