"""The one small model shape of the tests (importable from any test folder: tests/conftest.py puts
``tests/`` on ``sys.path``). One layer, 32 wide: every test that needs a real model uses it, so a
change of the model code is exercised the same way everywhere.
"""

from __future__ import annotations

from posttrainlab.models.tiny import TinyModelConfig

SMALL_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}
SMALL = TinyModelConfig(**SMALL_SHAPE)
