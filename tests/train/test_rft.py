"""RFT (train/rft.py) and its more-training control (train/continued.py): which samples are kept under each filter
(a hand-made set), the size of the mixed fine-tuning set, a two-round run of the tiny model from scripted samples that
reuses its samples when run again, and sft-continued training exactly the steps that run took."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.data.arith.steps import parse_question
from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.train.common import load_records
from posttrainlab.train.recipes import RejectionConfig, RFTRecipe
from posttrainlab.train.rft import SAMPLES, accept, frontier, mixed_rows, rejection_rows, sft_share

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/arith/rft.yaml"

RECORD = {"id": "p0", "category": "multi_step", "prompt": "Solve ...\n\nWhat is 351 - 148 + 56?", "answer": 259}
#: eight samples of RECORD, in sample order, and what each filter makes of them
SAMPLED = [
    "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259",  # 0: right answer, every step right
    "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259",  # 1: the same text again: kept once
    "351 - 148 = 200\n200 + 59 = 259\nAnswer: 259",  # 2: right answer through a wrong step: answer only
    "Answer: 259",  # 3: no calculation, the right answer line: no false claim, so exact too
    "351 - 148 = 203\n203 + 56 = 259\nAnswer: 260",  # 4: wrong answer
    "351 - 148 = 203\n203 + 56 = 259",  # 5: no answer line
    "56 + 351 = 407\n407 - 148 = 259\nAnswer: 259",  # 6: right answer in another order: answer only
    "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259.",  # 7: malformed answer line
]


def graded(record: dict, texts: list[str]) -> list[dict]:
    grader = ArithGrader()
    out = []
    for t in texts:
        g = grader.grade(t, record["answer"])
        out.append({"response": t, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed})
    return out


def kept_indices(cfg: RejectionConfig) -> list[int]:
    problem = parse_question(RECORD["prompt"])
    return [int(row["id"].rsplit("-", 1)[1]) for row in accept(RECORD, graded(RECORD, SAMPLED), cfg, problem)]


def test_each_filter_keeps_exactly_the_samples_it_should():
    assert kept_indices(RejectionConfig(filter="answer")) == [0, 2, 3, 6]
    assert kept_indices(RejectionConfig(filter="process")) == [0, 3]
    assert kept_indices(RejectionConfig(filter="answer", per_prompt=2)) == [0, 2]
    assert kept_indices(RejectionConfig(filter="process", per_prompt=1)) == [0]
    row = accept(RECORD, graded(RECORD, SAMPLED), RejectionConfig(), None)[0]
    # pass_rate: samples 0, 1, 2, 3 and 6 of the eight have the right answer
    assert row == {"id": "p0-0", "source_id": "p0", "category": "multi_step", "prompt": RECORD["prompt"],
                   "response": SAMPLED[0], "pass_rate": 5 / 8}  # fmt: skip


def test_max_pass_rate_keeps_the_prompts_the_policy_does_not_always_solve():
    always = {"id": "p1", "category": "addition", "prompt": "What is 2 + 3?", "answer": 5}
    records = [RECORD, always]
    samples = [graded(RECORD, SAMPLED), graded(always, ["2 + 3 = 5\nAnswer: 5"] * 8)]
    rows, _ = rejection_rows(records, samples, RejectionConfig(filter="answer"))
    assert [(r["source_id"], r["pass_rate"]) for r in rows] == [("p0", 5 / 8)] * 4 + [("p1", 1.0)]
    assert frontier(rows, 1.0) == rows
    assert [r["id"] for r in frontier(rows, 0.875)] == ["p0-0", "p0-2", "p0-3", "p0-6"]
    assert frontier(rows, 0.5) == []
    assert all("pass_rate" not in r for r in mixed_rows(rows, [], 0.0, seed=0))  # not a training column
    with pytest.raises(BadInput, match="carry no pass rate"):
        frontier([{"id": "old"}], 0.875)
    for bad in ("0", "1.5"):
        with pytest.raises(BadInput, match="max_pass_rate"):
            load_config(RFTRecipe, CONFIG, [f"max_pass_rate={bad}"])


def test_rejection_counts_and_process_needs_arith_problems():
    other = {"id": "p1", "category": "addition", "prompt": "What is 2 + 3?", "answer": 5}
    records = [RECORD, other]
    samples = [graded(RECORD, SAMPLED), graded(other, ["2 + 3 = 5\nAnswer: 5", "2 + 3 = 6\nAnswer: 5"])]
    rows, counts = rejection_rows(records, samples, RejectionConfig(filter="answer"))
    assert [r["id"] for r in rows] == ["p0-0", "p0-2", "p0-3", "p0-6", "p1-0", "p1-1"]
    assert counts == {"prompts": 2, "samples": 10, "sample_outcomes": {"correct": 7, "malformed": 1,
                      "missing_answer": 1, "wrong_answer": 1}, "correct": 7, "exact": 4, "kept": 6,
                      "prompts_with_kept": 2, "filter": "answer"}  # fmt: skip
    rows, counts = rejection_rows(records, samples, RejectionConfig(filter="process"))
    assert [r["id"] for r in rows] == ["p0-0", "p0-3", "p1-0"] and counts["kept"] == 3
    grader_only = {"id": "q", "category": "addition", "prompt": "Add two and three.", "answer": 5}
    with pytest.raises(BadInput, match="record 'q' is not an arith-v1 problem"):
        rejection_rows([grader_only], [graded(grader_only, ["Answer: 5"])], RejectionConfig(filter="process"))


def test_the_mixed_set_holds_the_kept_samples_and_its_share_of_sft_rows():
    kept = [{"id": f"k{i}", "prompt": f"q{i}", "response": f"r{i}"} for i in range(7)]
    sft = [{"id": f"s{i}", "category": "addition", "prompt": f"sq{i}", "response": f"sr{i}"} for i in range(100)]
    mixed = mixed_rows(kept, sft, 1.0, seed=3)
    assert len(mixed) == 14 and [r["source"] for r in mixed] == ["policy"] * 7 + ["sft"] * 7
    drawn = [r["id"] for r in mixed[7:]]
    assert len(set(drawn)) == 7 and drawn == [r["id"] for r in mixed_rows(kept, sft, 1.0, seed=3)[7:]]
    assert drawn != [r["id"] for r in mixed_rows(kept, sft, 1.0, seed=4)[7:]]
    assert len(mixed_rows(kept, sft, 0.5, seed=0)) == 7 + 4  # floor(3.5 + 0.5)
    assert len(mixed_rows(kept, sft[:5], 3.0, seed=0)) == 7 + 5  # at most all of sft_data
    assert mixed_rows(kept, sft, 0.0, seed=0) == [{**r, "source": "policy"} for r in kept]
    assert (sft_share(0, 2.0, 10), sft_share(3, 1 / 3, 10)) == (0, 1)


class ScriptedPolicy:
    """A ``SamplingBackend`` answering every arith-v1 prompt with its exact solution, a right answer reached through a
    wrong first step, and a wrong answer, in that order (then repeating)."""

    name = "scripted"

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, *, n=1, seed=0, **_):
        self.calls += 1
        out = []
        for p in prompts:
            problem = parse_question(p[-1]["content"])
            three = [problem.solution, f"1 + 1 = 3\nAnswer: {problem.answer}", f"Answer: {problem.answer + 1}"]
            out.append([three[i % 3] for i in range(n)])
        return out


class NoBackend:
    name = "none"

    def generate(self, *args, **kwargs):
        raise AssertionError("sampled although the samples could be reused")


def rft_recipe(model, arith_dir, out, *extra: str) -> RFTRecipe:
    return load_config(
        RFTRecipe,
        CONFIG,
        [f"model={model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=4",
         f"sft_data.path={arith_dir}", "sft_data.limit=20", "rejection.k=3", "optim.max_steps=1",
         "optim.batch_size=4", "optim.logging_steps=1", "optim.save_steps=1", "optim.learning_rate=0.01",
         "optim.warmup_ratio=0", *extra],
    )  # fmt: skip


def test_two_rounds_train_from_kept_samples_and_sft_continued_matches_their_steps(arith_dir, tiny_model, tmp_path):
    from test_trainers import changed, weights

    from posttrainlab.train.continued import ContinuedRecipe, run_steps, train_continued
    from posttrainlab.train.rft import train_rft

    out = tmp_path / "rft"
    recipe = rft_recipe(tiny_model, arith_dir, out, "rounds=2", "rejection.filter=process", "sft_ratio=0.5")
    backend = ScriptedPolicy()
    train_rft(recipe, backend=backend)
    assert backend.calls == 2  # one sampling per round
    for folder in (out / "round-1", out):
        kept = [json.loads(line) for line in (folder / f"{SAMPLES}.jsonl").read_text().splitlines()]
        assert len(kept) == 4 and all(parse_question(r["prompt"]).solution == r["response"] for r in kept)
        counts = json.loads((folder / f"{SAMPLES}.json").read_text())["counts"]
        assert (counts["samples"], counts["correct"], counts["exact"], counts["kept"]) == (12, 8, 4, 4)
        summary = json.loads((folder / "train_summary.json").read_text())
        assert summary["records"] == 4 + 2 and summary["global_step"] == 1  # 4 kept + floor(0.5 * 4 + 0.5) SFT rows
    assert json.loads((out / "round-1" / SAMPLES).with_suffix(".json").read_text())["settings"]["seed"] == 0
    assert json.loads((out / f"{SAMPLES}.json").read_text())["settings"]["policy"] == str(out / "round-1")
    assert changed(weights(tiny_model), weights(out)) > 0 and run_steps(out) == 2
    train_rft(recipe, backend=NoBackend())  # finished: samples reused, nothing sampled again

    cont = ContinuedRecipe(model=str(tiny_model), output_dir=str(tmp_path / "cont"), steps_from=str(out))
    cont.dataset.path, cont.dataset.split, cont.dataset.limit = str(arith_dir), "sft_train_3k", 20
    cont.optim.batch_size, cont.optim.learning_rate, cont.optim.warmup_ratio = 4, 0.01, 0.0
    train_continued(cont)
    summary = json.loads((tmp_path / "cont" / "train_summary.json").read_text())
    assert summary["global_step"] == 2 and summary["model"] == str(tiny_model)
    assert summary["recipe"]["optim"]["max_steps"] == 2 and summary["records"] == 20
    assert changed(weights(tiny_model), weights(tmp_path / "cont")) > 0
    with pytest.raises(BadInput, match="no finished training run"):
        run_steps(tmp_path / "nothing")


def test_no_kept_sample_is_one_line_and_trains_nothing(arith_dir, tiny_model, tmp_path):
    from posttrainlab.train.rft import train_rft

    class AlwaysWrong:
        name = "wrong"

        def generate(self, prompts, *, n=1, **_):
            return [["Answer: -1"] * n for _ in prompts]

    out = tmp_path / "rft"
    with pytest.raises(BadInput, match=r"rft: no sample kept from 4 prompts x 3 \(0 correct"):
        train_rft(rft_recipe(tiny_model, arith_dir, out), backend=AlwaysWrong())
    assert not (out / "train_summary.json").exists()


def test_the_cli_verb_prints_its_recipe_and_refuses_bad_values(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "train", "rft", "--config", "configs/arith/rft.yaml", "--print-config",
                         "rejection.filter=process", "rounds=2")  # fmt: skip
    assert code == 0, err
    assert out.startswith("kind: rft\n") and "filter: process" in out and "rounds: 2" in out
    code, _, err = cli(capsys, "train", "rft", "--config", "configs/arith/rft.yaml", "rejection.filter=steps")
    assert code == 2 and "rejection.filter='steps': choose one of answer, process" in err
    code, _, err = cli(capsys, "train", "rft", "--config", "configs/arith/grpo.yaml", "--print-config")
    assert code == 2 and "kind 'grpo'" in err
    assert list(tmp_path.iterdir()) == []


def test_load_records_of_the_shipped_recipe(arith_dir):
    recipe = load_config(RFTRecipe, CONFIG, [f"dataset.path={arith_dir}", f"sft_data.path={arith_dir}"])
    assert (recipe.dataset.split, recipe.sft_data.split, recipe.rejection.filter) == ("rl_train", "sft_train_3k",
                                                                                     "answer")  # fmt: skip
    assert len(load_records(recipe.dataset)) == 500 and "response" in load_records(recipe.sft_data)[0]
