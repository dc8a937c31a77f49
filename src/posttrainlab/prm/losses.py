"""PRM losses: pure functions of two-class logits and per-position targets.

Hand-written because TRL removed its PRM trainer and ``transformers`` has no soft-target or
class-weighted step loss; they are a few lines each and easier to check against numbers worked out
by hand (tests/prm/test_prm_losses.py) than to configure out of a library.

Every head is reduced to the same shape first (the ``logits`` of ``posttrainlab.prm.heads.make_head``'s head,
``TokenClsHead`` or ``VerdictHead``): ``logits[..., 0]`` is the "wrong" / P("no") logit and ``logits[..., 1]``
the "correct" / P("yes") logit, normalised over the two classes only. Targets sit in a float tensor of the same
leading shape, with ``IGNORE`` (-100) on every position that carries no label (docs/design.md "PRM conventions").

- **Hard labels** (``step`` and ``span`` supervision): weighted cross-entropy,
  ``L = sum_i w[y_i] * -log p_i[y_i] / sum_i w[y_i]`` (PyTorch's ``cross_entropy`` with ``weight``).
- **Soft targets** (``soft`` supervision, Polaris MC card, seed 003):
  ``L = sum_i ( w1 V_i * -log p_i[1] + w0 (1 - V_i) * -log p_i[0] ) / sum_i ( w1 V_i + w0 (1 - V_i) )``.
  With ``w = (1, 1)`` the denominator is the number of targets and this is the card's
  ``-[V log P(yes) + (1 - V) log P(no)]`` averaged over targets; with ``V`` in {0, 1} it equals the
  hard loss for any weights, so the two are one family.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

IGNORE = -100.0


def hard_loss(logits: torch.Tensor, labels: torch.Tensor, class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Weighted cross-entropy over labelled positions.

    ``logits``: ``[N, 2]``; ``labels``: ``[N]`` of 0 (wrong), 1 (correct) or ``IGNORE``;
    ``class_weights``: ``[2]`` = (w_wrong, w_correct) or ``None`` for (1, 1). Returns a scalar; 0 (with a
    gradient path) when nothing is labelled.
    """
    keep = labels != IGNORE
    if not bool(keep.any()):
        return logits.sum() * 0.0
    weight = None if class_weights is None else class_weights.to(logits.device, torch.float32)
    return F.cross_entropy(logits[keep].float(), labels[keep].long(), weight=weight)


def soft_loss(logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Soft-target cross-entropy ``-[V log P(yes) + (1 - V) log P(no)]``, weighted mean over targets.

    ``logits``: ``[N, 2]`` (index 1 = yes/correct); ``targets``: ``[N]`` of V in [0, 1] or ``IGNORE``;
    ``class_weights`` as in ``hard_loss`` (see the module docstring for the normalisation).
    """
    keep = targets != IGNORE
    if not bool(keep.any()):
        return logits.sum() * 0.0
    logp = F.log_softmax(logits[keep].float(), dim=-1)
    v = targets[keep].float()
    w0, w1 = (1.0, 1.0) if class_weights is None else (float(class_weights[0]), float(class_weights[1]))
    mass = w1 * v + w0 * (1.0 - v)
    return -(w1 * v * logp[:, 1] + w0 * (1.0 - v) * logp[:, 0]).sum() / mass.sum()


def prm_loss(
    logits: torch.Tensor, labels: torch.Tensor, *, soft: bool, class_weights: torch.Tensor | None = None
) -> torch.Tensor:
    """The PRM loss of a batch: ``logits`` ``[B, T, 2]``, ``labels`` ``[B, T]`` (``IGNORE`` where unlabelled).

    One mean over every labelled position of the batch, wherever it sits: a trace packed into one
    sequence and the same targets spread over one sequence each give the same loss when their logits
    are the same (the grouping argument of docs/prm.md).
    """
    flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    if soft:
        return soft_loss(flat_logits, flat_labels, class_weights)
    return hard_loss(flat_logits, flat_labels, class_weights)
