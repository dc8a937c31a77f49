"""Finite training only (issue #42): a step whose loss or gradient norm is not finite stops the run there.

``optim.learning_rate=inf`` used to train on, print ``grad nan`` and "final loss 0" (transformers'
``logging_nan_inf_filter`` replaces a NaN loss by the running mean), save a model whose every weight was NaN and a
``train_summary.json`` that said the run finished; DPO then trained from it. The recipes refuse a rate or weight that
is not finite (``recipe_parts.OptimConfig.check``), but a finite rate can still diverge, so every trainer of the lab
(``common.run_trainer``: SFT, DPO, GRPO, RFT, PRM; ``pretrain``) gets ``FiniteCallback``:

- before each optimizer step, the norm of the gradients about to be applied (after clipping: a NaN or infinite
  loss makes it NaN) must be finite: one pass over the gradients, as clipping makes;
- every log's ``loss`` and ``grad_norm`` must be finite (``use_finite_check`` turns ``logging_nan_inf_filter`` off,
  so a NaN loss is not averaged away);
- before a checkpoint is saved, and after the last step, every weight must be finite, so no checkpoint or model
  holds NaN.

A fault raises ``errors.Diverged`` (one line naming the method, the step and the value; exit 1). It leaves the
trainer before ``run_trainer`` saves the model or writes ``train_summary.json``, so the folder keeps only the
complete checkpoints saved before the fault, and the run does not count as done.

Why a callback and not a subclass: it serves TRL's trainers and ``transformers.Trainer`` alike, with no change to
their loops. Every rank sees the same reduced gradients and logs, so under ``accelerate launch`` all ranks stop
at the same step.
"""

from __future__ import annotations

import math
from functools import cache

from posttrainlab.errors import Diverged

#: the log keys that must be finite
CHECKED_LOGS = ("loss", "grad_norm")


def _advice(method: str) -> str:
    return (
        f"{method} stopped: no model saved, no train_summary.json (the complete checkpoints before it are kept); "
        "lower optim.learning_rate or check the data"
    )


def gradient_norm(model) -> float:
    """The L2 norm of every gradient of ``model`` (0 when none is set), as a float."""
    import torch

    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    return float(torch.nn.utils.get_total_norm(grads)) if grads else 0.0  # fused, as clip_grad_norm_ computes it


def first_non_finite_weight(model) -> str | None:
    """The name of the first parameter of ``model`` holding a NaN or an infinity, else ``None``."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() and not bool(torch.isfinite(p).all()):
                return name
    return None


def check_logs(method: str, step: int, logs: dict) -> None:
    """``Diverged`` when a log's ``loss`` or ``grad_norm`` is NaN or infinite.

    >>> check_logs("sft", 3, {"loss": 0.5, "grad_norm": 1.2, "learning_rate": 1e-4})
    >>> check_logs("sft", 4, {"loss": float("nan")})
    Traceback (most recent call last):
    ...
    posttrainlab.errors.Diverged: sft step 4: loss nan is not finite; sft stopped: no model saved, no \
train_summary.json (the complete checkpoints before it are kept); lower optim.learning_rate or check the data
    """
    for key in CHECKED_LOGS:
        value = logs.get(key)
        if isinstance(value, (int, float)) and not math.isfinite(value):
            raise Diverged(f"{method} step {step}: {key.replace('_', ' ')} {value} is not finite; {_advice(method)}")


def check_weights(method: str, step: int, model) -> None:
    """``Diverged`` when a weight of ``model`` is NaN or infinite (before it is saved)."""
    name = first_non_finite_weight(model)
    if name is not None:
        raise Diverged(f"{method} step {step}: weight {name} is not finite; {_advice(method)}")


@cache
def _callback_class():
    from transformers import TrainerCallback

    class FiniteCallback(TrainerCallback):
        """Stop the run at the first step whose loss, gradient norm or weights are not finite (module docstring)."""

        def __init__(self, method: str):
            self.method = method

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            if model is None:
                return
            norm = gradient_norm(model)
            if not math.isfinite(norm):
                raise Diverged(
                    f"{self.method} step {state.global_step + 1}: gradient norm {norm} is not finite; "
                    f"{_advice(self.method)}"
                )

        def on_log(self, args, state, control, logs=None, **kwargs):
            check_logs(self.method, state.global_step, logs or {})

        def on_step_end(self, args, state, control, model=None, **kwargs):
            last = state.max_steps > 0 and state.global_step >= state.max_steps
            if model is not None and (control.should_save or control.should_training_stop or last):
                check_weights(self.method, state.global_step, model)

    return FiniteCallback


def finite_callback(method: str):
    """A ``transformers.TrainerCallback`` that stops ``method``'s run at its first non-finite step."""
    return _callback_class()(method)


def use_finite_check(trainer, method: str) -> None:
    """Add ``finite_callback(method)`` to ``trainer`` (every trainer of the lab, before ``train()``), and log a NaN
    loss as NaN (transformers' ``logging_nan_inf_filter`` would replace it by the mean of the earlier ones)."""
    trainer.args.logging_nan_inf_filter = False
    trainer.add_callback(finite_callback(method))


__all__ = ["check_logs", "check_weights", "finite_callback", "gradient_norm", "use_finite_check"]
