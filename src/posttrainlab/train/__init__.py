"""Training: pretraining of the tiny base, SFT / DPO / GRPO on TRL, and (later) PRMs on transformers.Trainer."""
