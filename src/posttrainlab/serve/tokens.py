"""Prompt token ids for ``posttrain serve``: the context check, ``usage``, ``sample_ids`` and echoed id prompts.

``TokenCounter`` wraps a backend's tokenizer (and its model's context length and vocabulary size, when
the config says them); ``serve.app`` encodes every prompt with it, so what is counted and checked is
what the model is given. ``checked_max_tokens`` is the context check, ``usage`` the count.
Split from ``serve.app`` (which re-exports ``TokenCounter``) to keep the routes readable.
"""

from __future__ import annotations

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt, SamplingBackend
from posttrainlab.serve.requests import ApiError


class TokenCounter:
    """Prompt token ids for the context check, ``usage`` and ``sample_ids``, from a backend's tokenizer.

    Prompts are encoded as the transformers backend encodes them (``encode_prompt``, with the chat
    rendering options); ``vocab_size`` bounds ``stop_token_ids`` when the model config says it.
    """

    def __init__(self, tokenizer, context_length: int | None = None, vocab_size: int | None = None):
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.vocab_size = vocab_size

    @classmethod
    def for_backend(cls, backend: SamplingBackend) -> TokenCounter | None:
        """A counter when the backend has a ``tokenizer`` (and, for the limits, ``model.config``); else None."""
        tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is None or not callable(tokenizer):
            return None
        config = getattr(getattr(backend, "model", None), "config", None)
        context, vocab = getattr(config, "max_position_embeddings", None), getattr(config, "vocab_size", None)
        positive = [x if isinstance(x, int) and x > 0 else None for x in (context, vocab)]
        return cls(tokenizer, *positive)

    def encode(self, prompt: Prompt, **options) -> list[int]:
        from posttrainlab.generation.transformers_backend import encode_prompt

        try:
            return encode_prompt(self.tokenizer, prompt, **options)
        except BadInput as e:
            raise ApiError(400, f"messages: {e}", param="messages") from None

    def decode(self, ids: list[int]) -> str:
        """The text of token ids (a token-id prompt's, for ``echo``), special tokens skipped as in completions."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def checked_max_tokens(
    context: int | None, requested: int | None, ids: list[list[int]] | None, default: int | None, fallback: int
) -> int:
    """The request's ``max_tokens``, checked against the ``context`` length (None: unknown).

    ``requested=None``: ``default``, or when that is None the rest of the context (``fallback`` when the
    context is unknown). ``max_tokens: 0`` (echo: the prompt scored, nothing generated) may fill the
    context exactly.
    """
    longest = max(map(len, ids)) if ids else 0
    if context is not None and longest >= context and not (requested == 0 and longest == context):
        raise ApiError(
            400,
            f"This model's maximum context length is {context} tokens, and the prompt has {longest} tokens",
            param="messages",
            code="context_length_exceeded",
        )
    if requested is None:
        if default is not None:
            requested = default
        elif context is not None:
            requested = context - longest
        else:
            requested = fallback
    if context is not None and longest + requested > context:
        raise ApiError(
            400,
            f"This model's maximum context length is {context} tokens. However, you requested {requested} "
            f"output tokens and your prompt contains {longest} input tokens, for a total of "
            f"{longest + requested} tokens. Please reduce max_tokens.",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return requested


def usage(ids: list[list[int]] | None, completion_tokens: list[int | None]) -> dict[str, int] | None:
    """OpenAI's ``usage`` from the prompts' ids and each completion's token count; None when one is unknown."""
    if ids is None or any(c is None for c in completion_tokens):
        return None
    p, c = sum(map(len, ids)), sum(completion_tokens)  # type: ignore[arg-type]
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


__all__ = ["TokenCounter", "checked_max_tokens", "usage"]
