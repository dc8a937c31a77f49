"""The transformers backend's ``sample_ids``, step by step: tokens reported as drawn, gone requests ended.

``posttrain serve`` needs two things from the generation loop that a call returning whole answers cannot
give: each token as it is drawn (so a stream sends it at once, not after the whole answer), and a way to
end the rows of a request whose client has disconnected (so an abandoned ``max_tokens: 400`` does not
keep the next request waiting; vLLM and ``transformers serve`` abort such a request too).
:func:`sample_stepwise` is ``TransformersBackend.sample_ids`` (``generation.shared_prefix.sample_from_ids``
over the backend's model, tokenizer, eos ids, batch size and stats) with two hooks:

- ``gone(p)``: asked before every decode step (and before each prefill batch) for every prompt still
  decoding; True ends that prompt's rows there (its samples come back with ``finish_reason: "abort"``,
  vLLM's word, and nobody reads them), and a prefill batch whose prompts are all gone is skipped. Ended
  rows leave the batch by the sampler's own rule (once finished rows are a quarter of it).
- ``on_step(drawn)``: called after every step with ``(prompt, sample, token, ended)`` for each row that
  drew a token (``ended``: the token ended the row: an eos or stop token, a stop string, or
  ``max_tokens``).

Both run in the worker thread that runs the call (``serve.batcher``). Without them the arithmetic is the
sampler's, operation for operation: the same prefill, cache expansion, filters, per-prompt generators,
stop rules and row dropping, so every answer is the one ``sample_ids`` gives (tests/serve/test_decode.py
compares them token for token, greedy and seeded, with stop strings, ``min_tokens`` and log-probabilities).
Written here, not as hooks in ``generation.shared_prefix``, because only the server needs them; the
helpers it uses (padding, batching, cache expansion, filters, stop rules, ``make_sample``) are the
sampler's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from posttrainlab.generation.kv_cache import preallocate
from posttrainlab.generation.prompts import left_pad, length_sorted_batches
from posttrainlab.generation.sampling import (
    Sample,
    check_options,
    check_sampling,
    filter_scores,
    make_sample,
    stop_checker,
)

#: ``(prompt, sample, token, ended)`` for each row that drew a token in one step.
Drawn = list[tuple[int, int, int, bool]]


def stepper_for(backend) -> Callable | None:
    """``sample_ids`` with the hooks for ``backend`` when it is the transformers backend's; else None.

    Only a backend whose ``sample_ids`` is ``TransformersBackend.sample_ids`` itself (not a subclass that
    changes it, not a test double) is decoded here; the others are called as they are.
    """
    from posttrainlab.generation.transformers_backend import TransformersBackend

    if getattr(type(backend), "sample_ids", None) is not TransformersBackend.sample_ids:
        return None
    return partial(sample_stepwise, backend)


@dataclass(frozen=True)
class _Settings:
    """How :func:`_decode_batch` decodes (``sample_stepwise``'s arguments, resolved)."""

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


def sample_stepwise(
    backend,
    prompts: Sequence[Sequence[int]],
    seeds: Sequence[int],
    *,
    gone: Callable[[int], bool] | None = None,
    on_step: Callable[[Drawn], None] | None = None,
    **options,
) -> list[list[Sample]]:
    """``backend.sample_ids(prompts, seeds, **options)``, reporting steps and ending gone prompts (module docstring)."""
    import torch

    model, tokenizer = backend.model, backend.tokenizer
    n, temperature = options.get("n", 1), options.get("temperature", 1.0)
    top_p, top_k, min_p = options.get("top_p", 1.0), options.get("top_k", 0), options.get("min_p", 0.0)
    max_new_tokens, min_tokens = options.get("max_new_tokens", 64), options.get("min_tokens", 0)
    stop_token_ids, ignore_eos = options.get("stop_token_ids", ()), options.get("ignore_eos", False)
    unknown = set(options) - {
        "n", "temperature", "top_p", "top_k", "min_p", "max_new_tokens", "min_tokens", "stop", "stop_token_ids",
        "ignore_eos", "logprobs",
    }  # fmt: skip
    if unknown:
        raise TypeError(f"sample_stepwise: unexpected options {sorted(unknown)}")
    check_sampling(n, temperature, top_p, max_new_tokens)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    check_options(
        top_k=top_k, min_p=min_p, min_tokens=min_tokens, max_new_tokens=max_new_tokens,
        stop_token_ids=stop_token_ids, vocab_size=vocab if isinstance(vocab, int) else None,
    )  # fmt: skip
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
    stop = [s for s in options.get("stop") or [] if s] or None
    greedy = temperature == 0
    stops = set(stop_token_ids) | (set() if ignore_eos else set(backend.eos_ids()))
    how = _Settings(
        per_prefix=1 if greedy else n,
        greedy=greedy,
        temperature=temperature,
        filters={"top_k": max(top_k, 0), "top_p": top_p, "min_p": min_p},
        max_new_tokens=max_new_tokens,
        min_tokens=min_tokens,
        stops=stops,
        stop_check=stop_checker(tokenizer, stop, min_tokens) if stop else None,
        pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0,
        logprobs=bool(options.get("logprobs", False)),
    )
    stats = backend.stats
    out: list[list[Sample]] = [[] for _ in prompts]
    with torch.inference_mode():
        for batch in length_sorted_batches([len(p) for p in prompts], backend.batch_size):
            if gone is not None and all(gone(i) for i in batch):
                for i in batch:
                    out[i] = [Sample("", (), "abort")] * n
                continue
            hooks = _Hooks(batch, gone, on_step)
            rows = _decode_batch(model, [list(prompts[i]) for i in batch], [seeds[i] for i in batch], how, stats, hooks)
            for j, i in enumerate(batch):
                mine = [
                    make_sample(tokenizer, tokens, lps, stop, min_tokens, stops)
                    if not aborted
                    else Sample("", tuple(tokens), "abort")
                    for tokens, lps, aborted in rows[j * how.per_prefix : (j + 1) * how.per_prefix]
                ]
                out[i] = mine * n if greedy else mine
    stats.requests += len(prompts)
    stats.sequences += len(prompts) * n
    return out


class _Hooks:
    """``gone`` and ``on_step`` for one prefill batch, in the call's prompt numbers."""

    def __init__(self, batch: list[int], gone, on_step):
        self.batch, self.gone, self.on_step = batch, gone, on_step

    def ended(self, prompt: int) -> bool:
        return self.gone is not None and self.gone(self.batch[prompt])

    def report(self, drawn: Drawn) -> None:
        if self.on_step is not None and drawn:
            self.on_step([(self.batch[p], s, t, e) for p, s, t, e in drawn])


def _decode_batch(model, prompts: list[list[int]], seeds: list[int], how: _Settings, stats, hooks: _Hooks) -> list:
    """``generation.shared_prefix._decode_batch`` with the hooks: ``(tokens, logprobs, aborted)`` per row."""
    import torch
    from transformers import DynamicCache

    device = model.device
    per_prefix = how.per_prefix
    ids, mask = left_pad(prompts, how.pad_id)
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True, **keep_last)
    stats.prefills += len(prompts)
    stats.prefill_tokens += int(mask.sum())
    stats.prefill_positions += int(mask.numel())
    logits = out.logits[:, -1, :].float()
    preallocate(cache, per_prefix, how.max_new_tokens)
    if per_prefix > 1:
        mask = mask.repeat_interleave(per_prefix, dim=0)
        logits = logits.repeat_interleave(per_prefix, dim=0)
    total = len(prompts) * per_prefix
    owner = [r // per_prefix for r in range(total)]
    generators = []
    if not how.greedy:
        for seed in seeds:
            g = torch.Generator(device="cpu")
            g.manual_seed(seed)
            generators.append(g)
    new_tokens: list[list[int]] = [[] for _ in range(total)]
    logprobs: list[list[float]] | None = [[] for _ in range(total)] if how.logprobs else None
    held = torch.tensor(sorted(how.stops), dtype=torch.long, device=device)
    batch = list(range(total))
    alive = [True] * total
    aborted = [False] * total
    filler = min(how.stops) if how.stops else how.pad_id
    for step in range(how.max_new_tokens):
        for row in batch:  # the rows of a request whose client is gone end here
            if alive[row] and hooks.ended(owner[row]):
                alive[row], aborted[row] = False, True
        live = [k for k, row in enumerate(batch) if alive[row]]
        if not live:
            break
        live_logits = logits if len(live) == len(batch) else logits[live]
        scores = live_logits
        if step < how.min_tokens and len(held):
            scores = scores.index_fill(-1, held, float("-inf"))
        if how.greedy:
            picks = scores.argmax(dim=-1).tolist()
        else:
            probs = filter_scores(scores / how.temperature, **how.filters).softmax(dim=-1).cpu()
            picks = [0] * len(live)
            start = 0
            while start < len(live):
                who = owner[batch[live[start]]]
                end = start
                while end < len(live) and owner[batch[live[end]]] == who:
                    end += 1
                picks[start:end] = torch.multinomial(probs[start:end], 1, generator=generators[who])[:, 0].tolist()
                start = end
        if logprobs is not None:
            drawn_lp = live_logits.log_softmax(dim=-1).gather(-1, torch.tensor(picks, device=device)[:, None])
            for k, lp in zip(live, drawn_lp[:, 0].tolist(), strict=True):
                logprobs[batch[k]].append(lp)
        chosen = [filler] * len(batch)
        drawn: Drawn = []
        last = step == how.max_new_tokens - 1
        for k, token in zip(live, picks, strict=True):
            row = batch[k]
            chosen[k] = token
            new_tokens[row].append(token)
            if token in how.stops or (how.stop_check is not None and how.stop_check(new_tokens[row])):
                alive[row] = False
            drawn.append((owner[row], row % per_prefix, token, last or not alive[row]))
        hooks.report(drawn)
        n_alive = sum(alive[row] for row in batch)
        if n_alive == 0 or last:
            break
        if 4 * (len(batch) - n_alive) >= len(batch):
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


__all__ = ["Drawn", "sample_stepwise", "stepper_for"]
