"""Step-DPO pairs (label/step_pairs.py, ``preference.source: step``): hand-made samples of one arith-v1 problem give
known (prefix, chosen, rejected) at the exact first wrong line, counted, ranked and capped; what has no wrong line in
the reference's range gives none; a prompt that is not arith-v1 is refused before anything is sampled."""

from __future__ import annotations

import json

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.label.policy_pairs import PAIRS, SUMMARY, policy_pairs, sample_pairs
from posttrainlab.label.step_pairs import step_pairs
from posttrainlab.train.recipes import DatasetConfig, PreferenceConfig

PROMPT = "Solve this.\n\nWhat is 351 - 148 + 56?"  # reference: 351 - 148 = 203 / 203 + 56 = 259 / Answer: 259
RECORD = {"id": "m0", "category": "multi_step", "prompt": PROMPT, "answer": 259}
#: each sample with the pair it should make: (prefix, chosen, rejected), or None
SAMPLES = [
    ("351 - 148 = 213\n213 + 56 = 269\nAnswer: 269", ("", "351 - 148 = 203\n", "351 - 148 = 213\n")),
    ("351 - 148 = 203\n203 + 56 = 269\nAnswer: 269", ("351 - 148 = 203\n", "203 + 56 = 259\n", "203 + 56 = 269\n")),
    ("351 - 148 = 203\n203 + 56 = 259\nAnswer: 259", None),  # right: no pair
    (
        "351 - 148 = 203\n56 + 203 = 259\nAnswer: 258",  # commuted operands are right; the last line has no newline
        ("351 - 148 = 203\n56 + 203 = 259\n", "Answer: 259", "Answer: 258"),
    ),
    ("351 - 148 = 203\n203 + 56 = 259", ("351 - 148 = 203\n", "203 + 56 = 259\n", "203 + 56 = 259")),  # stops early
    ("351 - 148 = 203\n203 + 56 = 259\nAnswer: 259\nAnswer: 7", None),  # wrong line past the reference's last
    ("", None),  # nothing written: no line to pair
    ("351 - 148 = 203\n203 + 56 = 269\nAnswer: 269", ("351 - 148 = 203\n", "203 + 56 = 259\n", "203 + 56 = 269\n")),
    ("351 - 148 = 203\nAnswer: 203", ("351 - 148 = 203\n", "203 + 56 = 259\n", "Answer: 203")),  # skips a step
]
ANSWERS = [a for a, _ in SAMPLES]
OUTCOMES = ["correct" if a.endswith("Answer: 259") else "wrong_answer" for a in ANSWERS]
OUTCOMES[4] = OUTCOMES[6] = "missing_answer"  # as the arith grader has them


def test_each_wrong_sample_pairs_its_first_wrong_line_with_the_reference_line():
    pairs = step_pairs(RECORD, ANSWERS, OUTCOMES, pairs_per_prompt=10)
    got = [(p["prefix"], p["chosen"], p["rejected"]) for p in pairs]
    # the pair two samples made comes first (count 2); the rest in sample order
    assert got == [SAMPLES[1][1], SAMPLES[0][1], SAMPLES[3][1], SAMPLES[4][1], SAMPLES[8][1]]
    assert [p["count"] for p in pairs] == [2, 1, 1, 1, 1]
    assert [p["step"] for p in pairs] == [1, 0, 2, 1, 1]
    assert [p["id"] for p in pairs] == [f"m0-{i}" for i in range(5)]
    assert {p["chosen_source"] for p in pairs} == {"reference"} and pairs[3]["rejected_outcome"] == "missing_answer"
    assert all(p["prompt"] == PROMPT and p["source_id"] == "m0" and p["category"] == "multi_step" for p in pairs)
    assert step_pairs(RECORD, ANSWERS, OUTCOMES) == pairs[:1]  # pairs_per_prompt 1: the most frequent


def test_a_prompt_that_is_not_arith_v1_is_refused_before_sampling(tmp_path):
    bad = [RECORD, {"id": "x", "prompt": "What is the capital of France?", "answer": 0}]

    class NoBackend:
        name = "none"

        def generate(self, *args, **kwargs):
            raise AssertionError("sampled")

    cfg = PreferenceConfig(source="step", k=2)
    with pytest.raises(BadInput, match=r"data/x:rl_train record 1: not an arith-v1 question"):
        policy_pairs(bad, cfg, "runs/sft", tmp_path, DatasetConfig(path="data/x", split="rl_train"),
                     backend=NoBackend())  # fmt: skip
    with pytest.raises(BadInput, match="'x': not an arith-v1 question"):
        step_pairs(bad[1], ["Answer: 1"], ["wrong_answer"])


class Scripted:
    name = "scripted"

    def generate(self, prompts, *, n=1, **_):
        return [ANSWERS[:n] for _ in prompts]


def test_sampled_step_pairs_are_written_with_their_counts(tmp_path):
    """No ``chosen`` field is needed (the reference is the problem's own), and the summary counts where they are."""
    cfg = PreferenceConfig(source="step", k=len(ANSWERS), pairs_per_prompt=3)
    pairs = policy_pairs([RECORD], cfg, "runs/sft", tmp_path, DatasetConfig(path="data/x", split="rl_train"),
                         backend=Scripted())  # fmt: skip
    assert [json.loads(line) for line in (tmp_path / PAIRS).read_text().splitlines()] == pairs and len(pairs) == 3
    counts = json.loads((tmp_path / SUMMARY).read_text())["counts"]
    assert counts["pairs"] == 3 and counts["paired_samples"] == 4 and counts["pairs_by_step"] == {"0": 1, "1": 1,
                                                                                                  "2": 1}  # fmt: skip
    assert counts["sample_outcomes"] == {"correct": 1, "missing_answer": 2, "wrong_answer": 6}
    assert (tmp_path / "pairs" / "README.md").is_file()  # published with its card, as policy pairs are


def test_no_wrong_line_at_all_is_refused_and_writes_nothing(tmp_path):
    cfg = PreferenceConfig(source="step", k=1)

    class Right:
        name = "right"

        def generate(self, prompts, *, n=1, **_):
            return [["351 - 148 = 203\n203 + 56 = 259\nAnswer: 259"] * n for _ in prompts]

    with pytest.raises(BadInput, match="preference.source=step: no wrong line in 1 samples of 1 prompts"):
        policy_pairs([RECORD], cfg, "runs/sft", tmp_path / "out", DatasetConfig(path="d", split="s"), backend=Right())
    assert not (tmp_path / "out").exists()
    assert sample_pairs([RECORD], cfg, Right())[1]["pairs"] == 0
