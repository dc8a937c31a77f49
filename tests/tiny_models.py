"""The one small model shape of the tests (importable from any test folder: tests/conftest.py puts
``tests/`` on ``sys.path``). One layer, 32 wide: every test that needs a real model uses it, so a
change of the model code is exercised the same way everywhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from posttrainlab.models.tiny import TinyModelConfig, build_model

SMALL_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}
SMALL = TinyModelConfig(**SMALL_SHAPE)


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """One intra-op torch thread while the block runs: tiny models gain nothing from more, and on a
    shared 2-core machine OpenMP threads spinning against another job made model tests ~3x slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def scaled_model(config: TinyModelConfig = SMALL, factor: float = 3.0):
    """``(model, tokenizer)`` of ``config`` with every weight times ``factor``: at the default init scale a
    random model answers every prompt alike, scaled its greedy outputs differ from prompt to prompt."""
    import torch

    model, tokenizer = build_model(config)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(factor)
    return model, tokenizer
