"""What SFT, DPO and GRPO share: data, model resolution, TrainingArguments, logging, resume, saving.

Written once here so the three trainer modules stay thin wrappers around TRL (STYLE.md §9).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.train.recipes import DatasetConfig, LoraSwitch, OptimConfig

SUMMARY = "train_summary.json"
LOG = "train_log.jsonl"


def base_model_path() -> Path:
    """The cached tiny base of the default pretraining config (``model: base`` in a recipe).

    ``PretrainConfig()``'s defaults are configs/models/tiny-base.yaml (a test keeps them equal).
    """
    from posttrainlab.train.pretrain import PretrainConfig, base_cache_path, is_cached

    cfg = PretrainConfig()
    path = base_cache_path(cfg)
    if not is_cached(path, cfg):
        raise BadInput(
            "model 'base': no cached tiny base yet; build it once with "
            "`posttrain model pretrain --config configs/models/tiny-base.yaml` (or run `posttrain quickstart`)"
        )
    return path


def resolve_model(spec: str) -> str:
    """A recipe's ``model`` field as a loadable path or Hub id."""
    if spec == "base":
        return str(base_model_path())
    return spec


def load_records(cfg: DatasetConfig) -> list[dict]:
    """The recipe's split, checksum-verified; a missing local arith-v1 folder is built first."""
    from posttrainlab.data.loading import load_split

    path = Path(cfg.path)
    if cfg.prepare_if_missing and not cfg.path.startswith("hf://") and not path.exists():
        from posttrainlab.data.arith.release import prepare

        prepare(path)
    records = load_split(cfg.path, cfg.split, limit=cfg.limit)
    if not records:
        raise BadInput(f"{cfg.path}:{cfg.split}: no records")
    return records


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def training_arguments(optim: OptimConfig, output_dir: str) -> dict[str, Any]:
    """The TrainingArguments fields every recipe sets the same way."""
    import torch

    return {
        "output_dir": output_dir,
        "num_train_epochs": optim.epochs,
        "max_steps": optim.max_steps,
        "learning_rate": optim.learning_rate,
        "per_device_train_batch_size": optim.batch_size,
        "gradient_accumulation_steps": optim.grad_accum,
        "lr_scheduler_type": optim.lr_scheduler,
        "warmup_steps": optim.warmup_ratio,
        "weight_decay": optim.weight_decay,
        "max_grad_norm": optim.max_grad_norm,
        "logging_steps": optim.logging_steps,
        "save_strategy": "steps",
        "save_steps": optim.save_steps,
        "save_total_limit": optim.save_total_limit,
        "seed": optim.seed,
        "data_seed": optim.seed,
        "report_to": ["tensorboard"],
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_num_workers": 0,
        "bf16": torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
        # set explicitly: TRL's configs default the deprecated `gradient_checkpointing` alias to True
        "activation_checkpointing": optim.activation_checkpointing,
    }


def peft_config(lora: LoraSwitch):
    """A peft LoraConfig when the switch is on, else None."""
    if not lora.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def last_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest *complete* ``checkpoint-N`` folder in ``output_dir`` (the resume point), if any.

    transformers writes ``trainer_state.json`` last when it saves a checkpoint, so a folder without it
    is one the run was killed while writing; it is skipped (an older complete one still exists then,
    since old checkpoints are rotated out only after a new one is saved).
    """
    import re

    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    done = [p for p in folder.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    done = [p for p in done if (p / "trainer_state.json").is_file()]
    return str(max(done, key=lambda p: int(p.name.split("-")[1]))) if done else None


def log_callback(output_dir: str | os.PathLike):
    """A TrainerCallback that appends every log event to ``output_dir/train_log.jsonl``."""
    from transformers import TrainerCallback

    path = Path(output_dir) / LOG

    class JsonlLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            row = {"step": state.global_step, "epoch": state.epoch, **logs}
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    return JsonlLogger()


def run_trainer(trainer, recipe, method: str, n_records: int) -> Path:
    """Train (resuming from the last checkpoint when there is one), save the model, write the summary."""
    out = Path(recipe.output_dir)
    resume = last_checkpoint(out)
    if resume is None and (out / LOG).exists():
        (out / LOG).unlink()  # a fresh start: don't mix curves of an earlier run
    t0 = time.time()
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(out))
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(str(out))
        from dataclasses import asdict

        from posttrainlab.data.atomic import write_text

        summary = {
            "method": method,
            "model": recipe.model,
            "records": n_records,
            "resumed_from": resume,
            "global_step": trainer.state.global_step,
            "train_loss": result.training_loss,
            "seconds": time.time() - t0,
            "recipe": asdict(recipe),
        }
        write_text(out / SUMMARY, json.dumps(summary, indent=2) + "\n")
    return out


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
