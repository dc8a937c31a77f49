"""Sampling backends: one interface for drawing completions from a policy, whatever runs it.

A backend turns prompts into completions, ``n`` per prompt, in prompt order::

    backend.generate(prompts, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None)
    -> list[list[str]]            # outer: one entry per prompt; inner: its n completions

A prompt is either a chat (a list of ``{"role", "content"}`` messages, rendered with the model's chat
template and the assistant turn opened) or a plain string passed to the model as it is. A completion
is the generated text only: no prompt, no eos or pad tokens, cut before the first ``stop`` string.
``temperature == 0`` means greedy (then the ``n`` completions are one greedy completion repeated).
The same ``seed`` with the same arguments gives the same completions.

Implementations: ``transformers_backend.TransformersBackend`` (CPU or one GPU, batched with a KV
cache). A vLLM backend and an OpenAI-compatible endpoint backend fit the same Protocol; the
interface is shaped after vLLM's ``SamplingParams`` (``n``, ``temperature``, ``top_p``,
``max_tokens``, ``seed``, ``stop``) so those are thin adapters.

What the local backends share lives one module each: ``prompts`` (rendering with the chat template,
token ids, length-sorted left-padded batches), ``sampling`` (argument checks, top-k/top-p/min-p
filters, stop rules, ``Sample``, seeds, work counters), ``kv_cache`` (the N-fold preallocated cache)
and ``shared_prefix`` (N continuations of a prefix from one prefill).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

Message = dict
#: A chat (list of messages) or a ready-made prompt string.
Prompt = list[Message] | str


@runtime_checkable
class SamplingBackend(Protocol):
    """Anything that draws ``n`` completions for each prompt (see the module docstring)."""

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
    ) -> list[list[str]]: ...


def truncate_at_stop(text: str, stop: list[str] | None) -> str:
    """``text`` cut before the earliest occurrence of any stop string (the stop string is dropped).

    >>> truncate_at_stop("12 + 3 = 15\\nAnswer: 15\\n\\nQuestion:", ["\\n\\nQuestion:", "###"])
    '12 + 3 = 15\\nAnswer: 15'
    >>> truncate_at_stop("no stop here", None)
    'no stop here'
    """
    if not stop:
        return text
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=len(text))
    return text[:cut]


__all__ = ["Message", "Prompt", "SamplingBackend", "truncate_at_stop"]
