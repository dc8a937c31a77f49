"""Shared-prefix sampling: N continuations of one prefix from ONE prefill, its KV cache expanded N times.

Monte-Carlo labelling (``label.mc``) samples N continuations from every prefix of a reasoning trace.
``model.generate(num_return_sequences=N)`` expands ``input_ids`` N times *before* the first forward
pass, so the prompt and prefix are encoded N times; for a 1k-token prefix and N = 16 that prefill is
most of the work. Here each prefix is run through the model once (``prefill``), its per-layer keys and
values are repeated N times along the batch (``DynamicCache.batch_repeat_interleave``), and the N rows
are decoded together from there. Written by hand because transformers' ``generate`` has no way to
share one prompt's prefill between its return sequences, and because the per-prefix seeding below
(what makes a resumed or sharded labelling run repeat exactly) is not something ``generate`` offers.

The contract (tested in tests/generation/test_shared_prefix.py):

- **A request** is ``PrefixRequest(prompt, prefix, seed)``: ``prompt`` a chat (rendered with the
  model's chat template, assistant turn opened) or a ready string, ``prefix`` the assistant text
  already written, which the continuations follow (it is tokenized on its own and appended, as
  ``eval.policy.sequence_logprobs`` does); a continuation is the new text only.
- **Distribution**: each of the N rows is an independent sample of the policy's continuation, drawn
  token by token from ``softmax(logits / temperature)`` restricted to the top-p nucleus (transformers'
  ``TopPLogitsWarper`` rule, no top-k), until an eos token, a ``stop`` string or ``max_new_tokens``.
  The logits at every step equal those of a fresh forward pass over prompt + prefix + the tokens so far.
- **Seeds**: every request draws from its own ``torch.Generator`` seeded with ``request.seed``, so a
  request's continuations do not depend on the other requests in the call (up to float rounding of
  batched matrix products), nor on the caller's random state, which is left alone.
- **temperature 0** is greedy: one row per prefix is decoded and its text repeated N times; it equals
  ``TransformersBackend.generate`` greedy on the prompt text with the prefix appended.
- **Counting**: :class:`SamplingStats` adds up prefills (one per request), prefill tokens (real
  tokens, padding excluded), padded prefill positions, decode steps and sequences, so a caller can
  show one prefill per prefix; :func:`count_forward_tokens` counts the same at the model's forward
  from outside, for any way of generating.

The expanded cache lives in buffers with room for the new tokens (``GrowingLayer``): a decode step
writes one position in place instead of concatenating (which copies the whole N-fold cache every
step). Finished rows are dropped from the batch once they are a quarter of it (dropping copies the
cache, so it is not done for every row that ends), so a long straggler does not keep them computing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from posttrainlab.generation import Prompt, truncate_at_stop


@dataclass(frozen=True)
class PrefixRequest:
    """Continue ``prefix`` (assistant text already written) after ``prompt``, sampling with ``seed``."""

    prompt: Prompt
    prefix: str = ""
    seed: int = 0


@runtime_checkable
class PrefixSampler(Protocol):
    """A backend that continues prefixes itself (transformers, vLLM, OpenAI-compatible endpoints).

    Returns, per request in order, its ``n`` continuations (new text only, cut before any stop string).
    """

    def sample_continuations(
        self,
        requests: Sequence[PrefixRequest],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        stop: list[str] | None = None,
    ) -> list[list[str]]: ...


@dataclass
class SamplingStats:
    """Work done by shared-prefix sampling, summed over calls (see the module docstring)."""

    requests: int = 0
    prefills: int = 0
    prefill_tokens: int = 0
    prefill_positions: int = 0
    decode_steps: int = 0
    decode_tokens: int = 0
    sequences: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from any parts (run seed, problem id, ...): the same parts give the same seed.

    31 bits so every backend takes it (OpenAI-compatible servers, vLLM and torch all accept it).

    >>> derive_seed(0, "rl_train-0001", 0, 2) == derive_seed(0, "rl_train-0001", 0, 2)
    True
    >>> derive_seed(0, "a") != derive_seed(1, "a")
    True
    """
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def continuation_text(tokenizer, prompt: Prompt, prefix: str) -> str:
    """The prompt rendered as the model sees it (chat template, assistant turn opened) with the prefix after it."""
    from posttrainlab.generation.transformers_backend import plain_chat, render_prompt

    if tokenizer is None:
        return (prompt if isinstance(prompt, str) else plain_chat(prompt)) + prefix
    return render_prompt(tokenizer, prompt)[0] + prefix


def encode_request(tokenizer, request: PrefixRequest) -> list[int]:
    """Token ids of prompt + prefix: the prompt as ``encode_prompt`` encodes it, the prefix on its own after it."""
    from posttrainlab.generation.transformers_backend import encode_prompt

    ids = encode_prompt(tokenizer, request.prompt)
    if request.prefix:
        ids += list(tokenizer(request.prefix, add_special_tokens=False)["input_ids"])
    return ids


def top_p_filter(scores, top_p: float):
    """``scores`` with tokens outside the top-p nucleus set to -inf (transformers' ``TopPLogitsWarper`` rule).

    >>> import torch
    >>> top_p_filter(torch.log(torch.tensor([[0.5, 0.3, 0.2]])), 0.7).isinf().tolist()
    [[False, False, True]]
    """
    import torch

    if top_p >= 1.0:
        return scores
    sorted_scores, order = torch.sort(scores, descending=False)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - top_p)
    remove[..., -1:] = False  # keep at least the most likely token
    return scores.masked_fill(remove.scatter(-1, order, remove), float("-inf"))


def _stopped(tokenizer, tokens: list[int], stop: list[str], window: int) -> bool:
    tail = tokenizer.decode(tokens[-window:], skip_special_tokens=True)
    return any(s and s in tail for s in stop)


def sample_shared_prefix(
    model,
    tokenizer,
    requests: Sequence[PrefixRequest],
    *,
    n: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    stop: list[str] | None = None,
    eos_ids: Sequence[int] = (),
    batch_size: int = 32,
    stats: SamplingStats | None = None,
    return_tokens: bool = False,
    preallocate: bool = True,
    on_batch: Callable[[int], None] | None = None,
):
    """``n`` continuations per request, one prefill per request (module docstring for the contract).

    ``batch_size`` counts requests per prefill (the decode batch holds up to ``batch_size * n`` rows).
    With ``return_tokens`` the new token ids come back too: ``(texts, tokens)``. ``preallocate=False``
    keeps transformers' concatenating cache (for ``bench/bench_mc_sampling.py``, which separates the gains).
    ``on_batch(k)`` is called after each prefill batch of ``k`` requests (progress bars).
    """
    import torch

    from posttrainlab.generation.transformers_backend import check_sampling, length_sorted_batches

    check_sampling(n, temperature, top_p, max_new_tokens)
    stats = stats if stats is not None else SamplingStats()
    encoded = [encode_request(tokenizer, r) for r in requests]
    texts: list[list[str]] = [[] for _ in requests]
    tokens_out: list[list[list[int]]] = [[] for _ in requests]
    greedy = temperature == 0
    per_prefix = 1 if greedy else n
    window = max((len(s) for s in stop or [] if s), default=0) + 4
    device = model.device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    stops = set(eos_ids)
    with torch.inference_mode():
        for batch in length_sorted_batches([len(e) for e in encoded], batch_size):
            rows = _decode_batch(
                model,
                [encoded[i] for i in batch],
                [requests[i].seed for i in batch],
                per_prefix=per_prefix,
                greedy=greedy,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                stops=stops,
                stop_check=(lambda toks: _stopped(tokenizer, toks, stop, window)) if stop else None,
                pad_id=pad_id,
                device=device,
                stats=stats,
                preallocate=preallocate,
            )
            for j, i in enumerate(batch):
                mine = rows[j * per_prefix : (j + 1) * per_prefix]
                decoded = [truncate_at_stop(tokenizer.decode(t, skip_special_tokens=True), stop) for t in mine]
                texts[i] = decoded * n if greedy else decoded
                tokens_out[i] = mine * n if greedy else mine
            if on_batch is not None:
                on_batch(len(batch))
    stats.requests += len(requests)
    stats.sequences += len(requests) * n
    return (texts, tokens_out) if return_tokens else texts


@functools.cache
def _growing_layer_class():
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values live in a buffer with room to grow: appending writes in place.

        ``DynamicLayer.update`` concatenates, copying the whole cache at every decode step (for N rows of a
        long prefix that copy, not the arithmetic, is most of the decode time on a CPU). Here ``keys`` and
        ``values`` are views of the filled part of a preallocated buffer.
        """

        def __init__(self, keys, values, repeats: int, extra: int):
            super().__init__()
            rows, heads, length, dim = keys.shape
            self._k = keys.new_empty(rows * repeats, heads, length + extra, dim)
            self._v = values.new_empty(rows * repeats, values.shape[1], length + extra, values.shape[-1])
            self._k.view(rows, repeats, heads, length + extra, dim)[:, :, :, :length] = keys[:, None]
            self._v.view(rows, repeats, *self._v.shape[1:])[:, :, :, :length] = values[:, None]
            self.length, self.device, self.is_initialized = length, keys.device, True
            self._views()

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

        def update(self, key_states, value_states, *args, **kwargs):
            import torch

            new = key_states.shape[-2]
            if self.length + new > self._k.shape[-2]:  # out of room: grow (not reached by the sampler)
                self._k = torch.cat([self._k, torch.empty_like(self._k)], dim=-2)
                self._v = torch.cat([self._v, torch.empty_like(self._v)], dim=-2)
            self._k[:, :, self.length : self.length + new] = key_states
            self._v[:, :, self.length : self.length + new] = value_states
            self.length += new
            self._views()
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    return GrowingLayer


def _preallocate(cache, repeats: int, extra: int) -> None:
    """Replace each filled layer of ``cache`` by its ``repeats``-fold expansion, ``extra`` positions longer."""
    from transformers.cache_utils import DynamicLayer

    layer_class = _growing_layer_class()
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.get_seq_length() > 0:
            cache.layers[i] = layer_class(layer.keys, layer.values, repeats, extra)
        elif repeats > 1:  # any other kind of layer (sliding window, ...): transformers' own expansion
            layer.batch_repeat_interleave(repeats)


def _decode_batch(
    model,
    prompts: list[list[int]],
    seeds: list[int],
    *,
    per_prefix: int,
    greedy: bool,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    stops: set[int],
    stop_check,
    pad_id: int,
    device,
    stats: SamplingStats,
    preallocate: bool = True,
) -> list[list[int]]:
    """Prefill ``prompts`` once, expand each to ``per_prefix`` rows, decode; new token ids per row."""
    import torch
    from transformers import DynamicCache

    from posttrainlab.generation.transformers_backend import left_pad

    ids, mask = left_pad(prompts, pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()  # filled in place by the forward pass
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, **keep_last)
    stats.prefills += len(prompts)
    stats.prefill_tokens += int(mask.sum())
    stats.prefill_positions += int(mask.numel())
    logits = out.logits[:, -1, :].float()
    if preallocate:
        _preallocate(cache, per_prefix, max_new_tokens)  # the N-fold expansion, with room for the new tokens
    elif per_prefix > 1:
        cache.batch_repeat_interleave(per_prefix)
    if per_prefix > 1:
        mask = mask.repeat_interleave(per_prefix, dim=0)
        logits = logits.repeat_interleave(per_prefix, dim=0)
    total = len(prompts) * per_prefix
    owner = [r // per_prefix for r in range(total)]  # the prompt each row continues
    generators = []
    if not greedy:
        for seed in seeds:
            g = torch.Generator(device="cpu")
            g.manual_seed(seed)
            generators.append(g)
    new_tokens: list[list[int]] = [[] for _ in range(total)]
    batch = list(range(total))  # the row ids in the cache, in cache order
    alive = [True] * total
    filler = min(stops) if stops else pad_id  # fed to finished rows until they are dropped from the cache
    for step in range(max_new_tokens):
        live = [k for k, row in enumerate(batch) if alive[row]]
        live_logits = logits if len(live) == len(batch) else logits[live]
        if greedy:
            picks = live_logits.argmax(dim=-1).tolist()
        else:
            probs = top_p_filter(live_logits / temperature, top_p).softmax(dim=-1).cpu()
            picks = [0] * len(live)
            start = 0
            while start < len(live):  # the live rows of one prompt are contiguous: one draw per prompt
                who = owner[batch[live[start]]]
                end = start
                while end < len(live) and owner[batch[live[end]]] == who:
                    end += 1
                picks[start:end] = torch.multinomial(probs[start:end], 1, generator=generators[who])[:, 0].tolist()
                start = end
        chosen = [filler] * len(batch)
        for k, token in zip(live, picks, strict=True):
            row = batch[k]
            chosen[k] = token
            if token in stops:
                alive[row] = False
                continue
            new_tokens[row].append(token)
            if stop_check is not None and stop_check(new_tokens[row]):
                alive[row] = False
        n_alive = sum(alive[row] for row in batch)
        if n_alive == 0 or step == max_new_tokens - 1:
            break
        if 4 * (len(batch) - n_alive) >= len(batch):  # drop finished rows once they are a quarter of the batch
            keep = [k for k, row in enumerate(batch) if alive[row]]
            index = torch.tensor(keep, device=device)
            cache.batch_select_indices(index)
            mask = mask[index]
            batch = [batch[k] for k in keep]
            chosen = [chosen[k] for k in keep]
        mask = torch.cat([mask, mask.new_ones((len(batch), 1))], dim=-1)
        step_ids = torch.tensor(chosen, device=device)[:, None]
        step_positions = (mask.sum(-1, keepdim=True) - 1).to(device)
        out = model(
            input_ids=step_ids,
            attention_mask=mask,
            position_ids=step_positions,
            cache=cache,
            use_cache=True,
        )
        logits = out.logits[:, -1, :].float()
        stats.decode_steps += 1
        stats.decode_tokens += len(batch)
    return new_tokens


def continue_with_generate(
    backend,
    requests: Sequence[PrefixRequest],
    *,
    n: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    stop: list[str] | None = None,
) -> list[list[str]]:
    """Continuations through any ``SamplingBackend.generate``: the prefix is put in the prompt text.

    One ``generate`` call per request (each with its own seed), so the prompt and prefix are encoded
    again for every continuation where the backend does that (transformers' ``num_return_sequences``).
    The fallback for a backend without ``sample_continuations``.
    """
    tokenizer = getattr(backend, "tokenizer", None)
    out = []
    for r in requests:
        text = continuation_text(tokenizer, r.prompt, r.prefix)
        out.append(
            backend.generate(
                [text], n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=r.seed, stop=stop
            )[0]
        )
    return out


def sample_continuations(backend, requests: Sequence[PrefixRequest], **kw) -> list[list[str]]:
    """The backend's own ``sample_continuations`` where it has one, else :func:`continue_with_generate`."""
    if isinstance(backend, PrefixSampler):
        return backend.sample_continuations(requests, **kw)
    return continue_with_generate(backend, requests, **kw)


@dataclass
class ForwardCount:
    """Tokens through a model's forward, split into prefill calls (more than one position) and decode calls."""

    prefill_calls: int = 0
    prefill_tokens: int = 0
    prefill_positions: int = 0
    decode_calls: int = 0
    decode_tokens: int = 0
    shapes: list[tuple[int, int]] = field(default_factory=list)


@contextlib.contextmanager
def count_forward_tokens(model) -> Iterator[ForwardCount]:
    """Count, from outside, what every forward call of ``model`` processes while the block runs.

    A call over more than one position is a prefill: its real tokens (attention mask ones within the
    new positions) and its padded positions are added up; a one-position call is a decode step.
    """
    count = ForwardCount()

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            return
        rows, width = ids.shape
        count.shapes.append((rows, width))
        if width > 1:
            mask = kwargs.get("attention_mask")
            count.prefill_calls += 1
            count.prefill_positions += rows * width
            count.prefill_tokens += int(mask[:, -width:].sum()) if mask is not None else rows * width
        else:
            count.decode_calls += 1
            count.decode_tokens += rows

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield count
    finally:
        handle.remove()


__all__ = [
    "ForwardCount",
    "PrefixRequest",
    "PrefixSampler",
    "SamplingStats",
    "continuation_text",
    "continue_with_generate",
    "count_forward_tokens",
    "derive_seed",
    "encode_request",
    "sample_continuations",
    "sample_shared_prefix",
    "top_p_filter",
]
