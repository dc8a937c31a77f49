"""The study's report from a hand-made ``study.json``: its tables and its figure (no model runs here)."""

from __future__ import annotations

from figure_checks import smallest_font
from posttrainlab.study.report import bon_table, cost_figure, error_table, main_table, markdown

PAIR = {"acc_b": 0.5, "diff": 0.1, "ci": [-0.05, 0.25], "mcnemar_p": 0.0004}


def _quality(rate: float) -> dict:
    cell = {"steps": 10, "errors": int(10 * rate), "error_rate": rate, "false_wrong": 1, "missed": int(10 * rate) - 1}
    return {"solutions": 4, "labelled": 3, "accuracy": 1 - rate, "kappa": 0.5, "first_error_agreement": 0.75,
            "by_category": {"addition": cell}, "by_position": {"0": cell}}  # fmt: skip


def _data() -> dict:
    prm = {"auroc": 0.7, "pairwise_min": 0.6, "pairwise_last": None, "first_error_f1": 0.4, "ece": 0.05}
    bon = {"problems": 2, "majority": 0.4, "prm_vote": PAIR, "prm_min": PAIR, "prm_last": PAIR, "vote_vs_exact": None}
    cost = {"continuations": 0, "judge_calls": 0, "seconds": 0.01}
    return {
        "preset": "label-sources", "policy": {"policy": "OUT/sft"}, "prm_steps": 75,
        "solutions": {"train": 4, "heldout": 4, "train_steps": 10, "train_wrong_steps": 3},
        "bon": {"problems": 2, "n": 16, "majority": 0.4, "oracle": 0.8, "one_sample": 0.3},
        "sources": {
            "exact": {"kind": "exact", "soft": False, "cost": cost, "quality": _quality(0.0), "prm": prm, "bon": bon},
            "mc-soft-4": {"kind": "mc", "soft": True, "cost": {**cost, "continuations": 120, "seconds": 12.5},
                          "quality": _quality(0.2), "prm": {**prm, "auroc": 0.65}, "bon": bon},
            "judge-model": {"kind": "judge", "soft": False, "cost": {**cost, "judge_calls": 8},
                            "quality": _quality(0.3), "prm": None, "skipped": "no labelled solution"},
            "baseline": {"kind": "baseline", "soft": False, "cost": cost, "prm": {**prm, "auroc": 0.6}, "bon": bon},
        },
    }  # fmt: skip


def test_the_main_table_has_a_row_per_source_in_order():
    rows = main_table(_data())[2:]
    assert [r.split(" | ")[0] for r in rows] == ["| exact", "| mc-soft-4", "| judge-model", "| baseline"]
    assert rows[0] == ("| exact | 3/4 | 0 | 0 | 0.01 | 100.0% | 0.500 | 75.0% | 0.700 | 0.600 | – | 0.400 | 0.050 |")
    assert "| 120 | 0 | 12.5 | 80.0% |" in rows[1]
    assert "no PRM: no labelled solution" in rows[2]
    assert rows[3].startswith("| baseline | – | 0 | 0 | 0.01 | – | – | – | 0.600 |")


def test_best_of_n_cells_give_accuracy_difference_interval_and_p():
    rows = bon_table(_data())[2:]
    assert len(rows) == 3  # judge-model has no PRM, so no best-of-N
    assert rows[0] == "| exact | " + " | ".join(["50.0%: +10.0 [-5.0, +25.0], p < 0.001"] * 3) + " | – |"


def test_where_the_errors_sit_leaves_out_the_exact_source():
    rows = error_table(_data(), "by_category")
    assert rows[0] == "| category | steps | mc-soft-4 | judge-model |"  # the baseline has no labels
    assert rows[2] == "| addition | 10 | 20.0% (1/1) | 30.0% (1/2) |"
    assert error_table(_data(), "by_position")[2].startswith("| 0 | 10 |")


def test_the_report_names_the_setup_and_embeds_the_figure():
    text = markdown(_data())
    assert "Training solutions: 4 (10 steps, 3 exactly wrong); held-out solutions: 4" in text
    assert "each PRM trains 75 optimizer steps" in text and "![PRM quality against labelling cost]" in text
    assert "Majority voting 40.0%, one sample 30.0%, oracle pass@16 80.0%" in text
    assert "Smoke run" not in text


def test_the_figure_has_one_point_per_scored_source_and_the_baseline_as_a_line():
    fig = cost_figure(_data())
    left, right = fig.axes
    assert [t.get_text() for t in left.texts] == ["exact", "mc-soft-4"]  # judge-model: no PRM; baseline: the line
    assert [t.get_text() for t in right.texts] == ["exact", "mc-soft-4"]
    assert [line.get_ydata()[0] for line in left.get_lines()] == [0.6]
    assert left.get_xscale() == "log" and smallest_font(fig) >= 8
    assert cost_figure({"sources": {"baseline": {"kind": "baseline", "prm": {"auroc": 0.5}}}}) is None
