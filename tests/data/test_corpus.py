"""The pretraining corpus: deterministic, result-only labels, no arith-v1 evaluation problem in it."""

from __future__ import annotations

from posttrainlab.data.arith.corpus import (
    CorpusConfig,
    contamination_report,
    draw_corpus,
    eval_programs,
    segments,
)
from posttrainlab.data.arith.generator import draw_pools
from posttrainlab.data.arith.problems import PREV


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
    assert not set(items) & exclude
    assert rejected > 0  # the multiplication space is small: collisions do happen and are rejected
    report = contamination_report(items, rejected, exclude)
    assert report["overlap"] == 0 and report["corpus_items"] == 20_000


def test_an_excluded_program_is_never_drawn():
    cfg = CorpusConfig(size=300)
    items, _ = draw_corpus(cfg, exclude=set())
    banned = set(items[:50])
    again, rejected = draw_corpus(cfg, exclude=banned)
    assert not set(again) & banned and rejected >= 50


def test_segments_train_on_results_only():
    segs = segments((("+", 12, 9), ("*", PREV, 4)))
    assert segs == [("12 + 9 =", False), (" 21\n", True), ("21 * 4 =", False), (" 84\n", True)]
    assert "".join(s for s, _ in segs) == "12 + 9 = 21\n21 * 4 = 84\n"
