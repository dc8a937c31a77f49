"""On-policy DPO pairs (label/policy_pairs.py) from a scripted backend: known answers and grades give known pairs,
counts and files; the same settings reuse the files; bad values and an empty result are one-line refusals."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.label.policy_pairs import PAIRS, SUMMARY, check_preference, pair_answers, policy_pairs, sample_pairs
from posttrainlab.train.recipes import DatasetConfig, PreferenceConfig

RECORDS = [
    {"id": "p0", "category": "addition", "prompt": "What is 2 + 3?", "answer": 5, "chosen": "2 + 3 = 5\nAnswer: 5"},
    {"id": "p1", "category": "subtraction", "prompt": "What is 9 - 4?", "answer": 5, "chosen": "9 - 4 = 5\nAnswer: 5"},
    {"id": "p2", "category": "addition", "prompt": "What is 1 + 1?", "answer": 2, "chosen": "1 + 1 = 2\nAnswer: 2"},
    {"id": "p3", "category": "addition", "prompt": "What is 4 + 4?", "answer": 8, "chosen": "4 + 4 = 8\nAnswer: 8"},
]
#: k = 4 answers per prompt, in sample order, and what the grader makes of them
SCRIPT = {
    "What is 2 + 3?": ["Answer: 6", "Answer: 5", "Answer: 5", "2 + 3 = 5\nAnswer: 5"],  # 2 distinct correct, 1 wrong
    "What is 9 - 4?": ["Answer: 4", "five", "Answer: 4", "Answer: 5.0"],  # no correct: wrong, missing, malformed
    "What is 1 + 1?": ["Answer: 2"] * 4,  # no incorrect
    "What is 4 + 4?": ["Answer: 9", "Answer: 8", "Answer: 7", "4 + 4 = 8\nAnswer: 8"],  # 2 correct, 2 wrong
}
DATASET = DatasetConfig(path="data/x", split="preference_train")


class ScriptedBackend:
    """A ``SamplingBackend`` answering each prompt from ``SCRIPT``; records every call's arguments."""

    name = "scripted"

    def __init__(self):
        self.calls: list[dict] = []

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        self.calls.append({"prompts": prompts, "n": n, "temperature": temperature, "top_p": top_p,
                           "max_new_tokens": max_new_tokens, "seed": seed})  # fmt: skip
        return [SCRIPT[p[0]["content"]][:n] for p in prompts]


class NoBackend:
    name = "none"

    def generate(self, *args, **kwargs):
        raise AssertionError("sampled although the pairs could be reused")


def cfg(**kw) -> PreferenceConfig:
    return PreferenceConfig(**{"source": "policy", "k": 4, **kw})


def test_known_answers_give_known_pairs_and_counts():
    backend = ScriptedBackend()
    pairs, counts = sample_pairs(RECORDS, cfg(pairs_per_prompt=2, temperature=0.7, seed=3), backend)
    assert [(p["id"], p["chosen"], p["rejected"], p["chosen_source"], p["rejected_outcome"]) for p in pairs] == [
        ("p0-0", "Answer: 5", "Answer: 6", "policy", "wrong_answer"),  # one distinct incorrect: one pair
        ("p1-0", RECORDS[1]["chosen"], "Answer: 4", "reference", "wrong_answer"),  # "Answer: 4" twice counts once
        ("p1-1", RECORDS[1]["chosen"], "five", "reference", "missing_answer"),
        ("p3-0", "Answer: 8", "Answer: 9", "policy", "wrong_answer"),
        ("p3-1", "4 + 4 = 8\nAnswer: 8", "Answer: 7", "policy", "wrong_answer"),
    ]
    assert counts == {
        "prompts": 4, "samples": 16, "pairs": 5, "prompts_with_pairs": 3, "prompts_without_correct": 1,
        "prompts_without_incorrect": 1, "reference_chosen": 2,
        "sample_outcomes": {"correct": 9, "malformed": 1, "missing_answer": 1, "wrong_answer": 5},
        "rejected_outcomes": {"missing_answer": 1, "wrong_answer": 4},
    }  # fmt: skip
    assert backend.calls[0]["n"] == 4 and backend.calls[0]["seed"] == 3 and backend.calls[0]["temperature"] == 0.7
    assert backend.calls[0]["prompts"][0] == [{"role": "user", "content": "What is 2 + 3?"}]
    grader = ArithGrader()
    by_id = {r["id"]: r for r in RECORDS}
    for p in pairs:  # every chosen graded correct, every rejected not
        answer = by_id[p["source_id"]]["answer"]
        assert grader.grade(p["chosen"], answer).correct and not grader.grade(p["rejected"], answer).correct


def test_one_pair_per_prompt_and_no_fallback():
    pairs, counts = sample_pairs(RECORDS, cfg(chosen_fallback="none"), ScriptedBackend())
    assert [p["id"] for p in pairs] == ["p0-0", "p3-0"]
    assert counts["reference_chosen"] == 0 and counts["prompts_with_pairs"] == 2


def test_the_malformed_answer_is_a_reject_too():
    pairs = pair_answers(RECORDS[1], ["Answer: 5.0", "Answer: 5"], ["malformed", "correct"], pairs_per_prompt=3)
    assert [(p["chosen"], p["rejected"], p["rejected_outcome"]) for p in pairs] == [
        ("Answer: 5", "Answer: 5.0", "malformed")
    ]


def test_files_are_written_then_reused_for_the_same_settings(tmp_path):
    pairs = policy_pairs(RECORDS, cfg(), "runs/sft", tmp_path, DATASET, backend=ScriptedBackend())
    rows = [json.loads(line) for line in (tmp_path / PAIRS).read_text().splitlines()]
    assert rows == pairs and len(rows) == 3
    assert set(rows[0]) == {"id", "source_id", "category", "prompt", "chosen", "rejected", "chosen_source",
                            "rejected_outcome"}  # fmt: skip
    summary = json.loads((tmp_path / SUMMARY).read_text())
    assert summary["counts"]["pairs"] == 3 and summary["counts"]["prompts_without_correct"] == 1
    assert summary["settings"]["policy"] == "runs/sft" and summary["settings"]["k"] == 4
    assert summary["settings"]["split"] == "preference_train" and summary["backend"] == "scripted"

    assert policy_pairs(RECORDS, cfg(), "runs/sft", tmp_path, DATASET, backend=NoBackend()) == pairs
    with pytest.raises(AssertionError, match="sampled"):  # another seed, another policy, other records: sample again
        policy_pairs(RECORDS, cfg(seed=1), "runs/sft", tmp_path, DATASET, backend=NoBackend())
    with pytest.raises(AssertionError, match="sampled"):
        policy_pairs(RECORDS, cfg(), "runs/sft2", tmp_path, DATASET, backend=NoBackend())
    with pytest.raises(AssertionError, match="sampled"):
        policy_pairs(RECORDS[:3], cfg(), "runs/sft", tmp_path, DATASET, backend=NoBackend())
    with pytest.raises(AssertionError, match="sampled"):  # reuse=False (an --overwrite run)
        policy_pairs(RECORDS, cfg(), "runs/sft", tmp_path, DATASET, backend=NoBackend(), reuse=False)
    (tmp_path / PAIRS).write_text((tmp_path / PAIRS).read_text().splitlines()[0] + "\n")  # cut short: not whole
    with pytest.raises(AssertionError, match="sampled"):
        policy_pairs(RECORDS, cfg(), "runs/sft", tmp_path, DATASET, backend=NoBackend())


def test_no_pair_at_all_is_refused_and_writes_nothing(tmp_path):
    only_correct = [RECORDS[2]]
    with pytest.raises(BadInput, match=r"no pair from 1 prompts .*1 without an incorrect one"):
        policy_pairs(only_correct, cfg(), "runs/sft", tmp_path / "out", DATASET, backend=ScriptedBackend())
    assert not (tmp_path / "out").exists()


def test_a_record_without_the_reference_is_refused_only_when_the_fallback_needs_it(tmp_path):
    bare = [{k: v for k, v in r.items() if k != "chosen"} for r in RECORDS]
    with pytest.raises(BadInput, match=r"data/x:preference_train record 0: no chosen field"):
        policy_pairs(bare, cfg(), "runs/sft", tmp_path, DATASET, backend=ScriptedBackend())
    pairs = policy_pairs(bare, cfg(chosen_fallback="none"), "runs/sft", tmp_path, DATASET, backend=ScriptedBackend())
    assert [p["id"] for p in pairs] == ["p0-0", "p3-0"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": "bogus"}, "preference.source='bogus': choose one of synthetic, policy, step"),
        ({"k": 1}, "preference.k=1: need at least 2 samples"),
        ({"temperature": 0.0}, "preference.temperature=0.0: must be > 0"),
        ({"top_p": 0.0}, "preference.top_p=0.0: must be in"),
        ({"max_new_tokens": 0}, "preference.max_new_tokens=0: must be at least 1"),
        ({"pairs_per_prompt": 0}, "preference.pairs_per_prompt=0: must be at least 1"),
        ({"chosen_fallback": "synthetic"}, "preference.chosen_fallback='synthetic': choose one of reference, none"),
        ({"batch_size": 0}, "preference.batch_size=0: must be at least 1"),
    ],
)
def test_bad_values_are_one_line(change, message):
    with pytest.raises(BadInput) as info:
        check_preference(replace(cfg(), **change))
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_synthetic_ignores_the_sampling_fields():
    check_preference(PreferenceConfig(k=0, temperature=0.0))  # unused: not checked
