"""Fixtures for the server tests: tiny models (in memory and on disk) and one torch thread.

The in-memory model's weights are scaled by 3 so that its greedy outputs differ from prompt to prompt
(at the default init scale a random model answers every prompt alike), which makes "each request got
its own answer back" a real check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiny_models import SMALL, one_torch_thread, scaled_model


@pytest.fixture(scope="package", autouse=True)
def one_thread():
    """One intra-op thread: a 32-wide model gains nothing from more (and a shared CPU makes more slower)."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="package")
def tiny_backend():
    """A ``TransformersBackend`` over the tiny model, with its ChatML chat template."""
    from posttrainlab.generation.transformers_backend import TransformersBackend

    model, tokenizer = scaled_model()
    return TransformersBackend(model, tokenizer, batch_size=16, progress=False)


@pytest.fixture(scope="package")
def plain_backend(tiny_backend):
    """The same model behind a tokenizer without a chat template (chats become ``role: content`` lines)."""
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.models.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    return TransformersBackend(tiny_backend.model, tokenizer, batch_size=16, progress=False)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """The tiny model (unscaled) saved as a Hugging Face folder, for ``posttrain serve --model DIR``."""
    from posttrainlab.models.tiny import init_model

    return init_model(SMALL, tmp_path_factory.mktemp("serve-models") / "tiny")
