"""Sampling arguments, the token filters, stop rules, and what a sample and a sampling run return.

The pieces of one sampling step and its bookkeeping, shared by ``generation.shared_prefix`` (which
decodes), the backends (which check their arguments the same way) and ``posttrain serve``:

- **Argument checks**: ``check_sampling`` (``n``, ``temperature``, ``top_p``, ``max_new_tokens``: every
  backend) and ``check_options`` (vLLM's extra fields that the transformers sampler implements).
- **Filters** (``filter_scores``): ``top_k`` (off by default), the top-p nucleus and the ``min_p``
  floor, transformers' ``TopK``/``TopP``/``MinP`` warper rules in that order; written by hand because
  the sampler draws from its own per-request generators, outside ``generate``.
- **Stops**: a stop string ends a row once it appears in the text; with ``min_tokens`` it does not
  count unless it ends after the text of the first ``min_tokens`` tokens (vLLM's rule).
- **Options and hooks**: :class:`SampleSettings` (the sampler's options as one object) and
  :class:`DecodeHooks` (the server's view into the decode loop: tokens as drawn, gone requests ended).
- **What comes back**: a :class:`Sample` per row; :class:`SamplingStats` adds up the work, and
  :func:`count_forward_tokens` counts the same at a model's forward from outside, for any way of
  generating.
- **Seeds**: ``derive_seed`` makes a 31-bit seed from any parts, so a request's samples are the same
  whichever run, shard or batch draws them.
- **k answers per prompt** (``sample_answers``): the dataset records' prompts sampled ``k`` times in one
  ``generate`` call, the count checked (arith-prm, best-of-N, DPO pairs).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from posttrainlab.errors import BadInput
from posttrainlab.generation.prompts import as_messages


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


def check_options(
    *, top_k: int = 0, min_p: float = 0.0, min_tokens: int = 0, max_new_tokens: int = 64,
    stop_token_ids: Sequence[int] = (), vocab_size: int | None = None,
) -> None:  # fmt: skip
    """``BadInput`` for sampling options beyond ``check_sampling``'s that are out of range."""
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


def stop_cut(tokenizer, tokens: Sequence[int], stop: list[str] | None, min_tokens: int, text: str | None = None):
    """Where the text of ``tokens`` is cut by a stop string that counts (None: nowhere)."""
    text = tokenizer.decode(tokens, skip_special_tokens=True) if text is None else text
    after = len(tokenizer.decode(tokens[:min_tokens], skip_special_tokens=True)) if min_tokens else 0
    return stop_index(text, stop, after)


def stop_checker(tokenizer, stop: list[str], min_tokens: int) -> Callable[[list[int]], bool]:
    """Whether a row's tokens so far end in a stop string that counts (``min_tokens``: module docstring)."""
    window = max(len(s) for s in stop) + 4

    def stopped(tokens: list[int]) -> bool:
        if len(tokens) <= min_tokens:
            return False
        tail = tokenizer.decode(tokens[-window:], skip_special_tokens=True)
        if not any(s in tail for s in stop):
            return False
        return min_tokens == 0 or stop_cut(tokenizer, tokens, stop, min_tokens) is not None

    return stopped


@dataclass(frozen=True)
class Sample:
    """One sampled continuation (``generation.shared_prefix``, "What comes back").

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


def make_sample(tokenizer, tokens: list[int], logprobs, stop, min_tokens: int, stops: set[int]) -> Sample:
    """A row's :class:`Sample`: its text (stop token dropped, cut at a stop string) and why it ended."""
    stop_token = tokens[-1] if tokens and tokens[-1] in stops else None
    text_tokens = tokens[:-1] if stop_token is not None else tokens
    text = tokenizer.decode(text_tokens, skip_special_tokens=True)
    cut = stop_cut(tokenizer, text_tokens, stop, min_tokens, text) if stop else None
    reason = "stop" if stop_token is not None or cut is not None else "length"
    lp = tuple(logprobs) if logprobs is not None else None
    return Sample(text[:cut] if cut is not None else text, tuple(tokens), reason, stop_token, lp)


@dataclass(frozen=True)
class SampleSettings:
    """The options of ``shared_prefix.sample_from_ids`` as one object (its module docstring for the contract).

    ``eos_ids``: the model's end tokens (each ends a row unless ``ignore_eos``); ``batch_size``: prompts
    per prefill (the decode batch holds up to ``batch_size * n`` rows); ``logprobs``: record each token's
    log-probability; ``preallocate=False`` keeps transformers' concatenating cache (for
    ``bench/bench_mc_sampling.py``, which separates the gains).
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_new_tokens: int = 64
    min_tokens: int = 0
    stop: list[str] | None = None
    stop_token_ids: Sequence[int] = ()
    ignore_eos: bool = False
    eos_ids: Sequence[int] = ()
    batch_size: int = 32
    logprobs: bool = False
    preallocate: bool = True

    def check(self, vocab_size: int | None = None) -> None:
        """``BadInput`` for options out of range (``check_sampling`` and ``check_options``)."""
        check_sampling(self.n, self.temperature, self.top_p, self.max_new_tokens)
        check_options(
            top_k=self.top_k, min_p=self.min_p, min_tokens=self.min_tokens, max_new_tokens=self.max_new_tokens,
            stop_token_ids=self.stop_token_ids, vocab_size=vocab_size,
        )  # fmt: skip

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def rows_per_prompt(self) -> int:
        """Rows decoded per prompt: ``n``, or one when greedy (its text is repeated ``n`` times)."""
        return 1 if self.greedy else self.n

    def stop_tokens(self) -> set[int]:
        """The tokens that end a row: ``stop_token_ids`` and, unless ``ignore_eos``, ``eos_ids``."""
        return set(self.stop_token_ids) | (set() if self.ignore_eos else set(self.eos_ids))


#: ``(prompt, sample, token, ended)`` for each row that drew a token in one decode step: ``ended`` when the
#: token ended the row (an eos or stop token, a stop string, or ``max_new_tokens``).
Drawn = list[tuple[int, int, int, bool]]


@dataclass(frozen=True)
class DecodeHooks:
    """Calls into ``shared_prefix.sample_from_ids``' decode loop (``posttrain serve``'s: stream, drop the gone).

    ``gone(prompt)``: asked before each prefill batch and each decode step for every prompt still decoding
    (its index in the call); True ends the prompt's rows there, their samples come back with
    ``finish_reason: "abort"`` (vLLM's word) and no text, and a prefill batch whose prompts are all gone
    is skipped. ``on_step(drawn)``: after every step, what it drew (:data:`Drawn`). Both run in the
    thread that runs the call; without them (None) the loop is the same, operation for operation.
    """

    gone: Callable[[int], bool] | None = None
    on_step: Callable[[Drawn], None] | None = None


@dataclass
class SamplingStats:
    """Work done by shared-prefix sampling, summed over calls (``generation.shared_prefix``, "Counting")."""

    requests: int = 0
    prefills: int = 0
    prefill_tokens: int = 0
    prefill_positions: int = 0
    decode_steps: int = 0
    decode_tokens: int = 0
    sequences: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


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


def sample_answers(backend, records: list[dict], k: int, label: str, **sampling) -> list[list[str]]:
    """``k`` completions of each record's ``prompt`` (``prompts.as_messages``) from one ``backend.generate`` call,
    under a progress bar named ``label``; ``BadInput`` unless the backend returned ``k`` for every record."""
    from posttrainlab.progress import task_label

    with task_label(label):
        completions = backend.generate([as_messages(r["prompt"]) for r in records], n=k, **sampling)
    if len(completions) != len(records) or any(len(c) != k for c in completions):
        got = f"{len(completions)} lists for {len(records)} prompts"
        raise BadInput(f"the sampling backend returned {got}, not {k} completions each")
    return completions


__all__ = [
    "DecodeHooks",
    "Drawn",
    "ForwardCount",
    "Sample",
    "SampleSettings",
    "SamplingStats",
    "check_options",
    "check_sampling",
    "count_forward_tokens",
    "derive_seed",
    "filter_scores",
    "make_sample",
    "sample_answers",
    "stop_checker",
    "stop_cut",
    "stop_index",
    "top_p_filter",
]
