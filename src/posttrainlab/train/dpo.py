"""DPO on TRL's DPOTrainer (``posttrain train dpo``), with a frozen reference model.

    posttrain train dpo --config configs/arith/dpo.yaml model=runs/sft

The reference is a frozen copy of the starting policy unless ``ref_model`` names another checkpoint.
Ours: the preference rows as chat prompt/chosen/rejected, and where they come from (``preference.source``):
``synthetic``, the split's own rows; ``policy``, pairs sampled from the starting policy ``model`` and graded
(``label.policy_pairs``; docs/policy-lab.md "DPO pairs"), written to ``output_dir/preference_pairs.jsonl`` before
training and reused by a resumed run; ``step``, sampled the same way, each wrong line against the reference's line
after the sample's own right lines (Step-DPO, ``label.step_pairs``), trained as text rows (``step_rows``).

Order (``common.check_run``): the preference values, the run folder, the trainer arguments, the models, the data;
then the sampling model loads, samples and is freed; only then are the pairs and ``recipe.yaml`` written (a new
folder holding pairs is an earlier run's, so a run killed before its first checkpoint starts again cleanly).
"""

from __future__ import annotations

from pathlib import Path

from posttrainlab.errors import BadInput
from posttrainlab.train.common import (
    Start,
    assistant,
    check_model,
    check_run,
    checked_records,
    load_records,
    resolve_model,
    run_rows,
    run_trainer,
    trainer_kwargs,
    user,
)
from posttrainlab.train.recipes import DPORecipe
from posttrainlab.train.trl_build import load_policy, trl_trainer


def dpo_rows(records: list[dict]) -> list[dict]:
    """arith-v1 preference records as TRL conversational preference rows."""
    return [
        {"prompt": user(r["prompt"]), "chosen": assistant(r["chosen"]), "rejected": assistant(r["rejected"])}
        for r in records
    ]


def step_rows(records: list[dict], tokenizer) -> list[dict]:
    """Step pairs as TRL text rows: the prompt is the chat-templated question with the assistant's turn opened and
    the sample's right lines in it; chosen and rejected are one line each (``label.step_pairs``)."""
    from posttrainlab.generation.prompts import continuation_text  # the text the policy was sampled from

    return [{"prompt": continuation_text(tokenizer, user(r["prompt"]), r["prefix"]), "chosen": r["chosen"],
             "rejected": r["rejected"]} for r in records]  # fmt: skip


def open_lines(trainer) -> None:
    """Take TRL's end of sequence off the step completions that end in a newline.

    TRL ends every text completion with EOS (``DPOTrainer._prepare_dataset``). A step line followed by a newline has
    more to come, so its EOS would teach the policy to stop after that line; a last line keeps it, which is the end
    of turn of this project's chat template (``<|im_end|>`` for the tiny model and SmolLM2).
    """
    tokenizer, data = trainer.processing_class, trainer.train_dataset
    missing = {"chosen", "rejected", "chosen_ids", "rejected_ids"} - set(data.column_names)
    if missing:
        raise RuntimeError(f"DPOTrainer's tokenized rows lack {sorted(missing)}: this TRL lays them out otherwise")
    end, end_id = "\n" + tokenizer.eos_token, tokenizer.eos_token_id

    def strip(row: dict) -> dict:
        for text, ids in (("chosen", "chosen_ids"), ("rejected", "rejected_ids")):
            if row[text].endswith(end) and row[ids][-1:] == [end_id]:
                row[ids] = row[ids][:-1]
        return row

    trainer.train_dataset = data.map(strip)


def config_class():
    """``trl.DPOConfig``: the config class whose fields ``trainer_args`` may set (``posttrain train`` checks them)."""
    from trl import DPOConfig

    return DPOConfig


def dpo_kwargs(recipe: DPORecipe) -> dict:
    """``trl.DPOConfig``'s keyword arguments for ``recipe``; a bad ``trainer_args`` key is refused here."""
    own = {"beta": recipe.beta, "loss_type": [recipe.loss_type], "max_length": recipe.max_length}
    if recipe.sft_weight > 0:  # RPO: DPO + sft_weight x the chosen answer's NLL (TRL combines listed losses)
        own |= {"loss_type": [recipe.loss_type, "sft"], "loss_weights": [1.0, recipe.sft_weight]}
    return trainer_kwargs(config_class(), recipe, own)


def build_trainer(recipe: DPORecipe, records: list[dict] | None = None):
    """The DPOTrainer over ``records`` (default: the recipe's split as it is, ``preference.source: synthetic``);
    step pairs (``preference.source: step``) as text rows whose open lines end without EOS (``open_lines``)."""
    from trl import DPOTrainer

    from posttrainlab.models.loading import load_causal_lm

    kwargs = dpo_kwargs(recipe)
    step = recipe.preference.source == "step"
    if step and records is None:
        raise BadInput("preference.source=step: the trainer needs the sampled step pairs (train_dpo samples them)")
    check_model(recipe.model)
    check_model(recipe.ref_model)
    records = load_records(recipe.dataset) if records is None else records
    model, tokenizer = load_policy(recipe, padding_side="right")
    ref = None
    if recipe.ref_model:
        ref, _ = load_causal_lm(resolve_model(recipe.ref_model), trust_remote_code=recipe.trust_remote_code)
    args = config_class()(**kwargs)
    rows = step_rows(records, tokenizer) if step else dpo_rows(records)
    trainer = trl_trainer(DPOTrainer, recipe, model, tokenizer, args, rows, ref_model=ref)
    if step:
        open_lines(trainer)
    return trainer, len(records)


def sampled_records(recipe: DPORecipe, start: Start, backend=None) -> list[dict]:
    """``preference.source: policy`` or ``step``: the run's pairs, sampled from ``model`` or reused from output_dir.

    The policy sampled is the starting ``model``, not ``ref_model``: the pairs are on-policy for the first step.
    A fresh folder gets ``recipe.yaml`` with the pairs, so it reads as an earlier run of this recipe afterwards.
    """
    from posttrainlab.label.policy_pairs import check_records, pair_rows

    dpo_kwargs(recipe)
    records = checked_records(recipe, recipe.ref_model)
    check_records(records, recipe.preference, recipe.dataset)
    return run_rows(recipe, start, recipe.preference, pair_rows(recipe.preference), records, backend)[0]


def train_dpo(recipe: DPORecipe, existing: str = "check", backend=None) -> Path:
    """Check the preference values and the run folder, then the data and the models, then train (module docstring).

    ``backend`` (a ``SamplingBackend``) replaces the model sampled for ``preference.source: policy``.
    """
    from posttrainlab.label.policy_pairs import check_preference

    check_preference(recipe.preference)
    start = check_run(recipe, existing)
    records = sampled_records(recipe, start, backend) if recipe.preference.source != "synthetic" else None
    trainer, n = build_trainer(recipe, records)
    return run_trainer(trainer, recipe, "dpo", n, start)
