"""The transformers sampling backend: batched ``model.generate`` with a KV cache, on CPU or one GPU.

How a call runs, and why:

- **Prompts are rendered once, with the model's own chat template** (``add_generation_prompt=True``),
  so evaluation sees exactly the prompt format SFT trained on; a tokenizer without a chat template
  falls back to a plain role-prefixed prompt (``plain_chat``). ``render_prompt`` is shared with the
  log-probability scorer in ``eval.policy``; its ``add_generation_prompt`` and
  ``continue_final_message`` are ``apply_chat_template``'s (and vLLM's), for ``posttrain serve``.
- **Batches are sorted by prompt length** (longest first) so a batch holds prompts of similar length
  and little compute is spent on padding; the longest batch runs first, so a batch size that does not
  fit in memory fails at once, not at the end. Results come back in prompt order.
- **Left padding** with an attention mask: every row's last prompt token sits at the same position,
  so the new tokens of all rows are generated in lockstep; transformers derives position ids from
  the mask, so a padded row generates what it would alone (tested: batched == one-at-a-time greedy).
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
  :class:`~posttrainlab.generation.shared_prefix.Sample` (token ids, finish reason): requests with
  different seeds share one call and each gets what it would get alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.shared_prefix import PrefixRequest, Sample, SamplingStats
from posttrainlab.progress import progress_bar


def plain_chat(
    messages: list[dict], *, add_generation_prompt: bool = True, continue_final_message: bool = False
) -> str:
    """The fallback prompt for a tokenizer without a chat template: one ``role: content`` line each.

    ``continue_final_message``: the last message is left open (``role:`` then its text, as
    ``shared_prefix.continuation_text`` writes an assistant prefix).

    >>> plain_chat([{"role": "user", "content": "What is 2 + 3?"}])
    'user: What is 2 + 3?\\nassistant:'
    >>> qa = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    >>> plain_chat(qa, continue_final_message=True), plain_chat(qa[:1], add_generation_prompt=False)
    ('user: Q\\nassistant:A', 'user: Q\\n')
    """
    if continue_final_message:
        *closed, last = messages
        return plain_chat(closed, add_generation_prompt=False) + f"{last['role']}:{last['content']}"
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + ("assistant:" if add_generation_prompt else "")


def render_prompt(
    tokenizer, prompt: Prompt, *, add_generation_prompt: bool = True, continue_final_message: bool = False
) -> tuple[str, bool]:
    """The prompt text, and whether it came from the chat template (which then holds any bos token).

    The two options are ``apply_chat_template``'s (a string prompt is used as it is): both true is
    ``BadInput``, as a final message the template does not reproduce is for ``continue_final_message``.
    """
    if isinstance(prompt, str):
        return prompt, False
    if add_generation_prompt and continue_final_message:
        raise BadInput("continue_final_message and add_generation_prompt cannot both be true")
    if continue_final_message and not prompt:
        raise BadInput("continue_final_message: there is no final message to continue")
    options = {"add_generation_prompt": add_generation_prompt, "continue_final_message": continue_final_message}
    if getattr(tokenizer, "chat_template", None):
        try:
            return tokenizer.apply_chat_template(prompt, tokenize=False, **options), True
        except ValueError as e:  # e.g. a template that rewrites the final message it should continue
            raise BadInput(f"the chat template cannot render these messages: {e}") from None
    return plain_chat(prompt, **options), False


def encode_prompt(tokenizer, prompt: Prompt, **options) -> list[int]:
    """Token ids of a rendered prompt (special tokens added only where the chat template did not).

    ``options``: ``render_prompt``'s ``add_generation_prompt`` / ``continue_final_message``.
    """
    text, templated = render_prompt(tokenizer, prompt, **options)
    return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first (ties keep input order).

    >>> length_sorted_batches([3, 9, 5, 9, 1], 2)
    [[1, 3], [2, 0], [4]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def left_pad(sequences: list[list[int]], pad_id: int):
    """``(input_ids, attention_mask)`` long tensors, each row padded on the left to the longest.

    >>> ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq) :] = 1
    return ids, mask


def check_sampling(n: int, temperature: float, top_p: float, max_new_tokens: int) -> None:
    """``BadInput`` for sampling arguments outside their range (shared by every backend)."""
    if n < 1:
        raise BadInput(f"n={n}: the number of completions per prompt must be at least 1")
    if temperature < 0:
        raise BadInput(f"temperature={temperature}: must be >= 0 (0 is greedy)")
    if not 0 < top_p <= 1:
        raise BadInput(f"top_p={top_p}: must be in (0, 1]")
    if max_new_tokens < 1:
        raise BadInput(f"max_new_tokens={max_new_tokens}: must be at least 1")


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
        from posttrainlab.generation.shared_prefix import derive_seed

        requests = [PrefixRequest(p, "", derive_seed(seed, i)) for i, p in enumerate(prompts)]
        sampling = {"n": n, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "stop": stop}
        with progress_bar(self.progress) as bar:
            task = bar.add_task("generating", total=len(prompts))
            return self._shared_prefix(requests, sampling, on_batch=lambda k: bar.advance(task, k))

    def _shared_prefix(self, requests, sampling: dict, on_batch=None) -> list[list[str]]:
        from posttrainlab.generation.shared_prefix import sample_shared_prefix

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
        from posttrainlab.generation.shared_prefix import sample_from_ids

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
