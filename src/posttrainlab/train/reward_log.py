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

**The probe** (``ProbeConfig``, ``probe.split`` set): a training log row measures the batch's own prompts, 2 to 8 of
them per step, so it moves with their difficulty as much as with the policy (the hacking of
docs/process-vs-outcome.md went unnamed in it). The probe samples one fixed held-out split every ``every`` steps,
``samples`` completions per prompt, through TRL's evaluation loop (the same reward functions, so the same metrics)
and writes the same rows to ``OUTPUT_DIR/reward_probe.jsonl`` (``PROBE_LOG``): the same prompts each time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REWARD_LOG = "reward_log.jsonl"
PROBE_LOG = "reward_probe.jsonl"
#: TRL's prefix of what its evaluation loop logs (the probe's metrics)
EVAL_PREFIX = "eval_"


@dataclass
class ProbeConfig:
    """The reward-hacking probe of a GRPO run (module docstring); off while ``split`` is null."""

    split: str | None = None  # an arith-v1 split of the run's dataset.path: validation (100 problems) is in no pool
    limit: int | None = None  # its first N problems
    every: int = 20  # optimizer steps between probes
    samples: int = 4  # completions per prompt (TRL's num_generations_eval)

    def check(self) -> None:
        """``BadInput`` naming the field for an empty split, or a limit, ``every`` or ``samples`` below 1."""
        from posttrainlab.errors import BadInput, at_least_one

        if self.split is not None and not self.split:
            raise BadInput("split: empty; name an arith-v1 split (validation), or null for no probe")
        at_least_one(limit=self.limit, every=self.every, samples=self.samples)


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


def probe_row(step: int, logs: dict) -> dict | None:
    """The ``reward_probe.jsonl`` row of one TRL evaluation log (its keys prefixed ``eval_``), or ``None``.

    >>> probe_row(20, {"eval_exact/accuracy": 0.5, "eval_loss": 0.0, "exact/accuracy": 0.9})
    {'step': 20, 'accuracy': 0.5}
    """
    return reward_row(step, {k[len(EVAL_PREFIX) :]: v for k, v in logs.items() if k.startswith(EVAL_PREFIX)})


def reward_log_callback(output_dir: str | os.PathLike):
    """A TrainerCallback that writes ``output_dir/reward_log.jsonl`` and, for a probed run, ``reward_probe.jsonl``
    (module docstring)."""
    from transformers import TrainerCallback

    from posttrainlab.data.jsonl import append_jsonl, read_jsonl, write_jsonl

    path, probe = Path(output_dir) / REWARD_LOG, Path(output_dir) / PROBE_LOG

    class RewardLogger(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            # a fresh start (step 0) empties them; a resumed run keeps its rows so far; no probe file is made unasked
            for file in (path, *([probe] if probe.is_file() else [])):
                kept = [r for r in read_jsonl(file) if r.get("step", 0) <= state.global_step] if file.is_file() else []
                write_jsonl(file, kept)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or not state.is_local_process_zero:
                return
            evaluation = any(k.startswith(EVAL_PREFIX) for k in logs)
            row = (probe_row if evaluation else reward_row)(state.global_step, logs)
            if row is not None:
                append_jsonl(probe if evaluation else path, row)

    return RewardLogger()


def read_reward_log(path: str | os.PathLike) -> list[dict]:
    """The rows of a ``reward_log.jsonl`` (a file, or a run folder holding one), in step order, the last row of a
    step kept when one repeats; ``BadInput`` for a missing or malformed file."""
    from posttrainlab.data.jsonl import read_jsonl

    path = Path(path)
    rows = read_jsonl(path / REWARD_LOG if path.is_dir() else path)
    return sorted({r["step"]: r for r in rows if isinstance(r.get("step"), int)}.values(), key=lambda r: r["step"])


__all__ = ["KEYS", "PROBE_LOG", "REWARD_LOG", "ProbeConfig", "probe_row", "read_reward_log", "reward_log_callback",
           "reward_row"]  # fmt: skip
