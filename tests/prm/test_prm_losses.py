"""PRM losses against numbers worked out by hand.

With logits (0, ln 3): p(correct) = 3/4, p(wrong) = 1/4, so -ln p1 = 0.287682 and -ln p0 = 1.386294;
with logits (0, 0) both are ln 2 = 0.693147.
"""

from __future__ import annotations

import math

import pytest
import torch

from posttrainlab.prm.losses import IGNORE, hard_loss, prm_loss, soft_loss

L3 = math.log(3.0)
NLL1, NLL0, LN2 = -math.log(0.75), -math.log(0.25), math.log(2.0)


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_hard_loss_by_hand():
    # one position, label 1 at (0, ln 3): -ln 3/4
    assert hard_loss(t([0.0, L3]), torch.tensor([1.0])).item() == pytest.approx(NLL1, abs=1e-6)
    # ignored positions do not count: mean of -ln 1/4 and ln 2
    logits, labels = t([0.0, L3], [0.0, 0.0], [5.0, -5.0]), torch.tensor([0.0, 1.0, IGNORE])
    assert hard_loss(logits, labels).item() == pytest.approx((NLL0 + LN2) / 2, abs=1e-6)


def test_class_weights_by_hand():
    """w = (wrong 2, correct 1): (2 * 1.386294 + 1 * 0.693147) / (2 + 1) = 1.155245."""
    logits, labels = t([0.0, L3], [0.0, 0.0]), torch.tensor([0.0, 1.0])
    got = hard_loss(logits, labels, torch.tensor([2.0, 1.0])).item()
    assert got == pytest.approx((2 * NLL0 + LN2) / 3, abs=1e-6)
    assert got == pytest.approx(1.155245, abs=1e-6)


def test_soft_loss_by_hand():
    """V = 0.5 at (0, ln 3): -(0.5 ln 3/4 + 0.5 ln 1/4) = 0.836988; the card's formula, mean over targets."""
    assert soft_loss(t([0.0, L3]), torch.tensor([0.5])).item() == pytest.approx(0.836988, abs=1e-6)
    # two targets, V = 0.25 and V = 1: mean of (0.25*0.287682 + 0.75*1.386294) and 0.693147
    logits, targets = t([0.0, L3], [0.0, 0.0], [1.0, 2.0]), torch.tensor([0.25, 1.0, IGNORE])
    want = ((0.25 * NLL1 + 0.75 * NLL0) + LN2) / 2
    assert soft_loss(logits, targets).item() == pytest.approx(want, abs=1e-6)


def test_weighted_soft_loss_by_hand():
    """w = (2, 1), V = 0.25 at (0, ln 3): (0.25*0.287682 + 2*0.75*1.386294) / (0.25 + 1.5) = 1.229350."""
    got = soft_loss(t([0.0, L3]), torch.tensor([0.25]), torch.tensor([2.0, 1.0])).item()
    assert got == pytest.approx(1.229350, abs=1e-6)


def test_soft_equals_hard_on_hard_targets():
    torch.manual_seed(0)
    logits = torch.randn(7, 2)
    labels = torch.tensor([0.0, 1.0, 1.0, IGNORE, 0.0, 1.0, IGNORE])
    for w in (None, torch.tensor([3.0, 0.5])):
        assert soft_loss(logits, labels, w).item() == pytest.approx(hard_loss(logits, labels, w).item(), abs=1e-6)


def test_prm_loss_flattens_batches_and_handles_no_labels():
    logits = t([0.0, L3], [0.0, 0.0]).reshape(1, 2, 2)
    labels = torch.tensor([[1.0, IGNORE]])
    assert prm_loss(logits, labels, soft=False).item() == pytest.approx(NLL1, abs=1e-6)
    assert prm_loss(logits, labels, soft=True).item() == pytest.approx(NLL1, abs=1e-6)
    nothing = logits.clone().requires_grad_(True)
    loss = prm_loss(nothing, torch.full((1, 2), IGNORE), soft=True)
    loss.backward()
    assert loss.item() == 0.0 and nothing.grad is not None
