"""A recipe's TRL trainer (SFT, DPO, GRPO), built in the order every trainer keeps (``train.common``'s checks first):
the model checked, the records read (or the ones given), the policy loaded, then the TRL config and the trainer.

``build_trl`` is that order for SFT and GRPO; DPO loads its frozen reference between the policy and the config
(``train.dpo.build_trainer``), with the same ``load_policy`` and ``trl_trainer``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from posttrainlab.train.common import check_model, load_records, peft_config, resolve_model
from posttrainlab.train.logs import log_callback


def load_policy(recipe, padding_side: str):
    """The recipe's starting model and tokenizer, padded on ``padding_side`` (right to train, left to sample)."""
    from posttrainlab.models.loading import load_causal_lm

    model, tokenizer = load_causal_lm(resolve_model(recipe.model), trust_remote_code=recipe.trust_remote_code)
    tokenizer.padding_side = padding_side
    return model, tokenizer


def trl_trainer(trainer_cls, recipe, model, tokenizer, args, rows: list[dict], **extra):
    """A TRL trainer over ``rows`` with the recipe's LoRA switch and the JSONL log callback."""
    from datasets import Dataset

    return trainer_cls(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config(recipe.lora),
        callbacks=[log_callback(recipe.output_dir)],
        **extra,
    )


def build_trl(
    trainer_cls, config_cls, recipe, kwargs: dict[str, Any], rows_of: Callable[[list[dict]], list[dict]],
    records: list[dict] | None = None, *, padding_side: str, **extra,
) -> tuple[Any, int]:  # fmt: skip
    """``(trainer, records)``: ``trainer_cls`` over ``rows_of(records)`` (default: the recipe's split as it is), its
    config ``config_cls(**kwargs)`` (``common.trainer_kwargs``, checked before), the policy padded on
    ``padding_side``; ``extra`` goes to the trainer (GRPO's ``reward_funcs``)."""
    check_model(recipe.model)
    records = load_records(recipe.dataset) if records is None else records
    model, tokenizer = load_policy(recipe, padding_side=padding_side)
    args = config_cls(**kwargs)
    return trl_trainer(trainer_cls, recipe, model, tokenizer, args, rows_of(records), **extra), len(records)


__all__ = ["build_trl", "load_policy", "trl_trainer"]
