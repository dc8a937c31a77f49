"""Models: the tiny arith model (tokenizer, config, init, pretraining) and loading any HF causal LM."""
