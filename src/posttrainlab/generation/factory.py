"""One way to get a sampling backend by name: ``make_backend(model, backend=...)``.

Written by hand: three constructors with different arguments behind one call, so every verb that
samples (``posttrain generate``, ``posttrain label mc``) offers the same ``--backend`` choice.

- ``transformers`` (default): ``model`` is a local folder or Hub id, loaded on CPU or one GPU;
  ``**kw`` goes to ``TransformersBackend.from_pretrained`` (``progress``, ``trust_remote_code``, ``dtype``).
- ``vllm``: ``model`` as above, loaded by vLLM with prefix caching (GPU; ``BadInput`` in one line
  when vllm is not installed); ``**kw`` goes to ``VLLMBackend``.
- ``openai``: ``model`` is the served model name at ``base_url`` (any OpenAI-compatible endpoint);
  ``api_key`` defaults to ``$OPENAI_API_KEY``, else ``"EMPTY"``; ``**kw`` goes to ``OpenAIBackend``
  (``mode``, ``tokenizer``, ``max_workers``, ...). ``batch_size`` sets ``max_workers`` unless given.
"""

from __future__ import annotations

import os

from posttrainlab.errors import BadInput
from posttrainlab.generation import SamplingBackend

BACKENDS = ("transformers", "vllm", "openai")


def make_backend(
    model: str,
    *,
    backend: str = "transformers",
    base_url: str | None = None,
    api_key: str | None = None,
    batch_size: int = 32,
    **kw,
) -> SamplingBackend:
    """A ``SamplingBackend`` by name (module docstring for what each takes)."""
    if backend not in BACKENDS:
        raise BadInput(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend != "openai" and base_url is not None:
        raise BadInput(f"--base-url is for --backend openai, not {backend}")
    if backend == "transformers":
        from posttrainlab.generation.transformers_backend import TransformersBackend

        return TransformersBackend.from_pretrained(model, batch_size=batch_size, **kw)
    if backend == "vllm":
        from posttrainlab.generation.vllm_backend import VLLMBackend

        return VLLMBackend(model, batch_size=batch_size, **kw)
    from posttrainlab.generation.openai_backend import OpenAIBackend

    if not base_url:
        raise BadInput("--backend openai needs --base-url (the endpoint, e.g. http://127.0.0.1:8000/v1)")
    kw.setdefault("max_workers", batch_size)
    key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    return OpenAIBackend(base_url, str(model), api_key=key, **kw)


__all__ = ["BACKENDS", "make_backend"]
