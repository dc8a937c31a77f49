"""``OUTPUT_DIR/reward_log.jsonl``: every GRPO run's reward-hacking log, one row per logging step.

The proxy a run optimises beside what it should raise, measured exactly on the run's own samples (arith-v1's step
labels; ``train.rewards`` and ``train.prm_reward`` log them through TRL's ``log_metric``, averaged over the logging
step's generation batches). A row holds, when logged:

- ``step``: the optimizer step of the log;
- ``reward``: TRL's total reward (the weighted sum of the reward functions);
- ``prm_score``: the PRM's mean score of the samples (the configured ``aggregation`` of the raw step scores, before
  clip and gate; runs with ``prm_reward.path`` only), and ``prm_step_score`` its mean over all steps;
- ``prm_reward``: the PRM reward as used (after ``clip``, ``outcome_gated``);
- ``prm_wrong_step_score``, ``prm_false_accept``: the PRM's mean score of each sample's first exactly wrong step,
  and the share of those it scores above 0.5 (``train.prm_reward.blind_spot_metrics``): its blind spot's use;
- ``accuracy``: the share of samples with the right final answer (the grader);
- ``any_wrong_step``: the share of samples with at least one wrong step; ``wrong_step_rate``: the share of wrong
  steps; ``trace_error``: among right answers, the share with a wrong step (``train.rewards.exact_sample_metrics``);
- ``kl``: TRL's KL to the reference (``beta`` > 0).

``report.hacking`` reads it (``read_reward_log``), plots it and names the step where the proxy still rises while
exact accuracy falls. A run resumed from a checkpoint keeps the rows up to the checkpoint's step and logs on; a fresh
start (or ``--overwrite``) starts the file afresh.
"""

from __future__ import annotations

import os
from pathlib import Path

REWARD_LOG = "reward_log.jsonl"
#: row key <- TRL log key (``train.rewards``, ``train.prm_reward``, TRL's own ``reward`` and ``kl``)
KEYS = {
    "reward": "reward",
    "prm_score": "prm/score",
    "prm_step_score": "prm/step_score",
    "prm_reward": "rewards/prm_reward/mean",
    "prm_wrong_step_score": "prm/wrong_step_score",
    "prm_false_accept": "prm/false_accept",
    "accuracy": "exact/accuracy",
    "any_wrong_step": "exact/any_wrong_step",
    "wrong_step_rate": "exact/wrong_step_rate",
    "trace_error": "exact/trace_error",
    "kl": "kl",
}
#: a log holding none of these is not a training step's (the end-of-training summary, an evaluation)
MEASURED = ("exact/accuracy", "prm/score")


def reward_row(step: int, logs: dict) -> dict | None:
    """The ``reward_log.jsonl`` row of one TRL log, or ``None`` when it holds no measurement.

    >>> reward_row(5, {"reward": 0.5, "exact/accuracy": 0.25, "loss": 0.1})
    {'step': 5, 'reward': 0.5, 'accuracy': 0.25}
    >>> reward_row(6, {"train_runtime": 12.0}) is None
    True
    """
    if not any(k in logs for k in MEASURED):
        return None
    return {"step": step, **{key: logs[source] for key, source in KEYS.items() if source in logs}}


def reward_log_callback(output_dir: str | os.PathLike):
    """A TrainerCallback that writes ``output_dir/reward_log.jsonl`` (module docstring)."""
    from transformers import TrainerCallback

    from posttrainlab.data.jsonl import append_jsonl, read_jsonl, write_jsonl

    path = Path(output_dir) / REWARD_LOG

    class RewardLogger(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            kept = [r for r in read_jsonl(path) if r.get("step", 0) <= state.global_step] if path.is_file() else []
            write_jsonl(path, kept)  # a fresh start (step 0) empties it; a resumed run keeps its rows so far

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or not state.is_local_process_zero:
                return
            row = reward_row(state.global_step, logs)
            if row is not None:
                append_jsonl(path, row)

    return RewardLogger()


def read_reward_log(path: str | os.PathLike) -> list[dict]:
    """The rows of a ``reward_log.jsonl`` (a file, or a run folder holding one), in step order, the last row of a
    step kept when one repeats; ``BadInput`` for a missing or malformed file."""
    from posttrainlab.data.jsonl import read_jsonl

    path = Path(path)
    rows = read_jsonl(path / REWARD_LOG if path.is_dir() else path)
    return sorted({r["step"]: r for r in rows if isinstance(r.get("step"), int)}.values(), key=lambda r: r["step"])


__all__ = ["KEYS", "REWARD_LOG", "read_reward_log", "reward_log_callback", "reward_row"]
