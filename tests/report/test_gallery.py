"""The report's gallery: which problems it chooses (hand-made cases, exact picks), the lines' exact labels, and the
marks in report.html / report.md for a three-problem run folder written by hand.

Fixture (N = 3 samples each, the PRM pick is ``prm_min``):
  t0  375 - 260 = 115: two right samples (min 0.6) and one wrong (min 0.8): majority right, PRM fooled;
      beam search answers 135, a solution no sample wrote
  t1  94 * 3 = 282: two wrong samples (292), one right with the top score: PRM right, majority wrong;
      beam search answers with the right sample's text
  t2  12 + 30 = 42: a sample without answer line (top score) and a wrong one: both wrong, no right sample
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from posttrainlab.report import build_report, load_run
from posttrainlab.report.gallery import Case, Kind, choose, kind_of, lines_of, load_gallery
from posttrainlab.report.gallery_html import UNSCORED, score_colour

PROMPT = "Solve the following problem.\n\nWhat is {}?"


def case(id: str, category: str, prm: bool, majority: bool, mixed: bool = True) -> Case:
    return Case(id, category, prm, majority, mixed, order=int(id[1:]))


def test_kinds_and_the_choice_are_exact():
    grades = ((True, False), (False, True), (True, True), (False, False))  # (PRM pick right, majority right)
    kinds = [kind_of(case("p0", "addition", p, m)) for p, m in grades]
    assert kinds == ["prm_right", "prm_fooled", "both_right", "both_wrong"]
    cases = [
        case("p0", "addition", False, True, mixed=False),  # fooled, nothing to choose from: last resort
        case("p1", "addition", False, True),
        case("p2", "addition", False, True),
        case("p3", "multi_step", False, True),
        case("p4", "addition", True, False),
        case("p5", "addition", True, True),
        case("p6", "word_problem", True, True),
    ]
    picks = choose(cases)
    # prm_right: p4 (addition now shown); prm_fooled: p3 (mixed, new category), then p1 (mixed, first in order);
    # both_right: p6 (word_problem not shown yet) before p5; both_wrong: none in this run
    assert [(k, c.id) for k, c in picks] == [("prm_right", "p4"), ("prm_fooled", "p3"), ("prm_fooled", "p1"),
                                             ("both_right", "p6")]  # fmt: skip
    assert [c.id for _, c in choose(cases, [Kind("prm_fooled", "", 5)])] == ["p1", "p3", "p2", "p0"]
    assert choose([], [Kind("prm_right", "", 2)]) == [] and choose(list(reversed(cases))) == picks  # file order


def test_lines_carry_exact_labels_and_the_missing_answer():
    q = PROMPT.format("351 - 148 + 56")
    wrong_then_right = lines_of(q, "351 - 148 = 204\n204 + 56 = 260\nAnswer: 259", [0.2, 0.3, 0.9])
    assert [(x.score, x.label) for x in wrong_then_right] == [(0.2, 0), (0.3, 0), (0.9, 1)]
    unscored = lines_of(q, "351 - 148 = 203\n203 + 56 = 259", [0.7, 0.8])
    assert [(x.text, x.score, x.label) for x in unscored][-1] == ("(no answer)", None, 0)
    scored = lines_of(q, "351 - 148 = 203\n203 + 56 = 259", [0.7, 0.8, 0.1])  # a PRM with the explicit step
    assert [(x.score, x.label) for x in scored] == [(0.7, 1), (0.8, 1), (0.1, 0)]
    other = lines_of("What is the capital of France?", "Paris\nAnswer: 1", [0.5, 0.6])
    assert [(x.text, x.label) for x in other] == [("Paris", None), ("Answer: 1", None)]
    assert lines_of(q, "", []) == []


def sample(text: str, answer: int) -> dict:
    last = text.splitlines()[-1]
    parsed = int(last.split()[-1]) if last.startswith("Answer:") else None
    outcome = "missing_answer" if parsed is None else "correct" if parsed == answer else "wrong_answer"
    return {"response": text, "correct": outcome == "correct", "outcome": outcome, "parsed": parsed}


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


PROBLEMS = [  # id, category, question, answer, [(text, step scores)], {selector: pick at n=3}
    ("t0", "subtraction", "375 - 260", 115,
     [("375 - 260 = 115\nAnswer: 115", [0.6, 0.9]), ("375 - 260 = 115\nAnswer: 115", [0.6, 0.9]),
      ("375 - 260 = 215\nAnswer: 215", [0.8, 0.95])], {"prm_min": 2, "majority": 0}),
    ("t1", "multiplication", "94 * 3", 282,
     [("94 * 3 = 292\nAnswer: 292", [0.3, 0.8]), ("94 * 3 = 292\nAnswer: 292", [0.3, 0.8]),
      ("94 * 3 = 282\nAnswer: 282", [0.4, 0.85])], {"prm_min": 2, "majority": 0}),
    ("t2", "addition", "12 + 30", 42,
     [("12 + 30 = 42", [0.7]), ("12 + 30 = 40\nAnswer: 40", [0.5, 0.6]), ("12 + 30 = 40\nAnswer: 40", [0.5, 0.6])],
     {"prm_min": 0, "majority": 1}),
]  # fmt: skip


def make_run(root: Path, beam: bool = True) -> Path:
    (root / "eval" / "sft").mkdir(parents=True)
    (root / "eval" / "sft" / "metrics.json").write_text('{"accuracy": {"value": 0.4}}', encoding="utf-8")
    samples, scores = [], []
    for id, category, question, answer, sols, picks in PROBLEMS:
        samples.append({"id": id, "category": category, "answer": answer, "prompt": PROMPT.format(question),
                        "samples": [sample(text, answer) for text, _ in sols]})  # fmt: skip
        selected = {s: {"1": 0, "3": i} for s, i in picks.items()}
        scores.append({"id": id, "samples": [{"steps": t.splitlines(), "scores": sc} for t, sc in sols],
                       "selected": selected})  # fmt: skip
    write_jsonl(root / "best-of-n" / "samples.jsonl", samples)
    write_jsonl(root / "best-of-n" / "scores.jsonl", scores)
    (root / "best-of-n" / "bon.json").write_text(json.dumps({"n": 3, "vote_aggregation": "min"}), encoding="utf-8")
    if beam:
        wrong = {"response": "375 - 260 = 135\nAnswer: 135", "correct": False, "outcome": "wrong_answer",
                 "parsed": 135, "scores": [0.55, 0.9]}  # fmt: skip
        right = {"response": "94 * 3 = 282\nAnswer: 282", "correct": True, "outcome": "correct", "parsed": 282,
                 "scores": [0.4, 0.85]}  # fmt: skip
        write_jsonl(root / "beam-search" / "outcomes.jsonl", [
            {"id": "t0", **{k: v for k, v in wrong.items() if k != "scores"}, "beams": [wrong]},
            {"id": "t1", **{k: v for k, v in right.items() if k != "scores"}, "beams": [right]},
        ])  # fmt: skip
    return root


def row_of(page: str, text: str) -> str:
    """The gallery table row (``<tr>…</tr>``) holding ``text``."""
    return next(r for r in re.findall(r"<tr[^>]*>.*?</tr>", page) if text in r)


def test_gallery_marks_picks_labels_and_scores(tmp_path):
    run = make_run(tmp_path / "run")
    g = load_gallery(load_run(run))
    assert [(p.kind, p.id) for p in g.problems] == [("prm_right", "t1"), ("prm_fooled", "t0"), ("both_wrong", "t2")]
    assert g.counts == {"prm_right": 1, "prm_fooled": 1, "both_right": 0, "both_wrong": 1} and g.n == 3
    md_path, html_path = build_report(run)
    page, md = html_path.read_text(encoding="utf-8"), md_path.read_text(encoding="utf-8")
    gallery = page[page.index('<section id="gallery">') : page.index("</section>")]
    fooled = row_of(gallery, "375 - 260 = 215")
    assert 'class="b prm"' in fooled and 'class="b majority"' not in fooled and "1 of 3" in fooled
    assert f'style="background:{score_colour(0.8)}"><span class="sc">0.80</span><span class="lb no"' in fooled
    right = row_of(gallery, "375 - 260 = 115")
    assert 'class="b majority"' in right and "2 of 3" in right and right.count('class="lb ok"') == 2
    beam_only = row_of(gallery, "375 - 260 = 135")
    assert "beam search only" in beam_only and 'class="b beam"' in beam_only
    t1 = row_of(gallery, "94 * 3 = 282")
    assert 'class="b prm"' in t1 and 'class="b beam"' in t1 and "beam search only" not in t1
    assert 'class="b majority"' in row_of(gallery, "94 * 3 = 292")
    no_answer = row_of(gallery, "12 + 30 = 42")  # right line, no answer line: an unscored "(no answer)" ✗
    assert 'class="b prm"' in no_answer and f'background:{UNSCORED}"><span class="sc">–</span>' in no_answer
    assert 'class="lb no" title="exact label: wrong (0)">✗</span>(no answer)' in no_answer
    assert "2 of 3 votes" in gallery and "<script" not in page
    assert (
        "| t0 (subtraction) | PRM fooled, majority right | 115 | 115 ✓ (2 of 3 votes) | 215 ✗ | 135 ✗ "
        "| 375 - 260 = 115 (0.60 ✓); Answer: 115 (0.90 ✓) | 375 - 260 = 215 (0.80 ✗); Answer: 215 (0.95 ✗) |"
    ) in md
    assert (
        "| t2 (addition) | both wrong | 42 | 40 ✗ (2 of 3 votes) | no answer ✗ | – | – "
        "| 12 + 30 = 42 (0.70 ✓); (no answer) (– ✗) |"
    ) in md


def test_a_run_without_best_of_n_or_beam_search_still_builds(tmp_path):
    run = make_run(tmp_path / "run", beam=False)
    page = build_report(run)[1].read_text(encoding="utf-8")
    assert "this run has no beam search (beam-search/outcomes.jsonl)" in page and "beam search only" not in page
    assert 'class="b beam"' not in page.split('<div class="gl">', 1)[1].split("</div>", 1)[1]  # only the legend's
    for name in ("samples.jsonl", "scores.jsonl", "bon.json"):
        (run / "best-of-n" / name).unlink()
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "No gallery of samples: this run has no finished best-of-N output (best-of-n/bon.json)." in md
    (run / "best-of-n" / "bon.json").write_text('{"n": 1}', encoding="utf-8")
    write_jsonl(run / "best-of-n" / "samples.jsonl", [{"id": "t0", "samples": []}])
    write_jsonl(run / "best-of-n" / "scores.jsonl", [{"id": "t0", "samples": []}])  # no picks recorded
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "No gallery of samples: best-of-n/scores.jsonl: problem 't0' has no prm_min and majority picks" in md
    write_jsonl(run / "best-of-n" / "samples.jsonl", [{"id": "t0", "samples": [sample("Answer: 1", 1)]}])
    picks = {"prm_min": {"1": 5}, "majority": {"1": 0}}  # a pick past the samples
    write_jsonl(run / "best-of-n" / "scores.jsonl", [{"id": "t0", "samples": [], "selected": picks}])
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "No gallery of samples: best-of-N or beam-search output of an unexpected shape (IndexError" in md
