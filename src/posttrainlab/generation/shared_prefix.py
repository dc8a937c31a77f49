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
  ``runners.policy.sequence_logprobs`` does); a continuation is the new text only.
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
- **Hooks** (:class:`DecodeHooks`, for ``posttrain serve``: tokens streamed as drawn, a disconnected
  client's rows dropped): ``on_step`` is told each step's tokens, ``gone`` ends a prompt's rows before a
  step (their samples: ``finish_reason`` ``abort``, no text) or skips a prefill batch whose prompts are all
  gone. Without hooks the loop runs the same operations; with them the other prompts' answers are unchanged.
- **Counting**: :class:`SamplingStats` adds up prefills (one per request), prefill tokens (real
  tokens, padding excluded), padded prefill positions, decode steps and sequences, so a caller can
  show one prefill per prefix; :func:`count_forward_tokens` counts the same at the model's forward
  from outside, for any way of generating.

The expanded cache lives in buffers with room for the new tokens (``generation.kv_cache``): a decode
step writes one position in place instead of concatenating (which copies the whole N-fold cache every
step). Finished rows are dropped from the batch once they are a quarter of it (dropping copies the
cache, so it is not done for every row that ends), so a long straggler does not keep them computing.

Where the pieces live: prompt rendering, prefix tokenization and batching in ``generation.prompts``;
the argument checks, :class:`SampleSettings` (the options as one object), :class:`DecodeHooks`, filters,
stop rules, :class:`Sample`, :class:`SamplingStats` and ``derive_seed`` in ``generation.sampling``; the
names are importable from here too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from posttrainlab.generation import Prompt
from posttrainlab.generation.kv_cache import preallocate
from posttrainlab.generation.prompts import (
    continuation_text,
    encode_prefix,
    encode_prompt,
    left_pad,
    length_sorted_batches,
)
from posttrainlab.generation.sampling import (
    DecodeHooks,
    Drawn,
    ForwardCount,
    Sample,
    SampleSettings,
    SamplingStats,
    check_options,
    count_forward_tokens,
    derive_seed,
    filter_scores,
    make_sample,
    stop_checker,
    stop_index,
    top_p_filter,
)


@dataclass(frozen=True)
class PrefixRequest:
    """Continue ``prefix`` (assistant text already written) after ``prompt``, sampling with ``seed``."""

    prompt: Prompt
    prefix: str = ""
    seed: int = 0


def prompt_requests(prompts: Sequence[Prompt], seed: int) -> list[PrefixRequest]:
    """Each prompt as a request with nothing written yet, prompt ``i`` seeded ``derive_seed(seed, i)``: how a
    backend's ``generate(prompts, seed=seed)`` samples through ``sample_continuations``."""
    return [PrefixRequest(p, "", derive_seed(seed, i)) for i, p in enumerate(prompts)]


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


def encode_request(tokenizer, request: PrefixRequest) -> list[int]:
    """Token ids of prompt + prefix: the prompt as ``encode_prompt`` encodes it, then ``encode_prefix``."""
    return encode_prompt(tokenizer, request.prompt) + encode_prefix(tokenizer, request.prefix)


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
    settings: SampleSettings | None = None,
    *,
    stats: SamplingStats | None = None,
    on_batch: Callable[[int], None] | None = None,
    hooks: DecodeHooks | None = None,
    **options,
) -> list[list[Sample]]:
    """``n`` :class:`Sample` per prompt (token ids), prompt ``i`` drawing from a generator seeded ``seeds[i]``.

    ``options``: :class:`SampleSettings`' fields (``n``, ``temperature``, ``top_p``, ``top_k``, ``min_p``,
    ``max_new_tokens``, ``min_tokens``, ``stop``, ``stop_token_ids``, ``ignore_eos``, ``eos_ids``,
    ``batch_size``, ``logprobs``, ``preallocate``), over ``settings`` where both are given.
    ``on_batch(k)`` is called after each prefill batch of ``k`` prompts (progress bars); ``hooks``: the
    server's (:class:`DecodeHooks`: tokens as drawn, gone prompts ended; module docstring).
    """
    import torch

    s = replace(settings or SampleSettings(), **options)
    s = replace(s, stop=[x for x in s.stop or [] if x] or None)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    s.check(vocab if isinstance(vocab, int) else None)
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
    stats = stats if stats is not None else SamplingStats()
    hooks = hooks or DecodeHooks()
    out: list[list[Sample]] = [[] for _ in prompts]
    per_prefix = s.rows_per_prompt
    decode = _Decode(
        s=s,
        stops=s.stop_tokens(),
        stop_check=stop_checker(tokenizer, s.stop, s.min_tokens) if s.stop else None,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        hooks=hooks,
    )
    with torch.inference_mode():
        for batch in length_sorted_batches([len(p) for p in prompts], s.batch_size):
            if hooks.gone is not None and all(hooks.gone(i) for i in batch):  # nobody waits: no prefill
                rows = [([], None, True)] * (len(batch) * per_prefix)
            else:
                batch_ids, batch_seeds = [list(prompts[i]) for i in batch], [seeds[i] for i in batch]
                rows = _decode_batch(model, batch_ids, batch_seeds, decode, stats, batch)
            for j, i in enumerate(batch):
                mine = [
                    Sample("", tuple(tokens), "abort")
                    if aborted
                    else make_sample(tokenizer, tokens, lps, s.stop, s.min_tokens, decode.stops)
                    for tokens, lps, aborted in rows[j * per_prefix : (j + 1) * per_prefix]
                ]
                out[i] = mine * s.n if s.greedy else mine
            if on_batch is not None:
                on_batch(len(batch))
    stats.requests += len(prompts)
    stats.sequences += len(prompts) * s.n
    return out


@dataclass(frozen=True)
class _Decode:
    """How :func:`_decode_batch` decodes: ``sample_from_ids``' settings and hooks, resolved."""

    s: SampleSettings
    stops: set[int]  # the tokens that end a row
    stop_check: Callable[[list[int]], bool] | None  # whether a row's tokens end in a stop string that counts
    pad_id: int
    hooks: DecodeHooks


def _decode_batch(
    model, prompts: list[list[int]], seeds: list[int], how: _Decode, stats: SamplingStats, numbers: list[int]
) -> list:
    """Prefill ``prompts`` once, expand each to ``per_prefix`` rows, decode; ``(tokens, logprobs, aborted)`` per row.

    A row's tokens end with the eos or stop token that ended it, if one did; ``logprobs`` is None
    unless ``how.s.logprobs``; ``aborted``: ``how.hooks.gone`` ended the row. ``numbers``: each prompt's
    number in the call (what the hooks are told).
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    s, gone, on_step = how.s, how.hooks.gone, how.hooks.on_step
    per_prefix = s.rows_per_prompt
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
    if s.preallocate:
        preallocate(cache, per_prefix, s.max_new_tokens)  # the N-fold expansion, with room for the new tokens
    elif per_prefix > 1:
        cache.batch_repeat_interleave(per_prefix)
    if per_prefix > 1:
        mask = mask.repeat_interleave(per_prefix, dim=0)
        logits = logits.repeat_interleave(per_prefix, dim=0)
    total = len(prompts) * per_prefix
    owner = [r // per_prefix for r in range(total)]  # the prompt each row continues
    generators = []
    if not s.greedy:
        for seed in seeds:
            g = torch.Generator(device="cpu")
            g.manual_seed(seed)
            generators.append(g)
    new_tokens: list[list[int]] = [[] for _ in range(total)]
    logprobs: list[list[float]] | None = [[] for _ in range(total)] if s.logprobs else None
    held = torch.tensor(sorted(how.stops), dtype=torch.long, device=device)  # not drawn before min_tokens
    batch = list(range(total))  # the row ids in the cache, in cache order
    alive = [True] * total
    aborted = [False] * total
    filler = min(how.stops) if how.stops else how.pad_id  # fed to finished rows until they are dropped
    filters = {"top_k": max(s.top_k, 0), "top_p": s.top_p, "min_p": s.min_p}
    for step in range(s.max_new_tokens):
        if gone is not None:  # the rows of a prompt whose caller is gone end here
            for row in batch:
                if alive[row] and gone(numbers[owner[row]]):
                    alive[row], aborted[row] = False, True
        live = [k for k, row in enumerate(batch) if alive[row]]
        if not live:  # only after ``gone``: otherwise a step with no live row has already ended the loop
            break
        live_logits = logits if len(live) == len(batch) else logits[live]
        scores = live_logits
        if step < s.min_tokens and len(held):  # every live row has drawn ``step`` tokens
            scores = scores.index_fill(-1, held, float("-inf"))
        if s.greedy:
            picks = scores.argmax(dim=-1).tolist()
        else:
            probs = filter_scores(scores / s.temperature, **filters).softmax(dim=-1).cpu()
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
        last = step == s.max_new_tokens - 1
        if on_step is not None:
            rows = [batch[k] for k in live]
            on_step([(numbers[owner[r]], r % per_prefix, new_tokens[r][-1], last or not alive[r]) for r in rows])
        n_alive = sum(alive[row] for row in batch)
        if n_alive == 0 or last:
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
        out = model(input_ids=step_ids, attention_mask=mask, position_ids=step_positions, cache=cache, use_cache=True)
        logits = out.logits[:, -1, :].float()
        stats.decode_steps += 1
        stats.decode_tokens += len(batch)
    return [(new_tokens[r], logprobs[r] if logprobs is not None else None, aborted[r]) for r in range(total)]


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


__all__ = [
    "DecodeHooks",
    "Drawn",
    "ForwardCount",
    "PrefixRequest",
    "PrefixSampler",
    "Sample",
    "SampleSettings",
    "SamplingStats",
    "check_options",
    "continuation_text",
    "continue_with_generate",
    "count_forward_tokens",
    "derive_seed",
    "encode_prefix",
    "encode_request",
    "filter_scores",
    "prompt_requests",
    "sample_continuations",
    "sample_from_ids",
    "sample_shared_prefix",
    "stop_index",
    "top_p_filter",
]
