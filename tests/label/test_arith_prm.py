"""arith-prm: exact labels on known solutions, both views row-aligned, splits disjoint, deterministic, the CLI.

The policy is ``FakeBackend`` (conftest): sample j of every prompt is, by ``j % 4``, the reference
solution, a solution whose first step is off by one, one without the answer line, and one with a wrong
answer line, so every label below is known before the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.data.arith.prm_data import SplitBuilder, label_solution, problem_keys, question_of, split_stats
from posttrainlab.data.arith.steps import parse_question
from posttrainlab.data.formats import FORMATS
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.label.arith_prm import ArithPRMBuild, build
from prm_eval_fakes import KINDS, FakeBackend

POSTTRAIN = [sys.executable, "-m", "posttrainlab"]
LIMIT, K = 4, 4


# ---- labelling rules on hand-made solutions -------------------------------------------------------


@pytest.mark.parametrize(
    "solution, steps, labels, num_steps",
    [
        (
            "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259",
            ["351 - 148 = 203", "203 + 56 = 259", "Answer: 259"],
            [1, 1, 1],
            3,
        ),
        # a slip at step 1: that step gets the 0, the answer line after it is dropped
        ("351 - 148 = 203\n203 + 56 = 260\nAnswer: 260", ["351 - 148 = 203", "203 + 56 = 260"], [1, 0], 3),
        # a true equation with the wrong operands is a wrong step
        ("351 - 148 = 203\n203 + 57 = 260\nAnswer: 260", ["351 - 148 = 203", "203 + 57 = 260"], [1, 0], 3),
        # all claims right, no answer line: the last step gets the 0
        ("351 - 148 = 203\n203 + 56 = 259", ["351 - 148 = 203", "203 + 56 = 259"], [1, 0], 2),
        # right steps, wrong answer line
        (
            "351 - 148 = 203\n203 + 56 = 259\nAnswer: 258",
            ["351 - 148 = 203", "203 + 56 = 259", "Answer: 258"],
            [1, 1, 0],
            3,
        ),
        # the answer alone is not a false claim
        ("Answer: 259", ["Answer: 259"], [1], 1),
        # prose is a wrong step; blank lines are not steps
        ("\n351 - 148 = 203\n\nso the answer is 259", ["351 - 148 = 203", "so the answer is 259"], [1, 0], 2),
    ],
)
def test_label_solution_by_hand(solution, steps, labels, num_steps):
    got = label_solution("What is 351 - 148 + 56?", solution)
    assert (got.steps, got.labels, got.num_steps) == (steps, labels, num_steps)
    assert got.first_error == (labels.index(0) if 0 in labels else -1)


def test_label_solution_refuses_a_foreign_question_and_drops_empty():
    with pytest.raises(ValueError, match="not an arith-v1 question"):
        label_solution("What is the capital of France?", "Paris")
    assert label_solution("What is 2 + 3?", "\n \n") is None


def test_split_stats_by_hand():
    """6 solutions to 'What is 6 * 3 - 15?': 1 correct; errors at steps 0, 1, 1 (missing answer), 0 (right
    answer through a wrong first step: the grader says correct, the process is wrong); 1 empty."""
    record = {"id": "x-0", "category": "multi_step", "prompt": "Solve.\n\nWhat is 6 * 3 - 15?", "answer": 3}
    b = SplitBuilder("x")
    for text in ("6 * 3 = 18\n18 - 15 = 3\nAnswer: 3", "6 * 3 = 19\n19 - 15 = 4\nAnswer: 4",
                 "6 * 3 = 18\n18 - 15 = 2\nAnswer: 2", "6 * 3 = 18\n18 - 15 = 3", "",
                 "6 * 3 = 19\n19 - 16 = 3\nAnswer: 3"):  # fmt: skip
        b.add(record, text, source="policy")
    s = split_stats(b)
    assert s["rows"] == 5 and s["all_correct"] == 1 and s["all_correct_share"] == 0.2
    assert s["first_error_histogram"] == {"0": 2, "1": 2}
    assert s["steps"] == 3 + 1 + 2 + 2 + 1 and s["wrong_steps"] == 4
    assert s["dropped_empty"] == 1 and s["right_answer_wrong_steps"] == 1 and s["grader_disagreements"] == 0
    assert s["policy_outcomes"] == {"correct": 2, "missing_answer": 1, "wrong_answer": 2}
    assert b.rows[-1]["step_labels"] == [0] and b.rows[-1]["outcome"] == "correct"


# ---- a whole build with the fake policy --------------------------------------------------------------


@pytest.fixture(scope="module")
def built(arith_dir, tmp_path_factory) -> tuple[Path, dict, FakeBackend]:
    backend = FakeBackend()
    out = tmp_path_factory.mktemp("aprm") / "arith-prm"
    manifest = build("fake-policy", arith_dir, out, ArithPRMBuild(k=K, limit=LIMIT, seed=3), backend=backend)
    return out, manifest, backend


def expected_labels(question: str, kind: str) -> list[int]:
    steps = len(parse_question(question).lines())
    return {
        "reference": [1] * (steps + 1),
        "first_step_off": [0],
        "missing_answer": [1] * (steps - 1) + [0],
        "wrong_answer_line": [1] * steps + [0],
    }[kind]


def test_policy_rows_have_the_exact_labels(built):
    out, _, backend = built
    rows = read_jsonl(out / "step" / "train.jsonl")
    policy = [r for r in rows if r["source"] == "policy"]
    assert len(policy) == LIMIT * K
    for r in policy:
        assert r["step_labels"] == expected_labels(r["question"], KINDS[r["sample_index"] % 4]), r
        assert r["id"].startswith("rl_train-") and r["corruption"] is None
        assert (r["outcome"] == "correct") == (0 not in r["step_labels"])
    assert {c["temperature"] for c in backend.calls} == {1.0} and {c["n"] for c in backend.calls} == {K}
    assert {c["seed"] for c in backend.calls} == {3}


def test_each_sampling_call_names_its_split_on_the_progress_bar(arith_dir, tmp_path):
    """Not "generating" three times (issue #17): the backend's bar is labelled by ``progress.task_label``."""
    from posttrainlab.progress import progress_bar

    labels: list[str] = []

    class Labelled(FakeBackend):
        def generate(self, prompts, **kwargs):
            with progress_bar(False) as bar:  # what TransformersBackend does
                task = bar.add_task("generating", total=len(prompts))
                labels.append(bar.tasks[task].description)
            return super().generate(prompts, **kwargs)

    build("fake-policy", arith_dir, tmp_path / "o", ArithPRMBuild(k=2, limit=2), backend=Labelled())
    assert labels == ["sampling rl_train (k=2)", "sampling dev (k=2)", "sampling validation (k=2)"]


def test_sources_splits_and_counts(built, arith_dir):
    out, manifest, _ = built
    step = {s: read_jsonl(out / "step" / f"{s}.jsonl") for s in ("train", "heldout", "preference_test")}
    # train: K samples of LIMIT rl_train prompts, then LIMIT preference_train pairs (chosen, rejected)
    assert [r["source"] for r in step["train"]] == ["policy"] * LIMIT * K + ["reference", "corruption"] * LIMIT
    # heldout: dev then validation samples, then reference + corruption of the same prompts
    held = step["heldout"]
    assert len(held) == 2 * LIMIT * K + 2 * 2 * LIMIT
    assert {r["id"].split("-")[0] for r in held} == {"dev", "validation"}
    assert [r["source"] for r in held[2 * LIMIT * K :]] == ["reference", "corruption"] * 2 * LIMIT
    assert all(r["corruption"] in ("arithmetic_slip", "operand_error", "inconsistent_answer", "missing_answer")
               for r in held if r["source"] == "corruption")  # fmt: skip
    assert {r["id"].split("-")[0] for r in step["preference_test"]} == {"preference_test"}
    # references are all correct, corruptions never are
    for rows in step.values():
        for r in rows:
            if r["source"] == "reference":
                assert 0 not in r["step_labels"] and r["outcome"] == "correct"
            if r["source"] == "corruption":
                assert r["step_labels"][-1] == 0 and r["outcome"] != "correct"
    # train and held-out share no problem, and neither holds an arith-v1 test problem
    test_keys = problem_keys(
        {"question": question_of(r["prompt"])} for r in read_jsonl(arith_dir / "eval" / "test.jsonl")
    )
    assert not problem_keys(step["train"]) & problem_keys(held)
    assert not (problem_keys(step["train"]) | problem_keys(held)) & test_keys
    assert problem_keys(step["preference_test"]) <= test_keys
    for s in manifest["stats"].values():
        assert s["grader_disagreements"] == 0 and s["dropped_empty"] == 0 and s["right_answer_wrong_steps"] == 0
    assert manifest["stats"]["train"]["by_source"]["policy"]["all_correct_share"] == 0.25


def test_reference_splits_add_each_reference_and_one_corruption_to_train(arith_dir, tmp_path):
    """``reference_splits``: exact labels without sampling, after the policy rows and the preference pairs."""
    base = build("fake-policy", arith_dir, tmp_path / "a", ArithPRMBuild(k=2, limit=2), backend=FakeBackend())
    more = build(
        "fake-policy",
        arith_dir,
        tmp_path / "b",
        ArithPRMBuild(k=2, limit=2, reference_splits=("sft_train_3k",), reference_limit=3),
        backend=FakeBackend(),
    )
    rows = read_jsonl(tmp_path / "b" / "step" / "train.jsonl")
    assert len(rows) == base["stats"]["train"]["rows"] + 6
    added = rows[-6:]
    assert [r["source"] for r in added] == ["reference", "corruption"] * 3
    assert [r["id"] for r in added] == [f"sft_train-000{i // 2}" for i in range(6)]
    assert all(0 not in r["step_labels"] for r in added[::2]) and all(r["step_labels"][-1] == 0 for r in added[1::2])
    assert more["splits"]["train"]["references"] == {"sft_train_3k": 3}
    with pytest.raises(BadInput, match="test"):
        build(
            "fake-policy",
            arith_dir,
            tmp_path / "c",
            ArithPRMBuild(k=2, limit=2, reference_splits=("test",)),
            backend=FakeBackend(),
        )


def test_views_are_row_aligned_and_valid(built):
    out, _, _ = built
    for split in ("train", "heldout", "preference_test"):
        step = read_jsonl(out / "step" / f"{split}.jsonl")
        ms = read_jsonl(out / "math_shepherd" / f"{split}.jsonl")
        assert len(step) == len(ms) > 0
        for s, m in zip(step, ms, strict=True):
            assert list(m) == ["prompt", "completions", "labels"]
            assert (m["prompt"], m["completions"]) == (s["question"], s["steps"])
            assert m["labels"] == [x == 1 for x in s["step_labels"]]
        assert list(FORMATS["step"].validate(step)) == []
        assert list(FORMATS["math-shepherd"].validate(ms)) == []
    from posttrainlab.data.manifest import verify_dir

    assert verify_dir(out) == []
    stats = json.loads((out / "stats.json").read_text())
    assert stats["train"]["rows"] == LIMIT * K + 2 * LIMIT


def test_deterministic_and_replaces_its_own_build(built, arith_dir, tmp_path):
    out, _, _ = built
    again = tmp_path / "again"
    build("fake-policy", arith_dir, again, ArithPRMBuild(k=K, limit=LIMIT, seed=3), backend=FakeBackend())
    for rel in ("step/train.jsonl", "step/heldout.jsonl", "math_shepherd/heldout.jsonl", "stats.json"):
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), rel
    build(
        "fake-policy", arith_dir, again, ArithPRMBuild(k=1, limit=1, seed=3), backend=FakeBackend()
    )  # an earlier build
    assert len(read_jsonl(again / "step" / "train.jsonl")) == 1 + 2


def test_bad_input(arith_dir, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("keep me")
    with pytest.raises(BadInput, match="holds other files"):
        build("p", arith_dir, tmp_path / "full", backend=FakeBackend())
    with pytest.raises(BadInput, match="never samples arith-v1 test"):
        build("p", arith_dir, tmp_path / "o", ArithPRMBuild(heldout_prompts=("test",)), backend=FakeBackend())
    with pytest.raises(BadInput, match="temperature"):
        build("p", arith_dir, tmp_path / "o", ArithPRMBuild(temperature=0), backend=FakeBackend())
    with pytest.raises(BadInput, match="train_prompts: 'nope' is no arith-v1 split"):
        build("p", arith_dir, tmp_path / "o", ArithPRMBuild(train_prompts=("nope",)), backend=FakeBackend())
    with pytest.raises(BadInput, match="no such model folder"):
        build(tmp_path / "nowhere", arith_dir, tmp_path / "o")
    assert (tmp_path / "full" / "x.txt").read_text() == "keep me" and not (tmp_path / "o").exists()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*POSTTRAIN, *args], capture_output=True, text=True, timeout=300)


def test_cli_missing_policy_is_one_line_exit_2(arith_dir, tmp_path):
    r = run_cli("data", "arith-prm", "--policy", str(tmp_path / "nowhere"), "--data", str(arith_dir),
                "--out", str(tmp_path / "o"))  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ") and "no such model folder" in lines[0]


def test_cli_validate_accepts_the_step_view(built):
    out, _, _ = built
    r = run_cli("data", "validate", "--format", "step", str(out / "step" / "heldout.jsonl"))
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_cli_builds_with_a_real_tiny_policy(arith_dir, tiny_policy, tmp_path):
    """The verb in process on a random tiny policy (1 problem per split, k=2, 8 new tokens); deterministic."""
    from typer.testing import CliRunner

    from posttrainlab.cli import app

    out = tmp_path / "aprm"
    args = ["data", "arith-prm", "--policy", str(tiny_policy), "--data", str(arith_dir), "--out", str(out),
            "--k", "2", "--limit", "1", "--max-new-tokens", "8", "--no-progress"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "label/grader disagreements: 0" in " ".join(r.output.split())
    rows = read_jsonl(out / "step" / "train.jsonl")
    assert [r["source"] for r in rows][-2:] == ["reference", "corruption"]
    stats = json.loads((out / "stats.json").read_text())["train"]
    assert len([r for r in rows if r["source"] == "policy"]) + stats["dropped_empty"] == 2
    assert list(FORMATS["step"].validate(rows)) == []
    # the same policy, seed and settings give the same bytes
    again = tmp_path / "again"
    build(tiny_policy, arith_dir, again, ArithPRMBuild(k=2, limit=1, max_new_tokens=8), progress=False)
    for rel in ("step/train.jsonl", "step/heldout.jsonl", "math_shepherd/train.jsonl"):
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), rel
