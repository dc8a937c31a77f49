"""The transformers sampling backend: batched ``model.generate`` with a KV cache, on CPU or one GPU.

How a call runs, and why:

- **Prompts are rendered once, with the model's own chat template** (``add_generation_prompt=True``),
  so evaluation sees exactly the prompt format SFT trained on; a tokenizer without a chat template
  falls back to a plain role-prefixed prompt. Rendering, encoding and batching live in
  ``generation.prompts`` (``render_prompt``, ``encode_prompt``, ``plain_chat``, ``left_pad``,
  ``length_sorted_batches``; importable from here too), shared with the shared-prefix sampler, the
  log-probability scorer in ``runners.policy`` and ``posttrain serve``.
- **Batches are sorted by prompt length** (longest first) so a batch holds prompts of similar length
  and little compute is spent on padding; the longest batch runs first, so a batch size that does not
  fit in memory fails at once, not at the end. Results come back in prompt order.
- **Left padding** with an attention mask: every row's last prompt token sits at the same position,
  so the new tokens of all rows are generated in lockstep; transformers derives position ids from
  the mask, so a padded row generates what it would alone (tested: batched == one-at-a-time greedy).
  The sampling arguments are checked by ``generation.sampling.check_sampling``, as in every backend.
- **KV cache** (``use_cache=True``): each new token costs one step over one position, not a forward
  pass over the whole sequence. ``bench/bench_generation.py`` measures batched against one-at-a-time.
- **An explicit generation config**: greedy when ``temperature == 0``; otherwise pure temperature /
  nucleus sampling (``top_k=0``: the interface has no top-k, and transformers' default of 50 would
  silently truncate). Defaults a Hub model ships in ``generation_config.json`` (repetition penalty,
  top-k) are not applied, so every backend samples the same distribution for the same arguments.
  Generation stops at the tokenizer's eos (and any eos the model's generation config adds).
- **Seeded**: ``torch.manual_seed(seed)`` inside ``torch.random.fork_rng``, so the same call gives
  the same completions and the caller's random state is left as it was.
- **Several samples per prompt** (``n > 1``, ``temperature > 0``: best-of-N, arith-prm) go through the
  shared-prefix sampler below: one prefill per prompt instead of ``n``, each prompt with its own seed
  (``derive_seed(seed, index)``), so its samples do not depend on which other prompts share its batch.
- **Shared-prefix continuations** (``sample_continuations``, for Monte-Carlo labelling): one prefill
  per prefix, its KV cache expanded to the N continuations (``generation.shared_prefix``), where
  ``generate(n=N)`` would encode the prompt N times; ``stats`` adds up the work it did.
- **Token-id prompts with a seed each** (``sample_ids``, for ``posttrain serve``): the same sampler,
  with vLLM's ``top_k``, ``min_p``, ``min_tokens``, ``stop_token_ids`` and ``ignore_eos``, returning
  :class:`~posttrainlab.generation.sampling.Sample` (token ids, finish reason): requests with
  different seeds share one call and each gets what it would get alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.prompts import encode_prompt, left_pad, length_sorted_batches, plain_chat, render_prompt
from posttrainlab.generation.sampling import Sample, SamplingStats, check_sampling
from posttrainlab.generation.shared_prefix import (
    PrefixRequest,
    prompt_requests,
    sample_from_ids,
    sample_shared_prefix,
)
from posttrainlab.progress import progress_bar


class TransformersBackend:
    """A ``SamplingBackend`` over a transformers causal LM and its tokenizer.

    ``batch_size`` counts prompts per ``generate`` call (each yields ``n`` sequences when sampling).
    ``share_prefill`` (default on): ``n > 1`` samples per prompt come from one prefill per prompt;
    off, from ``model.generate(num_return_sequences=n)`` (the benches compare the two).
    """

    name = "transformers"

    def __init__(self, model, tokenizer, *, batch_size: int = 32, progress: bool = True, share_prefill: bool = True):
        if batch_size < 1:
            raise BadInput(f"batch_size={batch_size}: must be at least 1")
        from posttrainlab.models.loading import prepare_tokenizer

        self.model = model.eval()
        self.tokenizer = prepare_tokenizer(tokenizer, model)
        self.batch_size = batch_size
        self.progress = progress
        self.share_prefill = share_prefill
        self.stats = SamplingStats()  # shared-prefix work (sample_continuations, generate n > 1), summed

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        *,
        batch_size: int = 32,
        progress: bool = True,
        trust_remote_code: bool = False,
        dtype="float32",
    ) -> TransformersBackend:
        """Load a local folder or Hub id with ``models.loading.load_causal_lm``."""
        from posttrainlab.models.loading import load_causal_lm

        model, tokenizer = load_causal_lm(path, trust_remote_code=trust_remote_code, dtype=dtype)
        return cls(model, tokenizer, batch_size=batch_size, progress=progress)

    def eos_ids(self) -> list[int]:
        """Token ids that end a completion: the tokenizer's eos and any the generation config names."""
        ids = [self.tokenizer.eos_token_id]
        extra = self.model.generation_config.eos_token_id
        ids += extra if isinstance(extra, (list, tuple)) else [extra]
        return sorted({i for i in ids if i is not None})

    def generation_config(self, n: int, temperature: float, top_p: float, max_new_tokens: int):
        from transformers import GenerationConfig

        common = {
            "max_new_tokens": max_new_tokens,
            "eos_token_id": self.eos_ids(),
            "pad_token_id": self.tokenizer.pad_token_id,
            "use_cache": True,
        }
        if temperature == 0:
            return GenerationConfig(do_sample=False, num_return_sequences=1, **common)
        return GenerationConfig(
            do_sample=True, temperature=temperature, top_p=top_p, top_k=0, num_return_sequences=n, **common
        )

    def decode(self, token_rows, eos_ids: list[int]) -> list[str]:
        """Text of each row of new tokens, cut at its first eos (what follows is padding)."""
        stops = set(eos_ids)
        texts = []
        for row in token_rows.tolist():
            end = next((j for j, t in enumerate(row) if t in stops), len(row))
            texts.append(self.tokenizer.decode(row[:end], skip_special_tokens=True))
        return texts

    def generate(
        self,
        prompts: list[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        """``n`` completions for each prompt, in prompt order (see ``posttrainlab.generation``)."""
        import torch

        check_sampling(n, temperature, top_p, max_new_tokens)
        if temperature > 0 and n > 1 and self.share_prefill:
            return self._sample_many(prompts, n, temperature, top_p, max_new_tokens, seed, stop)
        encoded = [encode_prompt(self.tokenizer, p) for p in prompts]
        config = self.generation_config(n, temperature, top_p, max_new_tokens)
        per_prompt = config.num_return_sequences
        eos_ids = list(config.eos_token_id)
        extra = {}
        if stop:  # stop early in generate (it needs the tokenizer for that); truncate_at_stop cuts the text
            config.stop_strings = list(stop)
            extra["tokenizer"] = self.tokenizer
        device = self.model.device
        results: list[list[str]] = [[] for _ in prompts]
        rng_devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=rng_devices), torch.inference_mode(), progress_bar(self.progress) as bar:
            torch.manual_seed(seed)
            task = bar.add_task("generating", total=len(prompts))
            for batch in length_sorted_batches([len(e) for e in encoded], self.batch_size):
                ids, mask = left_pad([encoded[i] for i in batch], self.tokenizer.pad_token_id)
                out = self.model.generate(
                    input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config, **extra
                )
                texts = self.decode(out[:, ids.shape[1] :].cpu(), eos_ids)
                for j, i in enumerate(batch):
                    mine = [truncate_at_stop(t, stop) for t in texts[j * per_prompt : (j + 1) * per_prompt]]
                    results[i] = mine * n if per_prompt == 1 else mine
                bar.advance(task, len(batch))
        return results

    def _sample_many(self, prompts, n, temperature, top_p, max_new_tokens, seed, stop) -> list[list[str]]:
        """``n`` samples per prompt from one prefill per prompt (``generation.shared_prefix``).

        ``generate(num_return_sequences=n)`` would copy every prompt ``n`` times before the first forward
        pass; with arith-v1's ~180-token prompts that prefill is most of the work (8x slower for n=16 on
        the tiny model). Prompt ``i`` samples from its own generator, seeded ``derive_seed(seed, i)``.
        """
        requests = prompt_requests(prompts, seed)
        sampling = {"n": n, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "stop": stop}
        with progress_bar(self.progress) as bar:
            task = bar.add_task("generating", total=len(prompts))
            return self._shared_prefix(requests, sampling, on_batch=lambda k: bar.advance(task, k))

    def _shared_prefix(self, requests, sampling: dict, on_batch=None) -> list[list[str]]:
        return sample_shared_prefix(
            self.model,
            self.tokenizer,
            requests,
            **sampling,
            eos_ids=self.eos_ids(),
            batch_size=self.batch_size,
            stats=self.stats,
            on_batch=on_batch,
        )

    def sample_ids(self, prompts: Sequence[Sequence[int]], seeds: Sequence[int], **options) -> list[list[Sample]]:
        """``n`` samples per token-id prompt, prompt ``i`` seeded ``seeds[i]`` (module docstring).

        ``options``: ``shared_prefix.sample_from_ids``'s sampling arguments (``n``, ``temperature``,
        ``top_p``, ``top_k``, ``min_p``, ``max_new_tokens``, ``min_tokens``, ``stop``, ``stop_token_ids``,
        ``ignore_eos``, ``logprobs``).
        """
        return sample_from_ids(
            self.model,
            self.tokenizer,
            prompts,
            seeds,
            **options,
            eos_ids=self.eos_ids(),
            batch_size=self.batch_size,
            stats=self.stats,
        )

    def sample_continuations(
        self,
        requests: Sequence[PrefixRequest],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        """``n`` continuations of each request's prefix, one prefill per prefix (``generation.shared_prefix``).

        ``batch_size`` prefixes share a prefill forward pass; each request samples with its own seed.
        """
        sampling = {"n": n, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "stop": stop}
        return self._shared_prefix(requests, sampling)


# The prompt helpers and check_sampling moved to generation.prompts / generation.sampling; callers
# (runners.policy, label, serve, the other backends) still import them from here.
__all__ = [
    "TransformersBackend",
    "check_sampling",
    "encode_prompt",
    "left_pad",
    "length_sorted_batches",
    "plain_chat",
    "render_prompt",
]
