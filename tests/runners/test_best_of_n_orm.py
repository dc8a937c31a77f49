"""Best-of-N, process vs outcome (issue #39): an ORM's selectors, the PRM and the ORM paired at each N on a
hand-made table of samples, the run scoring one set of samples with both, the Lightman-style figure and the
report's section, and beam search's refusal of a min-aggregated ORM.

The hand-made table (``TABLE``): 10 problems, 2 samples each, every sample's answer distinct within its problem.

    kind  problems  right sample  PRM step scores  ORM scores  answers
    A     0-7       1             [.2], [.8]       .9, .1      4, 5
    B     8         0             [.9], [.1]       .7, .3      5, 4
    C     9         1             [.9], [.1]       .1, .9      4, 5

At N = 1 every selector takes sample 0 (right only in B): 1/10 each, no discordant problem, p = 1. At N = 2 the
PRM (min) picks sample 1 in A (right), 0 in B (right), 0 in C (wrong): 9/10; the ORM picks 0 in A (wrong), 0 in
B (right), 1 in C (right): 2/10. PRM − ORM: b (ORM right, PRM wrong) = 1, c = 8, diff = +0.7, McNemar's exact
p = 2 (C(9,0) + C(9,1)) / 2^9 = 20/512 = 0.0390625. The weighted votes pick the same samples (each answer has
one sample); majority ties at N = 2 and takes the answer seen first, sample 0 (1/10).
"""

from __future__ import annotations

import json

import pytest

from posttrainlab.data.arith.steps import parse_question
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.best_of_n import (
    ORM_SELECTORS,
    SELECTORS,
    Candidates,
    best_of_n_metrics,
    comparison_pairs,
    paired_by_n,
    select,
)
from posttrainlab.prm.spec import PRMSpec
from posttrainlab.report.orm_curves import (
    IMAGE,
    figures,
    process_vs_outcome_figure,
    section,
    significant_ns,
)
from posttrainlab.runners.best_of_n import run
from posttrainlab.runners.settings import BeamSettings, BestOfNSettings
from prm_eval_fakes import FakeBackend, OracleScorer

KIND_A = Candidates([False, True], [4, 5], [[0.2], [0.8]], [0.9, 0.1])
KIND_B = Candidates([True, False], [5, 4], [[0.9], [0.1]], [0.7, 0.3])
KIND_C = Candidates([False, True], [4, 5], [[0.9], [0.1]], [0.1, 0.9])
TABLE = [KIND_A] * 8 + [KIND_B, KIND_C]


def test_orm_selectors_by_hand():
    assert KIND_A.selectors == SELECTORS + ORM_SELECTORS
    assert [select(KIND_C, 2, s) for s in ("prm_min", "orm", "orm_vote", "prm_vote", "majority")] == [0, 1, 1, 0, 0]
    assert select(KIND_C, 1, "orm") == 0  # only the first n samples count
    # an ORM given as the PRM: no prm_* selector, and asking for one is an error
    alone = Candidates([False, True], [4, 5], None, [0.3, 0.6])
    assert alone.selectors == ("majority", "orm", "orm_vote") and select(alone, 2, "orm") == 1
    with pytest.raises(ValueError, match="no PRM scored"):
        select(alone, 2, "prm_min")
    with pytest.raises(ValueError, match="no ORM scored"):
        select(Candidates([True], [1], [[0.5]]), 1, "orm")
    with pytest.raises(ValueError, match="one entry per sample"):
        Candidates([True, False], [1, 2], [[0.5], [0.5]], [0.5])


def test_paired_at_each_n_on_the_hand_made_table():
    assert comparison_pairs(KIND_A.selectors) == [
        ("orm", "prm_min"), ("orm_vote", "prm_vote"), ("majority", "prm_min"), ("majority", "orm"),
    ]  # fmt: skip
    m = best_of_n_metrics(TABLE, [1, 2])
    assert [m["selectors"]["prm_min"][n]["correct"] for n in ("1", "2")] == [1, 9]
    assert [m["selectors"]["orm"][n]["correct"] for n in ("1", "2")] == [1, 2]
    assert m["selectors"]["majority"]["2"]["correct"] == 1
    p = m["paired"]
    assert list(p) == ["prm_min vs orm", "prm_vote vs orm_vote", "prm_min vs majority", "orm vs majority"]
    one, two = p["prm_min vs orm"]["by_n"]["1"], p["prm_min vs orm"]["by_n"]["2"]
    assert (one["b"], one["c"], one["mcnemar_p"], one["significant"]) == (0, 0, 1.0, False)
    assert (two["n"], two["acc_a"], two["acc_b"], two["b"], two["c"]) == (10, 0.2, 0.9, 1, 8)
    assert two["diff"] == pytest.approx(0.7) and two["mcnemar_p"] == 20 / 512 and two["significant"]
    assert two["ci"][0] > 0  # Newcombe's interval leaves 0 out, as the test does
    votes = p["prm_vote vs orm_vote"]["by_n"]["2"]
    assert (votes["b"], votes["c"], votes["mcnemar_p"]) == (1, 8, 20 / 512)
    # majority takes sample 0 (right in B only); the ORM is right in B and C
    assert (p["orm vs majority"]["by_n"]["2"]["b"], p["orm vs majority"]["by_n"]["2"]["c"]) == (0, 1)
    # the function alone, on the first two problems: both the PRM and the ORM
    alone = paired_by_n(TABLE[:2], [2], [("orm", "prm_min")])["prm_min vs orm"]["by_n"]["2"]
    assert (alone["b"], alone["c"], alone["mcnemar_p"]) == (0, 2, 0.5)
    assert m["orm_within_problem"]["pairs"] == 10 and m["orm_within_problem"]["pairwise_accuracy"] == 0.2


def bon_of_table() -> dict:
    bon = best_of_n_metrics(TABLE, [1, 2])
    return {**bon, "problems": 10, "split": "test", "ns": [1, 2], "vote_aggregation": "min", "prm": "runs/prm",
            "orm": "runs/orm", "sampling": {"temperature": 0.8}}  # fmt: skip


def test_the_figure_marks_where_prm_and_orm_differ():
    bon = bon_of_table()
    assert significant_ns(bon) == [2]
    fig = process_vs_outcome_figure(bon)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels[0] == "oracle (pass@N)" and "PRM (min step score)" in labels and "ORM (last step score)" in labels
    assert set(labels) >= {"majority vote", "PRM-weighted vote (min)", "ORM-weighted vote"}
    assert "prm_last" not in str(labels)  # only the PRM's own pick, not every aggregation
    stars = [t for t in ax.texts if t.get_text() == "*"]
    assert len(stars) == 1 and stars[0].xy[0] == 2 and stars[0].get_fontsize() >= 8
    from figure_checks import smallest_font, texts_outside

    assert smallest_font(fig) >= 8
    assert texts_outside(fig) == []  # the one-line title was cut at the figure's left edge
    no_orm = best_of_n_metrics([Candidates([True], [1], [[0.5]])], [1])
    assert process_vs_outcome_figure({**no_orm, "problems": 1}) is None


def test_the_report_section(tmp_path):
    run_root = tmp_path / "run"
    (run_root / "best-of-n").mkdir(parents=True)
    (run_root / "best-of-n" / "bon.json").write_text(json.dumps(bon_of_table()))
    md = section(run_root)
    assert md.startswith("## Process vs outcome supervision: best-of-N\n")
    assert "| PRM (min step score) | 10.0% [" in md and "| ORM (last step score) | 10.0% [" in md
    assert f"weighted votes](report_files/{IMAGE}.png)" in md
    # the paired row at N = 2: B − A = PRM − ORM, b = 1, c = 8, p = 0.039
    assert "| PRM (min step score) − ORM (last step score) | 2 | 20.0% | 90.0% | +70.0 [" in md
    assert "| 1 | 8 | 0.039 |" in md
    assert "At N = 2: PRM − ORM = +70.0 points" in md and "p = 0.039: significant at 0.05" in md
    assert figures(run_root)[IMAGE][:4] == b"\x89PNG"
    assert section(run_root / "best-of-n") == md  # a best-of-N folder itself
    prm_only = best_of_n_metrics([Candidates([False, True], [4, 5], [[0.2], [0.8]])], [1])
    (run_root / "best-of-n" / "bon.json").write_text(json.dumps(prm_only | {"ns": [1]}))
    assert section(run_root) == "" and figures(run_root) == {}  # a PRM-only run: no section
    assert section(tmp_path / "nowhere") == ""


class ConfusedORM:
    """An ORM that likes a wrong answer line (0.9), not the right one (0.2); 0.5 elsewhere."""

    spec = PRMSpec(orm=True)

    def score_batch(self, items, batch_size=8):
        out = []
        for question, steps in items:
            last, answer = steps[-1], parse_question(question).answer
            final = 0.2 if last == f"Answer: {answer}" else 0.9 if last.startswith("Answer:") else 0.5
            out.append([0.5] * (len(steps) - 1) + [final])
        return out


def test_run_scores_the_same_samples_with_a_prm_and_an_orm(arith_dir, tmp_path):
    """FakeBackend: sample j % 4 = reference, first step off (answer A+1), no answer, answer A+10. The oracle PRM
    picks the reference (sample 0) at every n; the confused ORM picks sample 1 (0.9, lowest index) from n = 2."""
    out, backend = tmp_path / "bon", FakeBackend()
    b = run("fake-policy", "fake-prm", arith_dir, out, BestOfNSettings(n=4, ns=[1, 2, 4], limit=5), backend=backend,
            scorer=OracleScorer(), orm_scorer=ConfusedORM(), progress=False)  # fmt: skip
    assert len(backend.calls) == 1  # sampled once, scored twice
    assert list(b["selectors"]) == [*SELECTORS, *ORM_SELECTORS] and b["orm"] == "custom"
    assert [b["selectors"]["prm_min"][n]["value"] for n in ("1", "2", "4")] == [1.0, 1.0, 1.0]
    assert [b["selectors"]["orm"][n]["value"] for n in ("1", "2", "4")] == [1.0, 0.0, 0.0]
    assert [b["selectors"]["orm_vote"][n]["value"] for n in ("1", "2", "4")] == [1.0, 0.0, 0.0]
    two = b["paired"]["prm_min vs orm"]["by_n"]["2"]
    assert (two["b"], two["c"], two["mcnemar_p"]) == (0, 5, 0.0625)  # 2 / 2^5
    row = read_jsonl(out / "scores.jsonl")[0]
    assert [s["orm"] for s in row["samples"]] == [0.2, 0.9, 0.5, 0.9]
    assert row["samples"][1]["orm_scores"][-1] == 0.9 and row["samples"][0]["min"] == 0.9
    assert row["selected"]["orm"] == {"1": 0, "2": 1, "4": 1} and row["selected"]["prm_min"]["4"] == 0
    assert (out / f"{IMAGE}.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "bon.json").read_text())["scoring"]["orm_seconds"] >= 0

    # the ORM given as the PRM: majority and the ORM's selectors, from the samples cached above
    alone = run("fake-policy", "fake-orm", arith_dir, out, BestOfNSettings(n=4, ns=[1, 2, 4], limit=5),
                backend=FakeBackend(), scorer=ConfusedORM(), progress=False)  # fmt: skip
    assert list(alone["selectors"]) == ["majority", "orm", "orm_vote"] and alone["orm"] == "fake-orm"
    assert "within_problem" not in alone and alone["orm_within_problem"]["pairs"] == 15
    assert list(alone["paired"]) == ["orm vs majority", "orm_vote vs majority"]
    sample = read_jsonl(out / "scores.jsonl")[0]["samples"][1]
    assert sample["orm"] == 0.9 and "min" not in sample


def prm_folder(path, **prm_config):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))
    (path / "prm_config.json").write_text(json.dumps({"head": "verdict", **prm_config}))
    return path


def test_an_orm_that_is_none_is_refused_before_any_sampling(arith_dir, tmp_path):
    prm, orm = prm_folder(tmp_path / "prm"), prm_folder(tmp_path / "orm", orm=True)
    backend, settings = FakeBackend(), BestOfNSettings(n=2, limit=2)
    with pytest.raises(BadInput, match=r"prm: not an outcome reward model \(its prm_config.json lacks"):
        run("fake-policy", "fake-prm", arith_dir, tmp_path / "o", settings, backend=backend, scorer=OracleScorer(),
            orm=prm)  # fmt: skip
    with pytest.raises(BadInput, match=r"orm: an ORM given as the PRM beside the ORM"):
        run("fake-policy", orm, arith_dir, tmp_path / "o", settings, backend=backend, orm=orm)
    with pytest.raises(BadInput, match="an ORM given as the PRM beside the ORM"):  # told once loaded (a Hub id)
        run("fake-policy", "fake-prm", arith_dir, tmp_path / "o3", settings, backend=backend, scorer=ConfusedORM(),
            orm_scorer=ConfusedORM())  # fmt: skip
    with pytest.raises(BadInput, match="hub/orm: not an outcome reward model"):
        run("fake-policy", "fake-prm", arith_dir, tmp_path / "o4", settings, backend=backend, scorer=OracleScorer(),
            orm="hub/orm", orm_scorer=OracleScorer())  # fmt: skip
    assert len(backend.calls) == 2  # only the last two sampled: their models are told apart once loaded


def test_beam_search_reads_an_orm_by_its_last_step_only(arith_dir, tmp_path):
    from posttrainlab.runners.beam_search import run as beam

    with pytest.raises(BadInput, match="scores a prefix by its last step: use aggregation last, not min"):
        beam("policy", "orm", arith_dir, tmp_path / "beam", BeamSettings(aggregation="min", limit=2),
             proposer=object(), scorer=ConfusedORM(), progress=False)  # fmt: skip
