"""A PRM's new head trained at its own pace: a head learning rate, and the backbone frozen while the head warms up.

A token-classification PRM starts as a trained causal LM with a random 2-class head. One learning rate for
both (``optim.learning_rate``) either leaves the head slow or shakes the backbone, whose arithmetic the PRM
needs to check a line, while the head's gradients are still noise. Two recipe fields (``PRMRecipe``):

- ``head_learning_rate``: the head's parameters (those outside the backbone, ``base_model_prefix``: ``score``,
  ``classifier``) get this peak rate; the backbone keeps ``optim.learning_rate``. Both follow the same
  schedule (warm-up, cosine ...).
- ``freeze_backbone_steps``: for the first N optimizer steps the backbone's rate is 0 (AdamW moves a weight by
  ``lr`` times its update and decays it by ``lr`` times the decay, so it stays put); from step N it follows
  the schedule as if it had never been held. Only the head learns meanwhile.

How: ``split_groups`` splits each of Trainer's parameter groups (with and without weight decay) into a
backbone and a head group before the first step (the groups keep a ``prm_head`` flag, saved with the
optimizer state, so a resumed run splits the same way); ``freeze_backbone`` multiplies the scheduler's
factor of every backbone group by ``step >= N``. Plain closures, so the scheduler's saved state holds no
function. Written by hand: transformers.Trainer has no per-module rates; a few lines of torch do it.
"""

from __future__ import annotations

from collections.abc import Callable


def head_parameter_ids(model) -> set[int]:
    """``id`` of every parameter outside the backbone (``base_model_prefix``) of ``model`` or of the model a peft
    wrapper holds; empty when the model names no backbone."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    prefix = getattr(inner, "base_model_prefix", "")
    if not prefix:
        return set()
    return {id(p) for name, p in inner.named_parameters() if not name.startswith(prefix + ".")}


def split_groups(optimizer, head_ids: set[int], head_lr: float | None) -> None:
    """Split every parameter group of a fresh ``optimizer`` into backbone and head groups (in place), the head
    groups at ``head_lr`` (``None``: the group's own rate); each group gets ``prm_head`` True or False."""
    groups = []
    for group in optimizer.param_groups:
        for is_head in (False, True):
            params = [p for p in group["params"] if (id(p) in head_ids) == is_head]
            if params:
                lr = head_lr if is_head and head_lr is not None else group["lr"]
                groups.append({**group, "params": params, "lr": lr, "prm_head": is_head})
    optimizer.param_groups = []
    for group in groups:
        optimizer.add_param_group(group)


def _held(factor: Callable[[int], float], steps: int) -> Callable[[int], float]:
    def held(step: int) -> float:
        return factor(step) if step >= steps else 0.0

    return held


def freeze_backbone(scheduler, steps: int) -> None:
    """Hold every backbone group's rate (``prm_head`` False) at 0 for the first ``steps`` steps of a LambdaLR
    ``scheduler`` (transformers' schedules are); ``ValueError`` for another kind of scheduler."""
    from torch.optim.lr_scheduler import LambdaLR

    if steps <= 0:
        return
    if not isinstance(scheduler, LambdaLR):
        raise ValueError(f"freeze_backbone_steps needs a LambdaLR schedule, not {type(scheduler).__name__}")
    for i, group in enumerate(scheduler.optimizer.param_groups):
        if not group.get("prm_head", True):
            scheduler.lr_lambdas[i] = _held(scheduler.lr_lambdas[i], steps)
            group["lr"] = group["initial_lr"] * scheduler.lr_lambdas[i](scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]


__all__ = ["freeze_backbone", "head_parameter_ids", "split_groups"]
