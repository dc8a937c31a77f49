"""Cohen's kappa (eval/agreement.py) on labels of more than two classes, worked out by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posttrainlab.eval.agreement import cohen_kappa


def test_three_class_kappa_by_hand():
    """a = [0, 1, 2, 2, 1], b = [0, 2, 1, 2, 1]: they agree at positions 0, 3 and 4, so p_o = 3/5.
    Each annotator gives class 0 once, class 1 twice, class 2 twice, so chance agreement is
    p_e = sum_k p_ak p_bk = (1*1 + 2*2 + 2*2) / 25 = 9/25, and
    kappa = (p_o - p_e) / (1 - p_e) = (15/25 - 9/25) / (16/25) = 6/16 = 0.375."""
    assert cohen_kappa([0, 1, 2, 2, 1], [0, 2, 1, 2, 1]) == pytest.approx(0.375)


def test_classes_absent_from_one_annotator():
    """a = [1, 2, 3, 3], b = [1, 2, 2, 2]: p_o = 2/4 (positions 0 and 1); marginals a: 1:1, 2:1, 3:2 and
    b: 1:1, 2:3 (class 3 never), so p_e = (1*1 + 1*3 + 2*0) / 16 = 4/16 and
    kappa = (8/16 - 4/16) / (12/16) = 1/3."""
    assert cohen_kappa([1, 2, 3, 3], [1, 2, 2, 2]) == pytest.approx(1 / 3)
    assert cohen_kappa(["ok", "bad", "bad"], ["ok", "bad", "bad"]) == 1.0
    assert cohen_kappa([2, 2, 2], [2, 2, 2]) is None  # one class for everyone: p_e = 1, undefined


labels = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(labels, st.permutations([0, 1, 2, 3]))
def test_kappa_does_not_depend_on_the_names_of_the_classes(pairs, renaming):
    """Kappa counts agreements and marginals per class: renaming the classes one-to-one changes nothing
    (binary labels 0/1 renamed to 2/3 included)."""
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    expected = cohen_kappa(a, b)
    got = cohen_kappa([renaming[x] for x in a], [renaming[y] for y in b])
    assert (got is None) == (expected is None)
    if expected is not None:
        assert got == pytest.approx(expected)
        assert -1.0 <= got <= 1.0 + 1e-12
