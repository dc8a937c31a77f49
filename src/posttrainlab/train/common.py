"""What SFT, DPO, GRPO and the PRM trainer share: data, models, the run folder, TrainingArguments, logging, resume.

Written once here so the trainer modules stay thin wrappers around TRL / ``transformers.Trainer`` (STYLE.md §9).

The run folder (``output_dir``), in order: ``check_run`` refuses a folder holding files no run wrote,
and an earlier run whose ``recipe.yaml`` differs from this recipe in more than how long it trains
(``RESUMABLE``), unless ``existing`` is ``resume`` (continue with this recipe) or ``overwrite`` (start
afresh); then the trainer checks its data and models; only then ``run_trainer`` writes ``recipe.yaml``,
says in one line where it resumes from, and trains. A run that fails its checks writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.run_layout import TRAIN_SUMMARY as SUMMARY  # the marker of a finished run (run_layout)
from posttrainlab.train.logs import LOG, TENSORBOARD, use_tensorboard_folder
from posttrainlab.train.recipes import DEFAULT_DATA, DatasetConfig, LoraSwitch, OptimConfig

RECIPE = "recipe.yaml"
#: what to do with an earlier run in output_dir (``posttrain train`` flags: none, --resume, --overwrite)
EXISTING = ("check", "resume", "overwrite")
#: recipe keys a resumed run may change without --resume: how long it trains, how often it logs and
#: saves, where the folder is, whether missing data may be built; none of them changes a step's update
RESUMABLE = frozenset(
    {"optim.epochs", "optim.max_steps", "optim.logging_steps", "optim.save_steps", "optim.save_total_limit",
     "output_dir", "dataset.prepare_if_missing"}
)  # fmt: skip


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


def check_model(spec: str | None) -> None:
    """``BadInput`` now, before any data is read or built, when a recipe's model is a local path with no model."""
    from posttrainlab.models.loading import check_folder, is_local

    if spec is None:
        return
    path = resolve_model(spec)
    if is_local(path):
        check_folder(path)


def load_records(cfg: DatasetConfig) -> list[dict]:
    """The recipe's split, checksum-verified (``data.problems.read_split``: a split without records is refused).

    A missing local folder is built (arith-v1) only where the user asked for it: at the default path
    ``data/arith-v1``, or anywhere with ``prepare_if_missing: true``. Anywhere else it is ``BadInput``,
    so a typo in ``dataset.path`` is not a new dataset.
    """
    from posttrainlab.data.problems import read_split

    path = Path(cfg.path)
    if not cfg.path.startswith("hf://") and not path.exists():
        asked = cfg.prepare_if_missing
        if asked is None:
            asked = path.resolve() == Path(DEFAULT_DATA).resolve()
        if not asked:
            raise BadInput(
                f"dataset.path {cfg.path}: no such folder; build it with `posttrain data prepare --out {cfg.path}` "
                "or set dataset.prepare_if_missing=true (a Hub dataset is hf://owner/name)"
            )
        from posttrainlab.data.arith.release import prepare

        prepare(path)
    return read_split(cfg.path, cfg.split, limit=cfg.limit)[1]


def checked_records(recipe, *models: str | None) -> list[dict]:
    """The recipe's split, read once its ``model`` and ``models`` (DPO's reference) are checked (every trainer)."""
    for spec in (recipe.model, *models):
        check_model(spec)
    return load_records(recipe.dataset)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def training_arguments(optim: OptimConfig, output_dir: str) -> dict[str, Any]:
    """The TrainingArguments fields every recipe sets the same way, from its ``optim`` and ``output_dir``."""
    from posttrainlab.train.launch import use_bf16

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
        "save_steps": optim.save_steps,
        "save_total_limit": optim.save_total_limit,
        "seed": optim.seed,
        "data_seed": optim.seed,
        # set explicitly: TRL's configs default the deprecated `gradient_checkpointing` alias to True
        "activation_checkpointing": optim.activation_checkpointing,
        "bf16": use_bf16(optim.bf16),  # autocast where optim.bf16 says so on this machine (train.launch)
    }


def default_arguments() -> dict[str, Any]:
    """The TrainingArguments values every trainer gets that no recipe field sets; ``trainer_args`` replaces them.
    Under a DeepSpeed launch on the CPU, DeepSpeed's inference-only shared-memory op is not compiled first
    (``launch.skip_cpu_shm_build``)."""
    import torch

    from posttrainlab.train.launch import skip_cpu_shm_build

    skip_cpu_shm_build()

    return {
        "save_strategy": "steps",
        "report_to": ["tensorboard"],
        "use_cpu": not torch.cuda.is_available(),
        "dataloader_num_workers": 0,
    }


def trainer_kwargs(config_cls, recipe, own: dict[str, Any], fixed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``config_cls`` (``trl.SFTConfig``, ``DPOConfig``, ``GRPOConfig`` or
    ``transformers.TrainingArguments``) for ``recipe``, checked before any model is loaded.

    The shared fields (``training_arguments``) and the trainer's ``own`` (from recipe fields: ``max_length``,
    ``beta``...), then ``default_arguments`` and the trainer's ``fixed`` values (no field sets them), then the
    recipe's ``trainer_args`` as they are. A ``trainer_args`` key that ``config_cls`` has no field for, or that a
    recipe field sets (one place per setting), is a one-line ``BadInput`` naming it.
    """
    from dataclasses import fields

    from_fields = training_arguments(recipe.optim, recipe.output_dir) | own
    known = {f.name for f in fields(config_cls)}
    for key in recipe.trainer_args:
        if key not in known:
            raise BadInput(f"trainer_args.{key}: not an argument of {config_cls.__name__}")
        if key in from_fields:
            raise BadInput(
                f"trainer_args.{key}: a recipe field sets it (now {from_fields[key]!r}; see --print-config); "
                "change that field instead"
            )
    return from_fields | default_arguments() | (fixed or {}) | recipe.trainer_args


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


def _is_earlier_run(folder: Path) -> bool:
    """Whether ``folder`` is the output_dir of an earlier training run (it holds a file only a run writes)."""
    return (folder / RECIPE).is_file() or (folder / SUMMARY).is_file() or last_checkpoint(folder) is not None


def _flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"optim.learning_rate": 0.001, ...}``; an empty one adds no key, so ``trainer_args: {}``
    equals a ``recipe.yaml`` written before the field existed."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def recipe_changes(saved: Path, recipe) -> list[str]:
    """``["optim.learning_rate 0.001 -> 0.5", ...]``: each key where ``recipe`` differs from the ``saved`` YAML.

    A key missing from ``saved`` whose value is the recipe class's default is not a change: it is a field added
    after that run was started (``dpo.preference``), and the run did what the default does.
    """
    import yaml

    from posttrainlab.config import to_dict

    try:
        old = yaml.safe_load(saved.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise BadInput(f"{saved}: unreadable ({type(e).__name__}); pass --resume or --overwrite") from None
    old = _flat(old if isinstance(old, dict) else {})
    new = _flat(yaml.safe_load(yaml.safe_dump(to_dict(recipe))))  # the saved file's types (lists, not tuples)

    def show(key: str, values: dict[str, Any]) -> str:
        return "(unset)" if key not in values else "null" if values[key] is None else str(values[key])

    # a key the saved file lacks, at its default value, is a field added since that run: not a change
    default = _flat(yaml.safe_load(yaml.safe_dump(to_dict(type(recipe)()))))
    keys = [
        k
        for k in dict.fromkeys([*old, *new])
        if old.get(k, ...) != new.get(k, ...) and not (k not in old and k in default and new.get(k) == default[k])
    ]
    return [f"{k} {show(k, old)} -> {show(k, new)}" for k in keys]


@dataclass
class Start:
    """Where a run starts (``check_run``): the checkpoint it resumes from, if any, and what changed since."""

    checkpoint: str | None = None
    step: int | None = None
    changes: list[str] = field(default_factory=list)  # recipe keys changed since recipe.yaml, "key old -> new"
    overwrite: bool = False  # discard the earlier run's checkpoints, log and summary first


def check_run(recipe, existing: str = "check") -> Start:
    """Check ``recipe.output_dir`` and decide where the run starts; nothing is written (module docstring).

    ``existing``: ``check`` resumes an earlier run only when its ``recipe.yaml`` matches (``RESUMABLE``
    keys aside), ``resume`` continues it with this recipe, ``overwrite`` starts afresh. The recipe's values are
    checked first (``config.check_settings``, as ``load_config`` does: a recipe built in Python gets it too).
    """
    from posttrainlab.config import check_settings
    from posttrainlab.data.atomic import check_output_folder

    if existing not in EXISTING:
        raise ValueError(f"existing={existing!r}: choose one of {', '.join(EXISTING)}")
    check_settings(recipe)
    out = Path(recipe.output_dir)
    earlier = out.is_dir() and _is_earlier_run(out)
    check_output_folder(out, lambda rel: earlier, what="training run (output_dir of posttrain train)")
    if not earlier or existing == "overwrite":
        return Start(overwrite=earlier)
    changes = recipe_changes(out / RECIPE, recipe) if (out / RECIPE).is_file() else []
    refused = [c for c in changes if c.split(" ", 1)[0] not in RESUMABLE]
    if refused and existing == "check":
        raise BadInput(
            f"output_dir {out}: its run was started with another recipe ({'; '.join(refused)}); pass --resume to "
            "continue it with this recipe, --overwrite to start afresh, or choose another output_dir"
        )
    checkpoint = last_checkpoint(out)
    step = None
    if checkpoint is not None:
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
        step = state.get("global_step", int(Path(checkpoint).name.split("-")[1]))
    return Start(checkpoint, step, changes)


def _discard_earlier_run(out: Path) -> None:
    """``--overwrite``: remove what an earlier run left that a new one would resume from or be mistaken for."""
    for folder in out.glob("checkpoint-*"):
        if folder.is_dir() and folder.name.split("-", 1)[1].isdigit():
            shutil.rmtree(folder)
    for name in (LOG, SUMMARY):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / TENSORBOARD, ignore_errors=True)


def run_trainer(trainer, recipe, method: str, n_records: int, start: Start | None = None) -> Path:
    """Write ``recipe.yaml``, train (from ``start``, see ``check_run``), save the model, write the summary.

    Called only after the run's data and models loaded: a run that fails its checks writes nothing.
    """
    from posttrainlab.config import save_config
    from posttrainlab.data.jsonl import write_json
    from posttrainlab.progress import use_train_log
    from posttrainlab.provenance import provenance
    from posttrainlab.train.finite import use_finite_check
    from posttrainlab.train.launch import leave_process_group, report_launch

    out = Path(recipe.output_dir)
    start = start if start is not None else check_run(recipe)
    if trainer.is_world_process_zero():
        if start.overwrite:
            _discard_earlier_run(out)
        elif start.checkpoint is None:  # a fresh start: don't mix curves of an earlier run
            (out / LOG).unlink(missing_ok=True)
            shutil.rmtree(out / TENSORBOARD, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        save_config(recipe, out / RECIPE)
        if start.checkpoint is not None:
            changed = f"; recipe changed: {'; '.join(start.changes)}" if start.changes else ""
            print(f"{method}: resuming from {start.checkpoint} (step {start.step}){changed}", flush=True)
    use_train_log(trainer, method)  # one line per logging step, not transformers' dicts and tqdm bars
    use_tensorboard_folder(trainer, out)  # out/tensorboard, not transformers' out/runs/<date>_<host> (train.logs)
    report_launch(trainer, method)  # under accelerate launch: one line, what the processes run (train.launch)
    use_finite_check(trainer, method)  # a non-finite loss, gradient or weight stops the run: no model, no summary
    t0 = time.time()
    result = trainer.train(resume_from_checkpoint=start.checkpoint)
    save_model(trainer, out)
    if trainer.is_world_process_zero():
        trainer.processing_class.save_pretrained(str(out))
        summary = {
            "method": method,
            "model": recipe.model,
            "records": n_records,
            "resumed_from": start.checkpoint,
            "recipe_changes": start.changes,
            "global_step": trainer.state.global_step,
            "bf16": bool(trainer.args.bf16),  # optim.bf16 as it resolved here (train.launch.use_bf16)
            "train_loss": result.training_loss,
            "seconds": time.time() - t0,
            "recipe": asdict(recipe),
            "provenance": provenance(seeds={"seed": recipe.optim.seed}),
        }
        write_json(out / SUMMARY, summary)  # strict JSON: a NaN loss as null, never `Infinity`
    leave_process_group()
    return out


def save_model(trainer, out: Path) -> None:
    """Save the trained model into ``out``; a LoRA run's adapter is merged into the base weights first.

    Every command downstream (``eval policy``, ``serve``, DPO/GRPO from SFT, a PRM from a policy) loads a plain model
    folder, so a LoRA run leaves one too, not an adapter that would need peft and the base to load.
    """
    model = trainer.model
    if not hasattr(model, "merge_and_unload"):  # not a peft model
        trainer.save_model(str(out))
        return
    if trainer.is_world_process_zero():
        merged = model.merge_and_unload()
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            (out / name).unlink(missing_ok=True)
        merged.save_pretrained(str(out), safe_serialization=True)


def run_rows(recipe, start, cfg, kept, records: list[dict], backend=None, recorded=None) -> tuple[list, dict]:
    """``sampled_rows`` for a training run: ``cfg``'s samples of ``records`` from the recipe's starting ``model``, in
    its ``output_dir`` (reused unless the run overwrites). A fresh folder then gets ``recorded`` (default: ``recipe``)
    as ``recipe.yaml``, so it reads as an earlier run of this recipe from now on (its samples are reused)."""
    from posttrainlab.config import save_config
    from posttrainlab.train.policy_samples import sampled_rows, settings_of

    out = Path(recipe.output_dir)
    fresh = not (out / RECIPE).is_file() and not start.overwrite
    policy = resolve_model(recipe.model)
    found = sampled_rows(
        records, cfg, policy, out, kept, settings=settings_of(cfg, policy, recipe.dataset, records, kept.keys),
        backend=backend, reuse=not start.overwrite, trust_remote_code=recipe.trust_remote_code,
    )  # fmt: skip
    if fresh:
        save_config(recorded or recipe, out / RECIPE)
    return found
