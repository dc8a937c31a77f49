r"""Train a process reward model on ``transformers.Trainer`` (``posttrain train prm``).

    posttrain train prm --config configs/prm/step.yaml
    posttrain train prm --config configs/prm/span.yaml model=Qwen/Qwen2.5-Math-1.5B-Instruct lora.enabled=true
    posttrain train prm --config configs/prm/soft.yaml head=token-cls optim.max_steps=200
    accelerate launch --config_file configs/accelerate/ddp_cpu.yaml -m posttrainlab \
        train prm --config configs/prm/step.yaml   # 2 CPU processes; GPUs: ddp.yaml, fsdp.yaml, deepspeed_zero3.yaml

Hand-written because TRL removed its PRMTrainer. What ``transformers.Trainer`` brings unchanged:
checkpoints, resume (``common.check_run``), accelerate, logging. What is ours: the data
(``prm.examples``: one sequence per solution, a label on each separator), the two heads
(``prm.heads``: token classification or a verdict token) and the losses (``prm.losses``: hard,
class-weighted or soft-target cross-entropy), wired in through ``compute_loss``; the head's own learning rate
and the backbone freeze (``train.prm_optim``), wired in through ``create_optimizer`` / ``create_scheduler``.
The PRM itself (format, heads, loading, examples, losses, scoring) is ``posttrainlab.prm``'s; this module is the
trainer, beside the other trainers.

The run folder holds the model and tokenizer in Hugging Face format plus ``prm_config.json`` (head,
separator, format, input format; ``no_answer_step`` when the rows hold arith-prm's explicit missing-answer
step), so ``posttrainlab.prm.PRM.from_pretrained(output_dir)`` scores with it; every
checkpoint gets the same file. A LoRA run is merged into the base weights before the final save.

An outcome reward model (ORM) is this trainer too: ``supervision: outcome | outcome-last`` trains the same heads on
outcome labels (``prm.examples.outcome_labels``) and writes ``orm: true`` into ``prm_config.json``, so every
loader scores it by its last step (docs/process-vs-outcome.md); ``posttrain train orm`` is ``train prm`` refusing
a recipe that is not an ORM's.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP
from posttrainlab.errors import BadInput
from posttrainlab.prm.examples import make_examples, read_items
from posttrainlab.prm.losses import IGNORE, prm_loss
from posttrainlab.train.common import check_run, peft_config, resolve_model, run_trainer, trainer_kwargs
from posttrainlab.train.logs import log_callback
from posttrainlab.train.prm_recipe import OUTCOME_SUPERVISION, PRMRecipe

log = logging.getLogger(__name__)


def collate(pad_id: int):
    """Right-pad ``input_ids`` (with ``pad_id``) and ``labels`` (with ``IGNORE``); add the attention mask. A result
    head's ``segments`` are padded with ``prm.results.NO_STEP``."""
    import torch

    from posttrainlab.generation.prompts import right_pad, right_pad_ids
    from posttrainlab.prm.results import NO_STEP

    def collate_fn(batch: list[dict]) -> dict:
        ids, mask = right_pad_ids([ex["input_ids"] for ex in batch], pad_id)
        labels = right_pad([ex["labels"] for ex in batch], IGNORE, torch.float32)
        out = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if "segments" in batch[0]:
            out["segments"] = right_pad([ex["segments"] for ex in batch], NO_STEP)
        return out

    return collate_fn


def batch_loss(model, head, batch: dict, *, soft: bool, class_weights=None):
    """The PRM loss of one collated batch (``compute_loss`` and the grouping test/bench share it)."""
    logits = head.logits(model, batch["input_ids"], batch["attention_mask"], batch.get("segments"))
    return prm_loss(logits, batch["labels"].to(logits.device), soft=soft, class_weights=class_weights)


def _trainer_class():
    from transformers import Trainer, TrainerCallback

    class PRMTrainer(Trainer):
        """``Trainer`` with the PRM loss; the loss is a mean per batch, so Trainer scales it for accumulation."""

        loss_is_scaled_for_ga = False

        def __init__(self, *args, prm_head, soft: bool, class_weights, head_lr=None, freeze_steps=0, **kwargs):
            super().__init__(*args, **kwargs)
            self.prm_head, self.soft, self.class_weights = prm_head, soft, class_weights
            self.head_lr, self.freeze_steps = head_lr, freeze_steps  # train.prm_optim

        def create_optimizer(self, model=None):
            fresh = self.optimizer is None
            optimizer = super().create_optimizer(model)
            if fresh and (self.head_lr is not None or self.freeze_steps):
                from posttrainlab.train.prm_optim import head_parameter_ids, split_groups

                split_groups(optimizer, head_parameter_ids(self.model if model is None else model), self.head_lr)
            return optimizer

        def create_scheduler(self, num_training_steps, optimizer=None):
            fresh = self.lr_scheduler is None
            scheduler = super().create_scheduler(num_training_steps, optimizer)
            if fresh and self.freeze_steps:
                from posttrainlab.train.prm_optim import freeze_backbone

                freeze_backbone(scheduler, self.freeze_steps)
            return scheduler

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = batch_loss(model, self.prm_head, inputs, soft=self.soft, class_weights=self.class_weights)
            return (loss, {}) if return_outputs else loss  # no outputs: evaluation logs the loss only

    class SpecWriter(TrainerCallback):
        """Put ``prm_config.json`` in every checkpoint, so a checkpoint scores like the final model."""

        def __init__(self, spec):
            self.spec = spec

        def on_save(self, args, state, control, **kwargs):
            from posttrainlab.prm.spec import write_spec

            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and folder.is_dir():
                write_spec(self.spec, folder)

    return PRMTrainer, SpecWriter


def config_class():
    """``transformers.TrainingArguments``: the config class whose fields ``trainer_args`` may set (``posttrain train``
    checks them)."""
    from transformers import TrainingArguments

    return TrainingArguments


def _instruction(recipe: PRMRecipe) -> str:
    """The policy format's instruction: the recipe's, else arith-v1's (the qwen format has none)."""
    from posttrainlab.data.arith.problems import INSTRUCTION

    if recipe.input_format != "policy":
        return ""
    return INSTRUCTION if recipe.instruction is None else recipe.instruction


def build_trainer(recipe: PRMRecipe):
    """``(trainer, n_examples, spec)``: data read and checked first, then the model, then the Trainer."""
    import torch
    from transformers import set_seed

    TrainingArguments = config_class()

    from posttrainlab.prm.heads import is_causal, make_head
    from posttrainlab.prm.loading import load_for_training
    from posttrainlab.prm.spec import DEFAULT_SYSTEM

    recipe.check()
    data = recipe.dataset
    own = {"train_sampling_strategy": "group_by_length" if recipe.length_grouping else "random"}
    own |= {} if data.eval_path is None else {
        "eval_strategy": "steps",
        "eval_steps": data.eval_steps or recipe.optim.save_steps,
        "per_device_eval_batch_size": recipe.optim.batch_size,
        "prediction_loss_only": True,
    }  # fmt: skip
    kwargs = trainer_kwargs(
        TrainingArguments, recipe, own, fixed={"remove_unused_columns": False, "label_names": ["labels"]}
    )
    soft = recipe.supervision == "soft"
    outcome = recipe.supervision if recipe.supervision in OUTCOME_SUPERVISION else None  # an ORM: outcome labels
    items = read_items(data, soft=soft, outcome=outcome)  # a bad data file fails before any model is loaded
    held = None if data.eval_path is None else read_items(replace(data, path=data.eval_path, limit=data.eval_limit),
                                                          soft=soft, outcome=outcome)  # fmt: skip
    set_seed(recipe.optim.seed)  # a fresh token-cls head is initialised from this seed
    model, tokenizer, spec = load_for_training(
        resolve_model(recipe.model),
        head=recipe.head,
        separator=recipe.separator,
        chat=recipe.chat_template,
        system_prompt=DEFAULT_SYSTEM if recipe.system_prompt is None else recipe.system_prompt,
        yes_token=recipe.yes_token,
        no_token=recipe.no_token,
        trust_remote_code=recipe.trust_remote_code,
        input_format=recipe.input_format,
        instruction=_instruction(recipe),
    )
    if any(NO_ANSWER_STEP in getattr(item, "steps", ()) for item in items):  # arith-prm's missing-answer step:
        spec = replace(spec, no_answer_step=NO_ANSWER_STEP)  # best-of-N and beam search append it when scoring
    if outcome is not None:  # scored by its last step wherever it is loaded (prm.spec.PRMSpec.orm)
        spec = replace(spec, orm=True)
    grouped = recipe.dataset.format == "mc-value" and recipe.dataset.mc_rows == "grouped"
    if grouped and not is_causal(model.config):
        raise BadInput(
            f"{recipe.model}: grouped MC-value training needs a causal model (a bidirectional encoder lets a "
            "step's target see later steps); set dataset.mc_rows=prefix"
        )

    def examples_of(rows, where: str):
        return make_examples(
            tokenizer,
            spec,
            rows,
            span_tokens=recipe.supervision == "span",
            last_only=recipe.train_on_last_step_only,
            max_length=recipe.max_length,
            where=where,
        )

    examples, dropped = examples_of(items, recipe.dataset.path)
    eval_examples = None if held is None else examples_of(held, data.eval_path)[0]
    if dropped:
        log.warning("%s: %d solution(s) dropped: no label left within max_length %d", recipe.dataset.path, dropped,
                    recipe.max_length)  # fmt: skip
    lora = peft_config(recipe.lora)
    if lora is not None:
        from peft import get_peft_model

        if spec.head == "token-cls":
            # peft then trains the classification head in full (modules_to_save), so LoRA must not wrap it too
            lora.task_type = "TOKEN_CLS"
            lora.exclude_modules = ["score", "score.0", "score.2", "classifier"]
        model = get_peft_model(model, lora)
    args = TrainingArguments(**kwargs)
    trainer_cls, spec_writer = _trainer_class()
    trainer = trainer_cls(
        model=model,
        args=args,
        train_dataset=examples,
        eval_dataset=eval_examples,
        data_collator=collate(tokenizer.pad_token_id),
        processing_class=tokenizer,
        callbacks=[log_callback(recipe.output_dir), spec_writer(spec)],
        prm_head=make_head(spec, tokenizer),
        head_lr=recipe.head_learning_rate,
        freeze_steps=recipe.freeze_backbone_steps,
        soft=soft,
        class_weights=torch.tensor(recipe.class_weights, dtype=torch.float32),
    )
    return trainer, len(examples), spec


def train_prm(recipe: PRMRecipe, existing: str = "check") -> Path:
    """Check the run folder, the data and the model; then write ``recipe.yaml``, train (resuming when a checkpoint
    exists, ``common.check_run``) and save the model with its ``prm_config.json``."""
    from posttrainlab.prm.spec import write_spec

    start = check_run(recipe, existing)
    trainer, n, spec = build_trainer(recipe)
    # an ORM's lines, summary and errors say "orm" (the quickstart's orm stage printed "prm  step …")
    name = "orm" if recipe.supervision in OUTCOME_SUPERVISION else "prm"
    out = run_trainer(trainer, recipe, name, n, start)  # a LoRA run is saved merged (common.save_model)
    if trainer.is_world_process_zero():
        write_spec(spec, out)
    return out
