"""One way to get a sampling backend by name: ``make_backend(model, backend=...)``.

Written by hand: four constructors with different arguments behind one call, so every verb that samples offers
the same ``--backend`` choice (``posttrain generate``, ``label mc``; the verbs that load a policy from its folder,
``eval policy``, ``eval best-of-n``, ``eval beam-search``, ``data arith-prm`` and ``train dpo``, through
``policy_backend``).

- ``transformers`` (default): ``model`` is a local folder or Hub id, loaded on CPU or one GPU;
  ``**kw`` goes to ``TransformersBackend.from_pretrained`` (``progress``, ``trust_remote_code``, ``dtype``).
- ``vllm``: ``model`` as above, loaded by vLLM in this process with prefix caching (a CUDA machine whose venv
  holds vllm; ``BadInput`` in one line when vllm is not installed); ``**kw`` goes to ``VLLMBackend``.
- ``vllm-server``: ``model`` as above, served by a ``vllm serve`` the lab starts from the vLLM venv (``make
  vllm``), waits for and stops itself, and sent token ids (``generation.vllm_server_backend``); ``**kw`` is the
  server's ``ServerOptions`` (``dtype``, ``threads``, ``trust_remote_code``, ...) and ``progress``.
- ``openai``: ``model`` is the served model name at ``base_url`` (any OpenAI-compatible endpoint);
  ``api_key`` defaults to ``$OPENAI_API_KEY``, else ``"EMPTY"``; ``**kw`` goes to ``OpenAIBackend``
  (``mode``, ``tokenizer``, ``max_workers``, ...). ``batch_size`` sets ``max_workers`` unless given.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from posttrainlab.errors import BadInput
from posttrainlab.generation import SamplingBackend

BACKENDS = ("transformers", "vllm", "vllm-server", "openai")
#: the backends that load a policy from its folder (the ``--backend`` of the verbs ``policy_backend`` serves)
POLICY_BACKENDS = ("transformers", "vllm", "vllm-server")


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
    if backend == "vllm-server":
        from posttrainlab.generation.vllm_server import ServerOptions
        from posttrainlab.generation.vllm_server_backend import VLLMServerBackend

        progress = kw.pop("progress", True)
        options = ServerOptions(str(model), **kw)
        return VLLMServerBackend(model, batch_size=batch_size, options=options, progress=progress)
    from posttrainlab.generation.openai_backend import OpenAIBackend

    if not base_url:
        raise BadInput("--backend openai needs --base-url (the endpoint, e.g. http://127.0.0.1:8000/v1)")
    kw.setdefault("max_workers", batch_size)
    key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    return OpenAIBackend(base_url, str(model), api_key=key, **kw)


@contextlib.contextmanager
def policy_backend(
    model: str,
    backend: str = "transformers",
    *,
    batch_size: int = 32,
    dtype: str = "float32",
    trust_remote_code: bool = False,
    threads: int | None = None,
    progress: bool = True,
) -> Iterator[SamplingBackend | None]:
    """The ``--backend`` of a verb that loads its policy from a folder, for the block's length.

    ``transformers``: ``None``, and the verb's runner loads the model itself, exactly as it does without the
    option. ``vllm`` / ``vllm-server``: ``make_backend``'s, given to the runner as its ``backend``, and closed when
    the block ends (a ``vllm-server`` lets go of its server, so the last user stops it). ``threads``: the
    server's CPU threads (default: the lab's torch threads when torch is loaded, else ``$OMP_NUM_THREADS``, else
    every core).
    """
    if backend not in POLICY_BACKENDS:
        raise BadInput(f"--backend {backend!r}: choose one of {', '.join(POLICY_BACKENDS)}")
    if backend == "transformers":
        yield None
        return
    if backend == "vllm":
        made = make_backend(model, backend=backend, batch_size=batch_size, dtype=dtype,
                            trust_remote_code=trust_remote_code)  # fmt: skip
    else:
        if threads is None and "torch" in sys.modules:
            threads = sys.modules["torch"].get_num_threads()
        made = make_backend(model, backend=backend, batch_size=batch_size, dtype=dtype, progress=progress,
                            trust_remote_code=trust_remote_code, threads=threads)  # fmt: skip
    try:
        yield made
    finally:
        close = getattr(made, "close", None)
        if close is not None:
            close()


__all__ = ["BACKENDS", "POLICY_BACKENDS", "make_backend", "policy_backend"]
