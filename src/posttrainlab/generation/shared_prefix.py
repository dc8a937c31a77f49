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
  token by token from ``softmax(logits / temperature)`` restricted by ``top_k`` (off by default), the
  top-p nucleus and the ``min_p`` floor (transformers' ``TopK``/``TopP``/``MinP`` warper rules, in that
  order), until an eos token, a ``stop_token_ids`` token, a ``stop`` string or ``max_new_tokens``.
  The logits at every step equal those of a fresh forward pass over prompt + prefix + the tokens so far
  (tested through the log-probabilities the sampler records, ``logprobs=True``).
- **vLLM's extra fields**: ``min_tokens``: eos and stop tokens cannot be drawn, and a stop string does
  not count unless it ends after the text of the first ``min_tokens`` tokens; ``ignore_eos``: eos tokens
  are drawn like any other (special ones leave no text) and only ``stop_token_ids``, stop strings and
  ``max_new_tokens`` end a row.
- **What comes back**: :func:`sample_from_ids` (prompts as token ids) returns a :class:`Sample` per
  row: its text, every token generated (the eos or stop token that ended it included: what ``usage``
  counts), ``finish_reason`` (``length`` when ``max_new_tokens`` ran out, else ``stop``) and, on
  request, each token's log-probability under the model (raw logits: no temperature or filter).
- **Seeds**: every request draws from its own ``torch.Generator`` seeded with ``request.seed``, so a
  request's continuations do not depend on the other requests in the call (which is what lets
  ``posttrain serve`` batch requests that each carry a seed) (up to float rounding of
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

from posttrainlab.generation import Prompt


@dataclass(frozen=True)
class PrefixRequest:
    """Continue ``prefix`` (assistant text already written) after ``prompt``, sampling with ``seed``."""

    prompt: Prompt
    prefix: str = ""
    seed: int = 0


@dataclass(frozen=True)
class Sample:
    """One sampled continuation (module docstring, "What comes back").

    ``tokens``: every token generated, ending with ``stop_token`` when an eos or stop token ended it;
    ``logprobs``: the model's log-probability of each of ``tokens`` (None unless asked for).
    """

    text: str
    tokens: tuple[int, ...]
    finish_reason: str
    stop_token: int | None = None
    logprobs: tuple[float, ...] | None = None

    @property
    def text_tokens(self) -> tuple[int, ...]:
        """The tokens the text decodes from (``tokens`` without the stop token)."""
        return self.tokens[:-1] if self.stop_token is not None else self.tokens


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


#: A character that starts a pre-token of its own after whitespace in every byte-level BPE (GPT-2, Llama 3,
#: SmolLM2, Qwen2 regexes): appended to a prefix that ends in whitespace, then its tokens are dropped.
_NEXT_STEP = "x"


def encode_prefix(tokenizer, prefix: str) -> list[int]:
    """Token ids of ``prefix`` as they are inside the joined text ``prefix + next step`` (the BPE boundary rule).

    A BPE tokenizer reads trailing whitespace differently at the end of a string than before more text: SmolLM2's
    reads ``"15.\n\n"`` as ``[..., "ĊĊ"]`` but ``"15.\n\nStep 2"`` as ``[..., "Ċ", "Ċ", "Step", ...]``. A prefix
    that the policy continues ends at a step separator, and the next step starts with a non-space character, so the
    context the model should see is the second reading: the prefix is tokenized with a stand-in first character of
    the next step (``_NEXT_STEP``), whose tokens are then dropped. Prompt and prefix are tokenized apart (the
    prompt ends with the chat template's special tokens and a newline, a pre-token boundary in every such
    tokenizer). Tested on SmolLM2's tokenizer: prompt ids + ``encode_prefix(prefix)`` + ids of the rest of the trace
    equal the ids of the whole joined text, for line and paragraph step separators
    (tests/generation/test_shared_prefix_bpe.py). A served request (``posttrain serve``, vLLM) tokenizes the
    rendered text whole instead, as ``apply_chat_template(continue_final_message=True)`` does.
    """
    if not prefix:
        return []
    if not prefix[-1].isspace():
        return list(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    ids = list(tokenizer(prefix + _NEXT_STEP, add_special_tokens=False)["input_ids"])
    tail = list(tokenizer(_NEXT_STEP, add_special_tokens=False)["input_ids"])
    if ids[-len(tail) :] != tail:  # the stand-in merged with the whitespace: no clean boundary to keep
        return list(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    return ids[: -len(tail)]


def encode_request(tokenizer, request: PrefixRequest) -> list[int]:
    """Token ids of prompt + prefix: the prompt as ``encode_prompt`` encodes it, then ``encode_prefix``."""
    from posttrainlab.generation.transformers_backend import encode_prompt

    return encode_prompt(tokenizer, request.prompt) + encode_prefix(tokenizer, request.prefix)


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


def filter_scores(scores, *, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0):
    """``scores`` with tokens outside the top ``top_k`` (0: off), the top-p nucleus and the ``min_p`` floor
    (probability below ``min_p`` times the likeliest's) set to -inf: transformers' warpers, in their order.

    >>> import torch
    >>> s = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    >>> [filter_scores(s, **kw).isinf().tolist() for kw in ({"top_k": 1}, {"min_p": 0.5})]
    [[[False, True, True]], [[False, False, True]]]
    """
    import torch

    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    scores = top_p_filter(scores, top_p)
    if min_p > 0:
        probs = scores.softmax(dim=-1)
        scores = scores.masked_fill(probs < min_p * probs.amax(dim=-1, keepdim=True), float("-inf"))
    return scores


def stop_index(text: str, stop: Sequence[str] | None, after: int = 0) -> int | None:
    """Where ``text`` is cut: the start of the first stop string that ends after ``after`` characters.

    >>> stop_index("a\\nb\\nc", ["\\n"]), stop_index("a\\nb\\nc", ["\\n"], after=2), stop_index("abc", ["x"])
    (1, 3, None)
    """
    found = [i for i in (text.find(s, max(0, after - len(s) + 1)) for s in stop or [] if s) if i >= 0]
    return min(found, default=None)


def check_options(
    *, top_k: int = 0, min_p: float = 0.0, min_tokens: int = 0, max_new_tokens: int = 64,
    stop_token_ids: Sequence[int] = (), vocab_size: int | None = None,
) -> None:  # fmt: skip
    """``BadInput`` for sampling options beyond ``check_sampling``'s that are out of range."""
    from posttrainlab.errors import BadInput

    if top_k < -1:
        raise BadInput(f"top_k={top_k}: must be >= -1 (-1 or 0: all tokens)")
    if not 0 <= min_p <= 1:
        raise BadInput(f"min_p={min_p}: must be in [0, 1]")
    if not 0 <= min_tokens <= max_new_tokens:
        raise BadInput(f"min_tokens={min_tokens}: must be in 0..max_tokens ({max_new_tokens})")
    for t in stop_token_ids:
        if t < 0 or (vocab_size is not None and t >= vocab_size):
            top = f"0..{vocab_size - 1}" if vocab_size is not None else ">= 0"
            raise BadInput(f"stop_token_ids: {t} is not a token id of this model ({top})")


def _stop_checker(tokenizer, stop: list[str], min_tokens: int) -> Callable[[list[int]], bool]:
    """Whether a row's tokens so far end in a stop string that counts (``min_tokens``: module docstring)."""
    window = max(len(s) for s in stop) + 4

    def stopped(tokens: list[int]) -> bool:
        if len(tokens) <= min_tokens:
            return False
        tail = tokenizer.decode(tokens[-window:], skip_special_tokens=True)
        if not any(s in tail for s in stop):
            return False
        return min_tokens == 0 or _cut(tokenizer, tokens, stop, min_tokens) is not None

    return stopped


def _cut(tokenizer, tokens: Sequence[int], stop: list[str] | None, min_tokens: int, text: str | None = None):
    """Where the text of ``tokens`` is cut by a stop string that counts (None: nowhere)."""
    text = tokenizer.decode(tokens, skip_special_tokens=True) if text is None else text
    after = len(tokenizer.decode(tokens[:min_tokens], skip_special_tokens=True)) if min_tokens else 0
    return stop_index(text, stop, after)


def sample_shared_prefix(
    model,
    tokenizer,
    requests: Sequence[PrefixRequest],
    *,
    return_tokens: bool = False,
    **options,
):
    """``n`` continuations per request, one prefill per request (module docstring for the contract).

    ``options`` are :func:`sample_from_ids`'s (``n``, ``temperature``, ``top_p``, ``max_new_tokens``,
    ``stop``, ``eos_ids``, ``batch_size``, ``stats``, ...). Returns the texts; with ``return_tokens``
    also the token ids each text decodes from (no eos or stop token): ``(texts, tokens)``.
    """
    encoded = [encode_request(tokenizer, r) for r in requests]
    samples = sample_from_ids(model, tokenizer, encoded, [r.seed for r in requests], **options)
    texts = [[s.text for s in row] for row in samples]
    return (texts, [[list(s.text_tokens) for s in row] for row in samples]) if return_tokens else texts


def sample_from_ids(
    model,
    tokenizer,
    prompts: Sequence[Sequence[int]],
    seeds: Sequence[int],
    *,
    n: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float = 0.0,
    max_new_tokens: int = 64,
    min_tokens: int = 0,
    stop: list[str] | None = None,
    stop_token_ids: Sequence[int] = (),
    ignore_eos: bool = False,
    eos_ids: Sequence[int] = (),
    batch_size: int = 32,
    stats: SamplingStats | None = None,
    logprobs: bool = False,
    preallocate: bool = True,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[Sample]]:
    """``n`` :class:`Sample` per prompt (token ids), prompt ``i`` drawing from a generator seeded ``seeds[i]``.

    ``batch_size`` counts prompts per prefill (the decode batch holds up to ``batch_size * n`` rows).
    ``logprobs``: record each token's log-probability. ``preallocate=False`` keeps transformers'
    concatenating cache (for ``bench/bench_mc_sampling.py``, which separates the gains). ``on_batch(k)``
    is called after each prefill batch of ``k`` prompts (progress bars).
    """
    import torch

    from posttrainlab.generation.transformers_backend import check_sampling, length_sorted_batches

    check_sampling(n, temperature, top_p, max_new_tokens)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    check_options(
        top_k=top_k, min_p=min_p, min_tokens=min_tokens, max_new_tokens=max_new_tokens,
        stop_token_ids=stop_token_ids, vocab_size=vocab if isinstance(vocab, int) else None,
    )  # fmt: skip
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
    stats = stats if stats is not None else SamplingStats()
    stop = [s for s in stop or [] if s] or None
    out: list[list[Sample]] = [[] for _ in prompts]
    greedy = temperature == 0
    per_prefix = 1 if greedy else n
    stops = set(stop_token_ids) | (set() if ignore_eos else set(eos_ids))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    decode = _Decode(
        per_prefix=per_prefix,
        greedy=greedy,
        temperature=temperature,
        filters={"top_k": max(top_k, 0), "top_p": top_p, "min_p": min_p},
        max_new_tokens=max_new_tokens,
        min_tokens=min_tokens,
        stops=stops,
        stop_check=_stop_checker(tokenizer, stop, min_tokens) if stop else None,
        pad_id=pad_id,
        logprobs=logprobs,
        preallocate=preallocate,
    )
    with torch.inference_mode():
        for batch in length_sorted_batches([len(p) for p in prompts], batch_size):
            rows = _decode_batch(model, [list(prompts[i]) for i in batch], [seeds[i] for i in batch], decode, stats)
            for j, i in enumerate(batch):
                mine = [
                    _sample(tokenizer, *row, stop, min_tokens, stops)
                    for row in rows[j * per_prefix : (j + 1) * per_prefix]
                ]
                out[i] = mine * n if greedy else mine
            if on_batch is not None:
                on_batch(len(batch))
    stats.requests += len(prompts)
    stats.sequences += len(prompts) * n
    return out


def _sample(tokenizer, tokens: list[int], logprobs, stop, min_tokens: int, stops: set[int]) -> Sample:
    """A row's :class:`Sample`: its text (stop token dropped, cut at a stop string) and why it ended."""
    stop_token = tokens[-1] if tokens and tokens[-1] in stops else None
    text_tokens = tokens[:-1] if stop_token is not None else tokens
    text = tokenizer.decode(text_tokens, skip_special_tokens=True)
    cut = _cut(tokenizer, text_tokens, stop, min_tokens, text) if stop else None
    reason = "stop" if stop_token is not None or cut is not None else "length"
    lp = tuple(logprobs) if logprobs is not None else None
    return Sample(text[:cut] if cut is not None else text, tuple(tokens), reason, stop_token, lp)


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


@dataclass(frozen=True)
class _Decode:
    """How :func:`_decode_batch` decodes (``sample_from_ids``'s arguments, resolved)."""

    per_prefix: int
    greedy: bool
    temperature: float
    filters: dict
    max_new_tokens: int
    min_tokens: int
    stops: set[int]
    stop_check: Callable[[list[int]], bool] | None
    pad_id: int
    logprobs: bool
    preallocate: bool


def _decode_batch(model, prompts: list[list[int]], seeds: list[int], how: _Decode, stats: SamplingStats) -> list:
    """Prefill ``prompts`` once, expand each to ``per_prefix`` rows, decode; ``(tokens, logprobs)`` per row.

    A row's tokens end with the eos or stop token that ended it, if one did; ``logprobs`` is None
    unless ``how.logprobs``.
    """
    import torch
    from transformers import DynamicCache

    from posttrainlab.generation.transformers_backend import left_pad

    device = model.device
    per_prefix = how.per_prefix
    ids, mask = left_pad(prompts, how.pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()  # filled in place by the forward pass
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, **keep_last)
    stats.prefills += len(prompts)
    stats.prefill_tokens += int(mask.sum())
    stats.prefill_positions += int(mask.numel())
    logits = out.logits[:, -1, :].float()
    if how.preallocate:
        _preallocate(cache, per_prefix, how.max_new_tokens)  # the N-fold expansion, with room for the new tokens
    elif per_prefix > 1:
        cache.batch_repeat_interleave(per_prefix)
    if per_prefix > 1:
        mask = mask.repeat_interleave(per_prefix, dim=0)
        logits = logits.repeat_interleave(per_prefix, dim=0)
    total = len(prompts) * per_prefix
    owner = [r // per_prefix for r in range(total)]  # the prompt each row continues
    generators = []
    if not how.greedy:
        for seed in seeds:
            g = torch.Generator(device="cpu")
            g.manual_seed(seed)
            generators.append(g)
    new_tokens: list[list[int]] = [[] for _ in range(total)]
    logprobs: list[list[float]] | None = [[] for _ in range(total)] if how.logprobs else None
    held = torch.tensor(sorted(how.stops), dtype=torch.long, device=device)  # not drawn before min_tokens
    batch = list(range(total))  # the row ids in the cache, in cache order
    alive = [True] * total
    filler = min(how.stops) if how.stops else how.pad_id  # fed to finished rows until they are dropped
    for step in range(how.max_new_tokens):
        live = [k for k, row in enumerate(batch) if alive[row]]
        live_logits = logits if len(live) == len(batch) else logits[live]
        scores = live_logits
        if step < how.min_tokens and len(held):  # every live row has drawn ``step`` tokens
            scores = scores.index_fill(-1, held, float("-inf"))
        if how.greedy:
            picks = scores.argmax(dim=-1).tolist()
        else:
            probs = filter_scores(scores / how.temperature, **how.filters).softmax(dim=-1).cpu()
            picks = [0] * len(live)
            start = 0
            while start < len(live):  # the live rows of one prompt are contiguous: one draw per prompt
                who = owner[batch[live[start]]]
                end = start
                while end < len(live) and owner[batch[live[end]]] == who:
                    end += 1
                picks[start:end] = torch.multinomial(probs[start:end], 1, generator=generators[who])[:, 0].tolist()
                start = end
        if logprobs is not None:
            drawn = live_logits.log_softmax(dim=-1).gather(-1, torch.tensor(picks, device=device)[:, None])
            for k, lp in zip(live, drawn[:, 0].tolist(), strict=True):
                logprobs[batch[k]].append(lp)
        chosen = [filler] * len(batch)
        for k, token in zip(live, picks, strict=True):
            row = batch[k]
            chosen[k] = token
            new_tokens[row].append(token)
            if token in how.stops or (how.stop_check is not None and how.stop_check(new_tokens[row])):
                alive[row] = False
        n_alive = sum(alive[row] for row in batch)
        if n_alive == 0 or step == how.max_new_tokens - 1:
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
    return [(new_tokens[r], logprobs[r] if logprobs is not None else None) for r in range(total)]


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
    "Sample",
    "SamplingStats",
    "continuation_text",
    "continue_with_generate",
    "count_forward_tokens",
    "derive_seed",
    "encode_prefix",
    "encode_request",
    "check_options",
    "filter_scores",
    "sample_continuations",
    "sample_from_ids",
    "sample_shared_prefix",
    "stop_index",
    "top_p_filter",
]
