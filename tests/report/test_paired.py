"""The report's paired comparisons, seeds, smoke note and provenance (report/paired.py) on a fake run folder.

Outcomes chosen by hand (50 test problems):

- SFT vs GRPO: 30 both right, 8 both wrong, 2 right only for SFT (b, in addition), 10 right only for
  GRPO (c, all of multiplication). SFT 32/50 = 64.0%, GRPO 40/50 = 80.0%, GRPO − SFT = +16.0 points
  McNemar p = 2 · (1 + 12 + 66) / 4096 = 0.039 (significant). addition (40 problems): b = 2, c = 0,
  p = 2 · 1/4 = 0.5; multiplication (10): b = 0, c = 10, p = 2 / 1024 = 0.002.
- DPO was evaluated on 49 of the 50 problems: not compared, and the report says why.
- Seeds: GRPO 0.80, grpo-s1 0.76, grpo-s2 0.78: mean 78.0%, sample sd 2.0 points over 3 seeds.
- Best-of-N at N = 4 (two problems, tests/eval/test_compare.py's): majority wrong on both, prm_min right
  on both (b = 0, c = 2, p = 0.5); beam search right on p0 only (c = 1, p = 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.eval.best_of_n import Candidates, selections
from posttrainlab.eval.compare import paired_difference_ci, points
from posttrainlab.report import build_report, load_run
from posttrainlab.report.paired import comparisons, seed_folders, seed_spread
from posttrainlab.report.results import SMOKE_NOTE

KINDS = [(True, False)] * 2 + [(False, True)] * 10 + [(True, True)] * 30 + [(False, False)] * 8
IDS = [f"test-{i:04d}" for i in range(len(KINDS))]
CATS = ["multiplication" if x != y and y else "addition" for x, y in KINDS]


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def write_jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def eval_folder(root: Path, name: str, right: list[bool], samples: bool = True, ids: list[str] = IDS) -> None:
    n, correct = len(right), sum(right)
    acc = {"value": correct / n, "ci95": [correct / n - 0.1, correct / n + 0.1], "correct": correct, "n": n}
    write(root / "eval" / name / "metrics.json", {"model": name, "data": "data/arith-v1", "split": "test", "n": n,
                                                   "accuracy": acc})  # fmt: skip
    if samples:
        cats = CATS[: len(ids)]  # dpo: the first 49
        rows = [{"id": i, "category": c, "correct": ok} for i, c, ok in zip(ids, cats, right, strict=True)]
        write_jsonl(root / "eval" / name / "samples.jsonl", rows)


def accuracy_only(root: Path, name: str, value: float) -> None:
    write(root / "eval" / name / "metrics.json", {"accuracy": {"value": value, "ci95": [0, 1], "correct": 0, "n": 50}})


PROBLEMS = {
    "p0": ("addition", Candidates([False, True, False, False], [12, 10, 12, None],
                                  [[0.9, 0.3], [0.6, 0.6], [0.95, 0.2], [0.5]])),
    "p1": ("word_problem", Candidates([True, False, False, False], [3, 4, 4, None],
                                      [[0.8], [0.4], [0.3], [0.1]])),
}  # fmt: skip


def best_of_n(root: Path) -> None:
    samples, scores = [], []
    for pid, (cat, c) in PROBLEMS.items():
        rows = [{"response": "r", "correct": ok, "outcome": "correct" if ok else "wrong_answer", "parsed": a}
                for ok, a in zip(c.correct, c.answers, strict=True)]  # fmt: skip
        samples.append({"id": pid, "category": cat, "answer": 0, "prompt": "q", "samples": rows})
        scores.append({"id": pid, "samples": [], "selected": selections(c, [1, 2, 4])})
    write_jsonl(root / "best-of-n" / "samples.jsonl", samples)
    write_jsonl(root / "best-of-n" / "scores.jsonl", scores)
    beam = [
        {"id": "p0", "category": "addition", "correct": True},
        {"id": "p1", "category": "word_problem", "correct": False},
    ]
    write_jsonl(root / "beam-search" / "outcomes.jsonl", beam)
    write(root / "beam-search" / "beam.json", {"tokens_per_problem": 120.5, "best_of_n_tokens_per_problem": 300})


PROVENANCE = {
    "commit": "0b6c20f5a561d9e778941d91bf5dc738365464a8",
    "dirty": True,
    "versions": {"posttrainlab": "0.1.0", "torch": "2.6.0", "peft": None, "python": "3.11.7"},
    "device": "cpu",
    "cuda": False,
    "threads": 2,
    "argv": ["posttrain", "quickstart", "--preset", "smoke"],
    "seeds": {"sft": 0, "grpo": 0},
    "host": {"platform": "Linux-6.8", "cpus": 2},
    "time": "2025-05-01T12:00:00+00:00",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paired") / "run"
    write(root / "run.json", {"preset": "smoke", "stages": [], "provenance": PROVENANCE})
    eval_folder(root, "sft", [x for x, _ in KINDS])
    eval_folder(root, "grpo", [y for _, y in KINDS])
    eval_folder(root, "dpo", [y for _, y in KINDS][:49], ids=IDS[:49])
    accuracy_only(root, "grpo-s1", 0.76)
    accuracy_only(root, "grpo-s2", 0.78)
    best_of_n(root)
    return root


@pytest.fixture(scope="module")
def md(run) -> str:
    return build_report(run)[0].read_text(encoding="utf-8")


def test_method_vs_sft_table_and_words(md):
    ci = points(8 / 50, paired_difference_ci(30, 2, 10, 8))  # (c - b) / n
    assert "### GRPO vs SFT" in md
    assert "| group | n | SFT | GRPO | GRPO − SFT [95% CI] | b | c | McNemar p |" in md
    assert f"| overall | 50 | 64.0% | 80.0% | {ci} | 2 | 10 | 0.039 |" in md
    assert "| addition | 40 | 80.0% | 75.0% | -5.0 [" in md and "| 2 | 0 | 0.500 |" in md
    assert "| multiplication | 10 | 0.0% | 100.0% | +100.0 [" in md and "| 0 | 10 | 0.002 |" in md
    lo, hi = paired_difference_ci(30, 2, 10, 8)
    words = (f"GRPO − SFT = +16.0 points [{100 * lo:+.1f}, {100 * hi:+.1f}], p = 0.039: significant at 0.05. "
             "Significant at 0.05: overall, multiplication. Not significant: addition.")  # fmt: skip
    assert words in md


def test_a_pair_that_cannot_be_compared_says_why(md):
    assert (
        "DPO vs SFT not compared: SFT and DPO cover different problems: 1 only in SFT (test-0049); 0 only in DPO" in md
    )
    assert "### DPO vs SFT" not in md


def test_search_vs_majority(md):
    assert "### Search vs majority vote at N = 4" in md
    assert "| prm_min | 2 | 0.0% | 100.0% | +100.0 [" in md and "| 0 | 2 | 0.500 |" in md
    assert "| beam search | 2 | 0.0% | 50.0% | +50.0 [" in md and "| 0 | 1 | 1.000 |" in md
    assert "\n| majority |" not in md  # the reference, not a row of its own
    assert "prm_min − majority = +100.0 points [" in md and "beam search − majority = +50.0 points [" in md
    assert "p = 0.500: not significant at 0.05" in md
    assert "Generated tokens per problem: best-of-N 300.0, beam search 120.5." in md


def test_seeds_beside_the_accuracy_not_as_rows(md, run):
    assert "| method | accuracy [95% CI] | mean ± sd over seeds |" in md
    grpo = next(line for line in md.splitlines() if line.startswith("| GRPO | 80.0%"))
    assert "| 78.0% ± 2.0 over 3 seeds |" in grpo
    assert next(line for line in md.splitlines() if line.startswith("| SFT | 64.0%")).startswith(
        "| SFT | 64.0% [54.0, 74.0] | – | 32 / 50 |"
    )  # no seeds: a dash
    assert "grpo-s1" not in md and "grpo-s2" not in md
    loaded = load_run(run)
    assert list(loaded.seeds) == ["grpo"] and [m["accuracy"]["value"] for m in loaded.seeds["grpo"]] == [0.76, 0.78]
    assert "grpo-s1" not in loaded.metrics


def test_smoke_note_first_and_provenance_last(md):
    paragraphs = [p for p in md.split("\n\n") if p.strip()]
    assert paragraphs[0].startswith("# ") and paragraphs[1] == SMOKE_NOTE
    assert "measure nothing" in SMOKE_NOTE and "a few steps of each stage" in SMOKE_NOTE
    tail = md.split("## Provenance")[1]
    assert "| commit | 0b6c20f5a561d9e778941d91bf5dc738365464a8 (with uncommitted changes) |" in tail
    assert "| versions | posttrainlab 0.1.0, torch 2.6.0, python 3.11.7 |" in tail  # peft: not installed
    assert "| threads | 2 |" in tail and "| device | cpu |" in tail
    assert "| command line | posttrain quickstart --preset smoke |" in tail and "| seeds | sft 0, grpo 0 |" in tail
    assert md.rstrip().endswith("| time (UTC) | 2025-05-01T12:00:00+00:00 |")


def test_compare_json_is_machine_readable(run, md):
    comp = json.loads((run / "report_files" / "compare.json").read_text(encoding="utf-8"))
    assert comp == json.loads(json.dumps(comparisons(run, ["sft", "dpo", "grpo"])))
    grpo = comp["methods"]["grpo"]
    assert (grpo["a"], grpo["b"]) == ("eval/sft", "eval/grpo")
    assert (grpo["overall"]["b"], grpo["overall"]["c"], grpo["overall"]["significant"]) == (2, 10, True)
    assert grpo["categories"]["multiplication"]["mcnemar_p"] == pytest.approx(2 / 1024)
    assert list(comp["methods"]) == ["grpo"] and "DPO vs SFT" in comp["not_compared"]
    assert comp["best_of_n"]["n"] == 4 and "majority" not in comp["best_of_n"]["selectors"]
    assert comp["beam_search"]["overall"]["c"] == 1
    assert comp["tokens_per_problem"] == {"best-of-N": 300, "beam search": 120.5}


def test_nothing_to_compare_leaves_the_section_and_file_out(tmp_path):
    root = tmp_path / "run"
    eval_folder(root, "sft", [x for x, _ in KINDS], samples=False)
    eval_folder(root, "grpo", [y for _, y in KINDS], samples=False)
    md = build_report(root)[0].read_text(encoding="utf-8")
    assert "Paired comparisons" not in md and "Provenance" not in md and SMOKE_NOTE not in md
    assert not (root / "report_files" / "compare.json").exists()


def test_a_malformed_sft_file_is_a_sentence_not_a_failure(tmp_path):
    root = tmp_path / "run"
    eval_folder(root, "sft", [x for x, _ in KINDS])
    eval_folder(root, "grpo", [y for _, y in KINDS])
    (root / "eval" / "sft" / "samples.jsonl").write_text('{"id": "a", "category": "x"}\n', encoding="utf-8")
    md = build_report(root)[0].read_text(encoding="utf-8")
    assert "SFT not compared: " in md and "samples.jsonl:1: row has no correct field" in md


def test_seed_folders_and_spread():
    assert seed_folders(["sft", "sft-s1", "dpo-s1", "grpo", "grpo-s10", "grpo-s2", "grpo-s0", "x-sy"]) == {
        "sft-s1": "sft", "grpo-s2": "grpo", "grpo-s10": "grpo"}  # fmt: skip
    assert list(seed_folders(["grpo", "grpo-s10", "grpo-s2"])) == ["grpo-s2", "grpo-s10"]  # by k, not as text
    assert seed_spread([0.80, 0.76, 0.78]) == "78.0% ± 2.0 over 3 seeds"
    assert seed_spread([0.5, 0.5]) == "50.0% ± 0.0 over 2 seeds" and seed_spread([]) == "–"


def test_the_two_dpo_pair_sources_are_also_compared_head_to_head(tmp_path):
    """dpo-policy vs dpo beside each against SFT: B − A on the same problems (here dpo-policy = GRPO's outcomes,
    dpo = SFT's, so the numbers are the SFT vs GRPO ones of the module docstring)."""
    sft = [x for x, _ in KINDS]
    eval_folder(tmp_path, "sft", sft)
    eval_folder(tmp_path, "dpo", sft)
    eval_folder(tmp_path, "dpo-policy", [y for _, y in KINDS])
    comp = comparisons(tmp_path, ["sft", "dpo", "dpo-policy"])
    r = comp["head_to_head"]["dpo-policy vs dpo"]["overall"]
    assert (r["n"], r["b"], r["c"], round(r["diff"], 3), round(r["mcnemar_p"], 4)) == (50, 2, 10, 0.16, 0.0386)
    build_report(tmp_path)
    assert "### DPO-policy vs DPO" in (tmp_path / "report.md").read_text()
