"""Prompt token ids for ``posttrain serve``: the context check, ``usage``, ``sample_ids`` and echoed id prompts.

``TokenCounter`` wraps a backend's tokenizer (and its model's context length and vocabulary size, when
the config says them); ``serve.app`` encodes every prompt with it, so what is counted and checked is
what the model is given. Split from ``serve.app`` (which re-exports it) to keep the routes readable.
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


__all__ = ["TokenCounter"]
