"""Best-of-N: selectors and tie rules on hand-made samples, accuracy with Wilson intervals, the run and its cache."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.best_of_n import (
    SELECTORS,
    Candidates,
    aggregate,
    argmax_first,
    best_of_n_metrics,
    parse_ns,
    select,
    vote,
)
from posttrainlab.eval.intervals import wilson_interval
from posttrainlab.runners.best_of_n import run
from posttrainlab.runners.settings import BestOfNSettings
from prm_eval_fakes import FakeBackend, OracleScorer, RefusingBackend

POSTTRAIN = [sys.executable, "-m", "posttrainlab"]


def test_aggregations_by_hand():
    s = [0.8, 0.5, 1.0]
    assert aggregate(s, "min") == 0.5 and aggregate(s, "last") == 1.0
    assert aggregate(s, "product") == pytest.approx(0.4) and aggregate(s, "mean") == pytest.approx(2.3 / 3)
    assert [aggregate([], a) for a in ("min", "last", "product", "mean")] == [0.0] * 4
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(s, "max")


def test_ties_go_to_the_lowest_index():
    assert argmax_first([0.3, 0.9, 0.9]) == 1
    assert argmax_first([0.5, 0.5]) == 0


def test_votes_and_their_ties():
    # 7 has 3 votes; 5 has 2
    assert vote([5, 7, 7, 5, 7]) == 1
    # 5 and 7 tie at 2: 5 appears first, its first sample is 1
    assert vote([None, 5, 7, 7, 5]) == 1
    # weights: 5 -> 0.2 + 0.2 = 0.4, 7 -> 0.9: one confident sample beats two weak ones
    assert vote([5, 5, 7], [0.2, 0.2, 0.9]) == 2
    # exactly equal weights: the answer seen first
    assert vote([7, 5], [0.5, 0.5]) == 0
    assert vote([None, None]) is None


# Four samples of one problem (answer 10): scores chosen so that every aggregation picks differently.
#   sample  answer  correct  steps                min   last  product  mean
#   0       12      no       [0.9, 0.9, 0.3]      0.3   0.3   0.243    0.7
#   1       10      yes      [0.6, 0.6, 0.6]      0.6   0.6   0.216    0.6
#   2       12      no       [0.95, 0.2, 0.99]    0.2   0.99  0.1881   0.7133
#   3       None    no       [0.5]                0.5   0.5   0.5      0.5
CASE = Candidates(
    correct=[False, True, False, False],
    answers=[12, 10, 12, None],
    step_scores=[[0.9, 0.9, 0.3], [0.6, 0.6, 0.6], [0.95, 0.2, 0.99], [0.5]],
)


def test_every_selector_on_a_hand_made_problem():
    got = {s: select(CASE, 4, s) for s in SELECTORS}
    assert got == {
        "prm_min": 1,  # 0.6
        "prm_last": 2,  # 0.99
        "prm_product": 3,  # 0.5 (one step)
        "prm_mean": 2,  # 0.7133
        "majority": 0,  # 12 twice (sample 3 has no answer and abstains)
        "prm_vote": 1,  # min weights: 12 -> 0.3 + 0.2 = 0.5, 10 -> 0.6
    }
    # with mean weights: 12 -> 0.7 + 0.7133 = 1.4133, 10 -> 0.6: 12 wins, its first sample is 0
    assert select(CASE, 4, "prm_vote", "mean") == 0
    # only the first n samples count
    assert select(CASE, 1, "prm_last") == 0 and select(CASE, 2, "majority") == 0  # 12 and 10 tie: 12 first
    with pytest.raises(ValueError, match="need 1 <= n <= 4"):
        select(CASE, 5, "prm_min")


def test_no_answer_selects_sample_zero():
    c = Candidates([False, False], [None, None], [[0.1], [0.9]])
    assert select(c, 2, "majority") == 0 and select(c, 2, "prm_vote") == 0 and select(c, 2, "prm_min") == 1


def test_accuracy_and_oracle_with_wilson_intervals():
    """Two problems: CASE and one where only sample 2 is correct (and the PRM likes it).

    n=1: every selector takes sample 0 -> 0/2 correct; oracle 0/2.
    n=4: prm_min picks 1 (correct) on CASE, 2 (correct) on the other -> 2/2; majority picks 0 on CASE
    (wrong) and the other's majority answer 3 (wrong) -> 0/2; oracle 2/2.
    """
    other = Candidates([False, False, True, False], [3, 3, 4, None], [[0.1], [0.2], [0.9], [0.3]])
    m = best_of_n_metrics([CASE, other], [1, 4])
    assert m["selectors"]["prm_min"]["1"]["correct"] == 0 and m["selectors"]["prm_min"]["4"]["correct"] == 2
    assert m["selectors"]["majority"]["4"]["correct"] == 0 and m["selectors"]["prm_vote"]["4"]["correct"] == 2
    assert m["oracle"]["1"]["value"] == 0.0 and m["oracle"]["4"]["value"] == 1.0
    assert m["selectors"]["prm_min"]["4"]["ci95"] == list(wilson_interval(2, 2))
    assert m["sample_accuracy"]["correct"] == 2 and m["sample_accuracy"]["n"] == 8


def test_parse_ns():
    assert parse_ns("4,1,2,2", 4) == [1, 2, 4] and parse_ns(None, 6) == [1, 2, 4, 6]
    for bad in ("0,1", "1,32", "a,b"):
        with pytest.raises(BadInput):
            parse_ns(bad, 16)


# ---- the run ----------------------------------------------------------------------------------------


def test_run_with_fakes_and_the_sample_cache(arith_dir, tmp_path):
    """FakeBackend: sample j % 4 = reference, first step off, no answer, wrong answer line.

    Every problem has exactly one correct sample among the first 4 (index 0). n=1: everything picks
    sample 0. The oracle PRM scores right steps 0.9 and wrong ones 0.1, so every PRM selector picks
    sample 0 at every n. Votes: answers A, A+1, (none), A+10 -> one vote each -> A, seen first.
    """
    out = tmp_path / "bon"
    backend = FakeBackend()
    b = run(
        "fake-policy",
        "fake-prm",
        arith_dir,
        out,
        BestOfNSettings(n=4, ns=[1, 2, 4], limit=5),
        backend=backend,
        scorer=OracleScorer(),
        progress=False,
    )
    assert b["problems"] == 5 and b["split"] == "test" and b["ns"] == [1, 2, 4]
    for name in SELECTORS:
        assert [b["selectors"][name][n]["value"] for n in ("1", "2", "4")] == [1.0, 1.0, 1.0], name
    assert b["sample_accuracy"]["value"] == 0.25 and b["vote_aggregation"] == "min"
    assert backend.calls == [{"prompts": 5, "n": 4, "temperature": 0.8, "seed": 0}]
    rows = read_jsonl(out / "samples.jsonl")
    assert [r["id"] for r in rows] == [f"test-{i:04d}" for i in range(5)]
    assert [s["outcome"] for s in rows[0]["samples"]] == ["correct", "wrong_answer", "missing_answer", "wrong_answer"]
    scores = read_jsonl(out / "scores.jsonl")
    assert scores[0]["samples"][0]["min"] == 0.9 and scores[0]["selected"]["prm_min"] == {"1": 0, "2": 0, "4": 0}
    assert (out / "best_of_n.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "bon.json").read_text())["sampling"]["reused_cache"] is False

    # same settings: the samples are reused, the backend is never called
    again = run(
        "fake-policy",
        "fake-prm",
        arith_dir,
        out,
        BestOfNSettings(n=4, ns=[1, 2, 4], limit=5),
        backend=RefusingBackend(),
        scorer=OracleScorer(),
        progress=False,
    )
    assert again["sampling"]["reused_cache"] is True and again["selectors"] == b["selectors"]
    # another seed: sampled again
    backend2 = FakeBackend()
    run(
        "fake-policy",
        "fake-prm",
        arith_dir,
        out,
        BestOfNSettings(n=4, ns=[1, 2, 4], limit=5, seed=1),
        backend=backend2,
        scorer=OracleScorer(),
        progress=False,
    )
    assert len(backend2.calls) == 1


def test_run_bad_input(arith_dir, tmp_path):
    with pytest.raises(BadInput, match="no such model folder"):
        run(tmp_path / "nowhere", "p", arith_dir, tmp_path / "o", scorer=OracleScorer())
    with pytest.raises(BadInput, match="no such model folder"):
        run("p", tmp_path / "nowhere", arith_dir, tmp_path / "o", backend=FakeBackend())
    with pytest.raises(BadInput, match="temperature"):
        run(
            "p",
            "q",
            arith_dir,
            tmp_path / "o",
            BestOfNSettings(temperature=0),
            backend=FakeBackend(),
            scorer=OracleScorer(),
        )
    with pytest.raises(BadInput, match="between 1 and"):
        run(
            "p",
            "q",
            arith_dir,
            tmp_path / "o",
            BestOfNSettings(n=4, ns=[1, 8]),
            backend=FakeBackend(),
            scorer=OracleScorer(),
        )
    with pytest.raises(BadInput, match="unknown split"):
        run("p", "q", f"{arith_dir}:nosuch", tmp_path / "o", backend=FakeBackend(), scorer=OracleScorer())
    assert not (tmp_path / "o").exists()


def test_cli_missing_prm_is_one_line_exit_2(arith_dir, tiny_policy, tmp_path):
    r = subprocess.run(
        [
            *POSTTRAIN,
            "eval",
            "best-of-n",
            "--policy",
            str(tiny_policy),
            "--prm",
            str(tmp_path / "nowhere"),
            "--data",
            str(arith_dir),
            "--out",
            str(tmp_path / "o"),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ") and "nowhere: no such model folder" in lines[0]


def test_cli_with_a_real_tiny_policy_and_prm(arith_dir, tiny_policy, tiny_prm, tmp_path):
    """In process: 3 problems, 2 samples of at most 8 tokens, an untrained PRM. Shapes, not quality."""
    from typer.testing import CliRunner

    from posttrainlab.cli import app

    out = tmp_path / "bon"
    args = ["eval", "best-of-n", "--policy", str(tiny_policy), "--prm", str(tiny_prm), "--data", str(arith_dir),
            "--out", str(out), "--n", "2", "--ns", "1,2", "--limit", "3", "--max-new-tokens", "8",
            "--no-progress", "--device", "cpu"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    b = json.loads((out / "bon.json").read_text())
    assert b["problems"] == 3 and set(b["selectors"]) == set(SELECTORS) and set(b["oracle"]) == {"1", "2"}
    assert all(len(r["samples"]) == 2 for r in read_jsonl(out / "samples.jsonl"))
    from posttrainlab.data.arith.prm_data import question_of
    from posttrainlab.prm import PRM

    prm = PRM.from_pretrained(tiny_prm)  # the scores are the PRM's own, one solution at a time
    prompts = {r["id"]: r["prompt"] for r in read_jsonl(out / "samples.jsonl")}
    for row in read_jsonl(out / "scores.jsonl"):
        for s in row["samples"]:
            expected = prm.score(question_of(prompts[row["id"]]), s["steps"]) if s["steps"] else []
            assert s["scores"] == pytest.approx(expected, abs=1e-6)


def test_a_policy_folder_as_the_prm_is_refused_before_any_sampling(arith_dir, tmp_path):
    """It used to sample every problem first, then fail loading the PRM (issue #25): now the folder's config.json
    says it is no PRM (prm.spec.check_prm_folder) before the backend is called."""
    policy = tmp_path / "sft"
    policy.mkdir()
    (policy / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"]}))
    backend = FakeBackend()
    with pytest.raises(BadInput, match=r"sft: not a PRM checkpoint \(Qwen2ForCausalLM and no prm_config.json"):
        run(
            "fake-policy",
            policy,
            arith_dir,
            tmp_path / "o",
            BestOfNSettings(n=4, limit=5),
            backend=backend,
            progress=False,
        )
    assert backend.calls == [] and not (tmp_path / "o").exists()
    (tmp_path / "notes.txt").write_text("mine")  # a file in the output path: refused before the sampling too
    with pytest.raises(BadInput, match=r"notes.txt is a file, not a folder"):
        run("fake-policy", "q", arith_dir, tmp_path / "notes.txt" / "o", backend=backend, scorer=OracleScorer())
    assert backend.calls == []


def test_a_backends_sample_cache_is_not_reused_once_the_policy_folder_changes(arith_dir, tmp_path):
    """The cache key held only the backend's name when a backend was given (vllm-server, ray), so samples of the
    old weights were reused after the policy folder was retrained; it now holds the weights' stamp as well."""
    policy, out = tmp_path / "policy", tmp_path / "bon"
    policy.mkdir()
    (policy / "model.safetensors").write_bytes(b"old weights")
    settings = BestOfNSettings(n=2, ns=[1, 2], limit=2)
    run(policy, "fake-prm", arith_dir, out, settings, backend=FakeBackend(), scorer=OracleScorer(), progress=False)
    again = run(policy, "fake-prm", arith_dir, out, settings, backend=RefusingBackend(), scorer=OracleScorer(),
                progress=False)  # fmt: skip
    assert again["sampling"]["reused_cache"] is True
    assert json.loads((out / "sampling.json").read_text())["backend"] == "fake"
    (policy / "model.safetensors").write_bytes(b"new weights, retrained")
    backend = FakeBackend()
    b = run(policy, "fake-prm", arith_dir, out, settings, backend=backend, scorer=OracleScorer(), progress=False)
    assert b["sampling"]["reused_cache"] is False and len(backend.calls) == 1
