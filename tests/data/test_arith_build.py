"""arith-v1 as its card states it: sizes, shares, corruptions, contamination, releases, determinism.

Every number asserted here is a number from the card (shared/seeds/002_9a78ee969fafc3ba.txt).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest

from posttrainlab.data.arith.corrupt import CORRUPTIONS, DELTAS, misreadings
from posttrainlab.data.arith.generator import SPLITS, VERSIONS, build, draw_pools, file_order
from posttrainlab.data.arith.problems import CATEGORIES, INSTRUCTION
from posttrainlab.data.arith.release import check
from posttrainlab.grading.arith import ArithGrader

CARD_SIZES = {
    "sft_train": 1000,
    "preference_train": 500,
    "rl_train": 500,
    "validation": 100,
    "test": 500,
    "dev": 500,
    "sft_extra": 2000,
    "sft_train_3k": 3000,
    "preference_test": 500,
    "rl_extra": 1000,
    "rl_train_1500": 1500,
}
FIELDS = {
    "eval": ["id", "category", "prompt", "answer", "solution"],
    "sft": ["id", "category", "prompt", "answer", "response"],
    "preference": ["id", "category", "prompt", "answer", "chosen", "rejected", "corruption"],
    "prompt": ["id", "category", "prompt", "answer"],
}
LINE = re.compile(r"^(\d+) ([+*-]) (\d+) = (-?\d+)$")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@pytest.fixture(scope="module")
def latest():
    return build(VERSIONS[-1])


@pytest.fixture(scope="module")
def all_builds():
    return {v: build(v) for v in VERSIONS}


def test_every_release_rebuilds_byte_identical_to_its_golden_manifest():
    for version in VERSIONS:
        assert check(version) == [], version


def test_split_sizes_kinds_and_field_order(latest):
    assert {s.name: len(r) for s, r in ((s, latest.records[s.name]) for s in SPLITS)} == CARD_SIZES
    for split in SPLITS:
        for i, record in enumerate(latest.records[split.name]):
            assert list(record) == FIELDS[split.config]
            assert isinstance(record["answer"], int) and record["answer"] >= 0
            if not split.sources:
                assert record["id"] == f"{split.name}-{i:04d}"


def test_equal_category_share_in_every_split(latest):
    for name, records in latest.records.items():
        counts = Counter(r["category"] for r in records)
        assert counts == {c: len(records) // 5 for c in CATEGORIES}, name


def test_prompt_is_the_card_instruction_then_the_question(latest):
    card_example = (
        "Solve the following problem. Show the calculation, then give the final result on its own last line "
        'in the form "Answer: <integer>".\n\nWhat is 349 - 209?'
    )
    assert card_example.startswith(INSTRUCTION + "\n\n")
    for records in latest.records.values():
        for r in records:
            assert r["prompt"].startswith(INSTRUCTION + "\n\n")


def test_solutions_are_correct_by_construction_and_take_the_cards_steps(latest):
    steps = {"addition": 1, "subtraction": 1, "multiplication": 1, "multi_step": 2, "word_problem": 2}
    grader = ArithGrader()
    for split in ("test", "validation", "dev", "sft_train_3k"):
        for r in latest.records[split]:
            text = r.get("solution") or r["response"]
            *calc, answer_line = text.split("\n")
            assert len(calc) == steps[r["category"]]
            for line in calc:
                a, op, b, c = LINE.match(line).groups()
                assert OPS[op](int(a), int(b)) == int(c) >= 0
            assert answer_line == f"Answer: {r['answer']}"
            assert grader.grade(text, r["answer"]).correct


def test_multiplication_operands_and_the_96_unused_problems(latest):
    """188 x 7 = 1,316 problems; the pools draw 1,220 of them; 96 remain (card, "Limitations")."""
    seen = set()
    for split in SPLITS:
        if split.sources:
            continue
        for r in latest.records[split.name]:
            if r["category"] == "multiplication":
                a, b = map(int, re.search(r"What is (\d+) \* (\d+)\?$", r["prompt"]).groups())
                assert 12 <= a <= 199 and 3 <= b <= 9
                seen.add((a, b))
    assert len(seen) == 1220
    assert 188 * 7 - len(seen) == 96
    assert latest.manifest["multiplication_space"] == {"size": 1316, "drawn": 1220, "unused": 96}


def test_word_problems_use_gender_neutral_names_and_no_pronouns(latest):
    pronouns = re.compile(r"\b(he|she|him|her|his|hers|they|them|their)\b", re.IGNORECASE)
    templates = set()
    for r in latest.records["sft_train_3k"] + latest.records["test"]:
        if r["category"] == "word_problem":
            assert not pronouns.search(r["prompt"].split("\n\n", 1)[1]), r["prompt"]
    for problems in draw_pools().values():
        templates |= {p.template for p in problems if p.category == "word_problem"}
    assert len(templates) == 8


def test_no_prompt_or_key_overlap_except_the_cards_intended_ones(latest):
    problems = draw_pools()
    intended = {
        ("test", "preference_test"),
        ("sft_train", "sft_train_3k"),
        ("sft_extra", "sft_train_3k"),
        ("rl_train", "rl_train_1500"),
        ("rl_extra", "rl_train_1500"),
    }
    for a, b in itertools.combinations(latest.records, 2):
        prompts = {r["prompt"] for r in latest.records[a]} & {r["prompt"] for r in latest.records[b]}
        keys = {p.key for p in problems[a]} & {p.key for p in problems[b]}
        if (a, b) in intended or (b, a) in intended:
            assert prompts and keys
        else:
            assert not prompts and not keys, (a, b)
    checks = latest.manifest["contamination_checks"]
    assert checks["unintended_overlaps"] == 0
    assert len(checks["pairs"]) == 55
    assert sum("intended" in p for p in checks["pairs"]) == 5


def test_no_duplicate_problem_within_a_pool():
    for name, problems in draw_pools().items():
        assert len({p.key for p in problems}) == len(problems), name


def test_nested_and_derived_splits(latest):
    r = latest.records
    assert r["sft_train_3k"] == r["sft_train"] + r["sft_extra"]
    assert r["rl_train_1500"] == r["rl_train"] + r["rl_extra"]
    assert [(p["prompt"], p["answer"]) for p in r["preference_test"]] == [(t["prompt"], t["answer"]) for t in r["test"]]
    assert [p["chosen"] for p in r["preference_test"]] == [t["solution"] for t in r["test"]]


def test_corruption_mix_is_exactly_125_each(latest):
    for split in ("preference_train", "preference_test"):
        assert Counter(r["corruption"] for r in latest.records[split]) == {k: 125 for k in CORRUPTIONS}


def _calc(text):
    return [LINE.match(line).groups() for line in text.split("\n") if LINE.match(line)]


def test_rejected_is_one_propagated_change_of_chosen(latest):
    grader = ArithGrader()
    for r in latest.records["preference_train"] + latest.records["preference_test"]:
        chosen, rejected, kind = r["chosen"], r["rejected"], r["corruption"]
        good, bad = _calc(chosen), _calc(rejected)
        assert grader.grade(chosen, r["answer"]).outcome == "correct"
        outcome = grader.grade(rejected, r["answer"]).outcome
        if kind == "missing_answer":
            assert rejected == chosen.rsplit("\n", 1)[0] and outcome == "missing_answer"
            continue
        assert outcome == "wrong_answer"
        if kind == "inconsistent_answer":
            assert bad == good
            given = int(rejected.rsplit("Answer: ", 1)[1])
            assert given - r["answer"] in DELTAS
            continue
        assert len(bad) == len(good)
        first = next(i for i, (g, b) in enumerate(zip(good, bad, strict=True)) if g != b)
        ga, gop, gb, gc = good[first]
        ba, bop, bb, bc = bad[first]
        assert gop == bop
        if kind == "arithmetic_slip":
            assert (ga, gb) == (ba, bb) and int(bc) - int(gc) in DELTAS
        else:  # operand_error: one operand misread, that step computed correctly from it
            changed = [(g, b) for g, b in ((ga, ba), (gb, bb)) if g != b]
            assert len(changed) == 1 and int(changed[0][1]) in misreadings(int(changed[0][0]))
            assert OPS[bop](int(ba), int(bb)) == int(bc)
        for later in bad[first + 1 :]:  # propagated: later steps compute correctly from the wrong value
            a, op, b, c = later
            assert OPS[op](int(a), int(b)) == int(c) >= 0
        assert rejected.endswith(f"Answer: {bad[-1][3]}")


def test_earlier_release_files_are_byte_identical_in_every_later_release(all_builds):
    for earlier, later in itertools.combinations(VERSIONS, 2):
        old, new = all_builds[earlier], all_builds[later]
        data_files = [f for f in old.files if f.endswith(".jsonl")]
        assert data_files
        for rel in data_files:
            assert old.files[rel] == new.files[rel], (earlier, later, rel)


def test_each_release_has_only_its_own_files(all_builds):
    expected = {
        "1.0.0": {"test", "validation", "sft_train", "preference_train", "preference_test", "rl_train"},
        "1.1.0": {"dev"},
        "1.2.0": {"sft_extra", "sft_train_3k"},
        "1.3.0": {"rl_extra", "rl_train_1500"},
    }
    have: set[str] = set()
    for version in VERSIONS:
        have |= expected[version]
        assert {s.name for s in file_order(version)} == have
        assert {f.split("/")[1].removesuffix(".jsonl") for f in all_builds[version].files if "/" in f} == have


def test_build_is_deterministic():
    assert build("1.0.0").files == build("1.0.0").files


def test_misreadings_swap_adjacent_digits_then_plus_minus_one():
    assert misreadings(209) == [290, 210, 208]
    assert misreadings(11) == [12, 10]
    assert misreadings(0) == [1]
