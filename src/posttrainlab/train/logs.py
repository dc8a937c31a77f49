"""Where a training run's logs go, inside its ``output_dir`` (docs/policy-lab.md "Training"):

- ``train_log.jsonl``: every log event, one JSON line each (``log_callback``), which the report draws;
- ``tensorboard/``: TensorBoard's event files (``report_to: [tensorboard]``, the default), for
  ``tensorboard --logdir OUTPUT_DIR/tensorboard``. transformers would write them to ``OUTPUT_DIR/runs/<date>_<host>/``,
  a ``runs/`` folder beside the model that the docs did not name (issue #25); ``use_tensorboard_folder`` points its
  callback here. A run resumed from a checkpoint adds an event file to the same folder, so its curves continue; a
  fresh start or ``--overwrite`` removes the earlier run's (``train.common.run_trainer``). ``TENSORBOARD_LOGGING_DIR``,
  transformers' own variable, still wins where it is set.
"""

from __future__ import annotations

import os
from pathlib import Path

from posttrainlab.run_layout import TRAIN_LOG as LOG  # the run folder's name for it (the report reads it)

TENSORBOARD = "tensorboard"


def log_callback(output_dir: str | os.PathLike):
    """A TrainerCallback that appends every log event to ``output_dir/train_log.jsonl``."""
    from transformers import TrainerCallback

    from posttrainlab.data.jsonl import strict_json

    path = Path(output_dir) / LOG

    class JsonlLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            row = {"step": state.global_step, "epoch": state.epoch, **logs}
            with open(path, "a", encoding="utf-8") as f:
                f.write(strict_json(row) + "\n")  # NaN as null: strict JSON (data.jsonl)

    return JsonlLogger()


def use_tensorboard_folder(trainer, output_dir: str | os.PathLike) -> None:
    """Point the trainer's TensorBoard callback (when ``report_to`` has one) at ``output_dir/tensorboard``; called
    before ``trainer.train()``, as the callback picks its folder when training begins."""
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = str(Path(output_dir) / TENSORBOARD)


__all__ = ["LOG", "TENSORBOARD", "log_callback", "use_tensorboard_folder"]
