"""The pretraining corpus: deterministic, result-only labels, no arith-v1 evaluation problem in it."""

from __future__ import annotations

from posttrainlab.data.arith.corpus import (
    CorpusConfig,
    Item,
    contamination_report,
    draw_corpus,
    eval_programs,
    expression,
    segments,
)
from posttrainlab.data.arith.generator import draw_pools
from posttrainlab.data.arith.problems import PREV, execute


def test_deterministic_for_a_seed():
    cfg = CorpusConfig(size=500)
    assert draw_corpus(cfg) == draw_corpus(cfg)
    assert draw_corpus(cfg)[0] != draw_corpus(CorpusConfig(size=500, seed=1))[0]


def test_no_eval_program_in_the_corpus_and_the_report_says_so():
    cfg = CorpusConfig(size=20_000)
    items, rejected = draw_corpus(cfg)
    exclude = eval_programs()
    pools = draw_pools()
    assert len(exclude) == len({p.program for name in ("test", "validation", "dev") for p in pools[name]})
    assert not {item.program for item in items} & exclude
    assert rejected > 0  # the multiplication space is small: collisions do happen and are rejected
    report = contamination_report(items, rejected, exclude)
    assert report["overlap"] == 0 and report["corpus_items"] == 20_000


def test_an_excluded_program_is_never_drawn():
    cfg = CorpusConfig(size=300)
    items, _ = draw_corpus(cfg, exclude=set())
    banned = {item.program for item in items[:50]}
    again, rejected = draw_corpus(cfg, exclude=banned)
    assert not {item.program for item in again} & banned and rejected >= 50


def test_segments_train_on_results_only():
    segs = segments((("+", 12, 9), ("*", PREV, 4)))
    assert segs == [("12 + 9 =", False), (" 21\n", True), ("21 * 4 =", False), (" 84\n", True)]
    assert "".join(s for s, _ in segs) == "12 + 9 = 21\n21 * 4 = 84\n"


def test_worked_items_write_an_expression_that_evaluates_to_the_result():
    items, _ = draw_corpus(CorpusConfig(size=3000, worked_share=0.5, small_share=0.2), exclude=set())
    worked = [item for item in items if item.worked]
    assert 1300 < len(worked) < 1700 and any(len(item.program) == 2 for item in worked)
    for item in worked:
        assert eval(expression(item.program)) == execute(item.program)[-1].result
        (question, q_trained), (solution, s_trained) = segments(item)
        assert not q_trained and s_trained
        assert question.startswith("Compute ") and solution.endswith(f"Result: {execute(item.program)[-1].result}\n")
        assert "Answer" not in solution and "What is" not in question  # never arith-v1's wording


def test_small_share_controls_operand_sizes():
    def short_share(cfg):
        items, _ = draw_corpus(cfg, exclude=set())
        plus = [item.program[0] for item in items if len(item.program) == 1 and item.program[0][0] == "+"]
        return sum(a < 10 or b < 10 for _, a, b in plus) / len(plus)

    assert short_share(CorpusConfig(size=3000, chain_share=0.0, small_share=0.0)) == 0.0
    assert short_share(CorpusConfig(size=3000, chain_share=0.0, small_share=1.0)) > 0.4
    assert Item((("+", 1, 2),)).worked is False
