"""Policy evaluation: metrics with hand-checked numbers, preference accuracy, a real run, bad input, the CLI verb.

The hand-checked tests use a fake backend that returns fixed responses, and a stub scorer that
returns fixed log-probabilities, so every count, share and interval is known in advance. The real
runs use a tiny random model (2 layers, hidden 64) on 20 arith-v1 test problems.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from posttrainlab.cli.evaluate import eval_app
from posttrainlab.errors import BadInput
from posttrainlab.eval.intervals import pass_at_k, wilson_interval
from posttrainlab.eval.policy import preference_margins, preference_metrics
from posttrainlab.runners.policy import evaluate_policy, sequence_logprobs
from posttrainlab.runners.settings import PolicyEvalSettings
from tiny_models import one_torch_thread

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
}

# (id, category, answer, greedy response, expected outcome, correct samples out of 3)
# File order puts word_problem before multi_step; metrics must list categories in arith-v1's order.
PROBLEMS = [
    ("p1", "addition", 5, "2 + 3 = 5\nAnswer: 5", "correct", 1),
    ("p2", "addition", 7, "3 + 4 = 8\nAnswer: 8", "wrong_answer", 0),
    ("p3", "subtraction", 1, "Answer: 1", "correct", 2),
    ("p4", "subtraction", 2, "5 - 3 = 2", "missing_answer", 3),
    ("p5", "multiplication", 6, "answer: 6", "malformed", 0),
    ("p6", "word_problem", 10, "Answer: 10\nthanks", "malformed", 0),
    ("p7", "multi_step", 3, "Answer: 3", "correct", 1),
    ("p8", "addition", 4, "Answer: 4", "correct", 1),
]


class FakeBackend:
    """Greedy: the fixed response. Sampled (n=3): ``correct`` right answers, then wrong ones."""

    name = "fake"

    def __init__(self):
        self.calls = []
        self.by_prompt = {f"question {pid}": (answer, response, good) for pid, _, answer, response, _, good in PROBLEMS}

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        self.calls.append({"n": n, "temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens})
        out = []
        for messages in prompts:
            assert messages[0]["role"] == "user"
            answer, response, good = self.by_prompt[messages[0]["content"]]
            if n == 1 and temperature == 0:
                out.append([response])
            else:
                out.append([f"Answer: {answer}"] * good + [f"Answer: {answer + 1}"] * (n - good))
        return out


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: a 64-wide model gains nothing from more, and on a shared 2-core machine
    OpenMP threads spinning against another job made these tests ~3x slower."""
    with one_torch_thread():
        yield


@pytest.fixture()
def handmade(tmp_path) -> Path:
    path = tmp_path / "handmade.jsonl"
    rows = [{"id": pid, "category": cat, "prompt": f"question {pid}", "answer": ans} for pid, cat, ans, *_ in PROBLEMS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def arith(arith_dir) -> Path:
    """The session's arith-v1 build (tests/conftest.py)."""
    return arith_dir


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    return init_model(TinyModelConfig(**TINY), tmp_path_factory.mktemp("models") / "tiny")


def test_metrics_by_hand(handmade, tmp_path):
    """8 problems: 4 correct, 1 wrong_answer, 1 missing_answer, 2 malformed; 5 well formatted.

    accuracy 4/8 = 0.5, Wilson [0.2152162, 0.7847838] (tests/eval/test_intervals.py);
    addition 2/3, subtraction 1/2, multiplication 0/1, multi_step 1/1, word_problem 0/1.
    """
    backend = FakeBackend()
    out = tmp_path / "eval"
    metrics = evaluate_policy(
        "fake-model", str(handmade), out, PolicyEvalSettings(preference_split=None), backend=backend
    )
    assert metrics["split"] == "handmade" and metrics["n"] == 8
    assert metrics["accuracy"]["value"] == 0.5 and metrics["accuracy"]["correct"] == 4
    assert metrics["accuracy"]["ci95"] == [pytest.approx(0.2152162, abs=1e-6), pytest.approx(0.7847838, abs=1e-6)]
    per = metrics["per_category"]
    assert list(per) == ["addition", "subtraction", "multiplication", "multi_step", "word_problem"]
    assert {c: (v["correct"], v["n"]) for c, v in per.items()} == {
        "addition": (2, 3),
        "subtraction": (1, 2),
        "multiplication": (0, 1),
        "multi_step": (1, 1),
        "word_problem": (0, 1),
    }
    assert per["addition"]["value"] == pytest.approx(2 / 3)
    assert per["addition"]["ci95"] == list(wilson_interval(2, 3))
    assert metrics["outcomes"] == {"correct": 4, "wrong_answer": 1, "missing_answer": 1, "malformed": 2}
    assert metrics["outcome_shares"] == {
        "correct": 0.5,
        "wrong_answer": 0.125,
        "missing_answer": 0.125,
        "malformed": 0.25,
    }
    assert metrics["format_rate"] == 5 / 8
    assert "pass_at_k" not in metrics and "preference" not in metrics
    assert metrics["generation"]["backend"] == "fake" and metrics["generation"]["greedy"] is True
    assert backend.calls == [{"n": 1, "temperature": 0.0, "seed": 0, "max_new_tokens": 64}]

    assert json.loads((out / "metrics.json").read_text()) == metrics
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [p[0] for p in PROBLEMS]
    assert [r["outcome"] for r in rows] == [p[4] for p in PROBLEMS]
    assert rows[1] == {
        "id": "p2",
        "category": "addition",
        "prompt": "question p2",
        "answer": 7,
        "response": "3 + 4 = 8\nAnswer: 8",
        "correct": False,
        "outcome": "wrong_answer",
        "parsed": 8,
    }


def test_pass_at_k_by_hand(handmade, tmp_path):
    """k=2 from 3 samples: c=1 gives 1 - C(2,2)/C(3,2) = 2/3, c>=2 gives 1, c=0 gives 0.

    c per problem = 1,0,2,3,0,0,1,1, so pass@2 = (2/3 + 0 + 1 + 1 + 0 + 0 + 2/3 + 2/3) / 8 = 4/8;
    addition (2/3 + 0 + 2/3)/3 = 4/9, subtraction 1, multiplication 0, multi_step 2/3, word_problem 0.
    """
    backend = FakeBackend()
    metrics = evaluate_policy(
        "fake-model",
        str(handmade),
        tmp_path,
        PolicyEvalSettings(preference_split=None, k=2, samples=3, seed=7),
        backend=backend,
    )
    pk = metrics["pass_at_k"]
    assert (pk["k"], pk["n_samples"], pk["temperature"]) == (2, 3, 1.0)
    assert pk["value"] == pytest.approx(0.5)
    assert pk["per_category"] == pytest.approx(
        {"addition": 4 / 9, "subtraction": 1.0, "multiplication": 0.0, "multi_step": 2 / 3, "word_problem": 0.0}
    )
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    assert metrics["accuracy"]["correct"] == 4  # accuracy still comes from the greedy pass
    assert backend.calls[1] == {"n": 3, "temperature": 1.0, "seed": 7, "max_new_tokens": 64}
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [r["n_correct"] for r in rows] == [p[5] for p in PROBLEMS]
    assert len(rows[0]["samples"]) == 3 and set(rows[0]["samples"][0]) == {"response", "correct", "outcome", "parsed"}


# Four handmade pairs and stub log-probabilities keyed by completion.
PAIRS = [
    {"prompt": "q1", "chosen": "c1", "rejected": "r1", "corruption": "arithmetic_slip"},
    {"prompt": "q2", "chosen": "c2", "rejected": "r2", "corruption": "arithmetic_slip"},
    {"prompt": "q3", "chosen": "c3", "rejected": "r3", "corruption": "missing_answer"},
    {"prompt": "q4", "chosen": "c4", "rejected": "r4", "corruption": "operand_error"},
]
POLICY_LOGP = {"c1": -5, "r1": -7, "c2": -9, "r2": -4, "c3": -3, "r3": -3, "c4": -2, "r4": -6}
REF_LOGP = {"c1": -4, "r1": -8, "c2": -10, "r2": -3, "c3": -3, "r3": -4, "c4": -3, "r4": -5}


def stub(table):
    def score(prompts, completions):
        assert all(p[0]["role"] == "user" for p in prompts)
        return [float(table[c]) for c in completions]

    return score


def test_preference_logprob_margin_by_hand():
    """Margins log pi(c) - log pi(r) = 2, -5, 0, 4: pairs 1 and 4 win, the tie (pair 3) is a miss."""
    margins = preference_margins(PAIRS, stub(POLICY_LOGP))
    assert margins == [2.0, -5.0, 0.0, 4.0]
    m = preference_metrics(PAIRS, margins, "logprob_margin")
    assert m["method"] == "logprob_margin"
    assert (m["accuracy"]["correct"], m["accuracy"]["n"], m["accuracy"]["value"]) == (2, 4, 0.5)
    assert list(m["per_corruption"]) == ["arithmetic_slip", "operand_error", "missing_answer"]  # arith-v1 order
    assert {k: (v["correct"], v["n"]) for k, v in m["per_corruption"].items()} == {
        "arithmetic_slip": (1, 2),
        "operand_error": (1, 1),
        "missing_answer": (0, 1),
    }
    assert m["mean_margin"] == pytest.approx(0.25)


def test_preference_implicit_reward_by_hand():
    """beta = 0.1; reference margins 4, -7, 1, 2; implicit = 0.1 * (policy - ref) = -0.2, 0.2, -0.1, 0.2."""
    margins = preference_margins(PAIRS, stub(POLICY_LOGP), stub(REF_LOGP), beta=0.1)
    assert margins == pytest.approx([-0.2, 0.2, -0.1, 0.2])
    m = preference_metrics(PAIRS, margins, "implicit_reward")
    assert m["accuracy"]["correct"] == 2
    assert {k: v["correct"] for k, v in m["per_corruption"].items()} == {
        "arithmetic_slip": 1,
        "operand_error": 1,
        "missing_answer": 0,
    }


def test_preference_wiring_with_stub_scorer(arith, tmp_path):
    """Through evaluate_policy: shorter completions score higher, so the stub prefers the shorter one."""

    def by_length(prompts, completions):
        return [-float(len(c)) for c in completions]

    class Echo:
        def generate(self, prompts, **kw):
            return [["Answer: 0"] for _ in prompts]

    metrics = evaluate_policy(
        "stub", str(arith), tmp_path, PolicyEvalSettings(limit=20), backend=Echo(), scorer=by_length
    )
    from posttrainlab.data.loading import load_split

    pairs = load_split(str(arith), split="preference_test", limit=20)
    expected = sum(len(p["chosen"]) < len(p["rejected"]) for p in pairs)
    pref = metrics["preference"]
    assert pref["split"] == "preference_test" and pref["method"] == "logprob_margin"
    assert (pref["accuracy"]["correct"], pref["accuracy"]["n"]) == (expected, 20)
    assert sum(v["n"] for v in pref["per_corruption"].values()) == 20


def test_sequence_logprobs_batched_matches_single_and_a_full_forward(arith):
    import torch

    from posttrainlab.data.loading import load_split
    from posttrainlab.generation.transformers_backend import encode_prompt
    from posttrainlab.models.tiny import TinyModelConfig, build_model

    model, tok = build_model(TinyModelConfig(**TINY))
    pairs = load_split(str(arith), split="preference_test", limit=7)
    prompts = [[{"role": "user", "content": p["prompt"]}] for p in pairs]
    completions = [p["chosen"] for p in pairs]
    batched = sequence_logprobs(model, tok, prompts, completions, batch_size=3)
    single = sequence_logprobs(model, tok, prompts, completions, batch_size=1)
    assert batched == pytest.approx(single, abs=1e-3)
    # Completion tokens and the eos only, each scored by the logits one position earlier.
    p_ids = encode_prompt(tok, prompts[0])
    c_ids = tok(completions[0], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logp = model(input_ids=torch.tensor([p_ids + c_ids])).logits.log_softmax(-1)[0]
    manual = sum(logp[len(p_ids) + t - 1, c_ids[t]].item() for t in range(len(c_ids)))
    assert batched[0] == pytest.approx(manual, abs=1e-3)


def test_end_to_end_on_tiny_model(arith, tiny, tmp_path):
    """A real run writes valid files; with the policy as its own reference every implicit margin is 0 (a miss)."""
    out = tmp_path / "eval"
    metrics = evaluate_policy(
        tiny,
        f"{arith}:test",
        out,
        PolicyEvalSettings(limit=20, max_new_tokens=12, batch_size=8),
        ref_model=tiny,
        progress=False,
    )
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk == metrics
    assert metrics["n"] == 20 and metrics["split"] == "test"
    assert sum(metrics["outcomes"].values()) == 20
    assert sum(v["n"] for v in metrics["per_category"].values()) == 20
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 20
    fields = {"id", "category", "prompt", "answer", "response", "correct", "outcome", "parsed"}
    assert set(rows[0]) == fields | {"wrong_step"}  # wrong_step: eval.trace_error (arith-v1 problems)
    # every number is the one its graded rows give, exactly
    correct = sum(r["correct"] for r in rows)
    ci95 = list(wilson_interval(correct, 20))
    assert metrics["accuracy"] == {"value": correct / 20, "ci95": ci95, "correct": correct, "n": 20}
    outcomes = [r["outcome"] for r in rows]
    assert metrics["outcomes"] == {o: outcomes.count(o) for o in metrics["outcomes"]}
    assert metrics["outcome_shares"] == {o: n / 20 for o, n in metrics["outcomes"].items()}
    assert metrics["format_rate"] == sum(o in ("correct", "wrong_answer") for o in outcomes) / 20
    pref = metrics["preference"]
    assert pref["method"] == "implicit_reward" and pref["accuracy"]["n"] == 20
    assert pref["accuracy"]["correct"] == 0 and pref["mean_margin"] == 0.0
    assert metrics["generation"]["greedy"] and metrics["generation"]["requests_per_s"] > 0


def test_sampled_run_is_deterministic_with_a_seed(arith, tiny, tmp_path):
    def run(out, seed):
        evaluate_policy(
            tiny,
            str(arith),
            out,
            PolicyEvalSettings(limit=4, k=2, max_new_tokens=6, seed=seed, preference_split=None),
            progress=False,
        )
        return [json.loads(line)["samples"] for line in (out / "samples.jsonl").read_text().splitlines()]

    first, again, other = run(tmp_path / "a", 1), run(tmp_path / "b", 1), run(tmp_path / "c", 2)
    assert first == again
    assert first != other


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"split": "nonesuch"}, "unknown split 'nonesuch'"),
        ({"limit": 0}, "limit=0"),
        ({"k": 3, "samples": 2}, "k=3, samples=2"),
        ({"temperature": -1.0}, "temperature=-1.0"),
    ],
)
def test_bad_arguments_fail_before_loading_the_model(arith, tmp_path, kwargs, message):
    with pytest.raises(BadInput, match=message):
        evaluate_policy(tmp_path / "no-model", str(arith), tmp_path / "out", PolicyEvalSettings(**kwargs))
    assert not (tmp_path / "out").exists()


def test_missing_model_folder(arith, tmp_path):
    with pytest.raises(BadInput, match="no such model folder") as info:
        evaluate_policy(tmp_path / "no-model", str(arith), tmp_path / "out", PolicyEvalSettings(limit=2))
    assert "\n" not in str(info.value)


def test_split_file_with_other_split_and_lone_file_preferences(arith, handmade, tmp_path):
    with pytest.raises(BadInput, match="is the 'test' split, but split 'dev'"):
        evaluate_policy(
            "m", str(arith / "eval" / "test.jsonl"), tmp_path, PolicyEvalSettings(split="dev"), backend=FakeBackend()
        )
    with pytest.raises(BadInput, match="lone file holds no 'preference_test' split"):
        evaluate_policy("m", str(handmade), tmp_path, backend=FakeBackend())


# ---------------------------------------------------------------------------------------------
# The CLI verb


def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    return app


def test_cli_policy_prints_table(arith, tiny, tmp_path):
    out = tmp_path / "eval"
    args = ["eval", "policy", "--model", str(tiny), "--data", str(arith), "--out", str(out)]
    args += ["--limit", "6", "--max-new-tokens", "6", "--k", "2", "--preference-split", "none", "--no-progress"]
    args += ["--threads", "1"]
    result = CliRunner().invoke(cli_app(), args)
    assert result.exit_code == 0, result.output
    flat = result.output.replace("\n", "")  # rich wraps the output path at the console's width
    for text in ("overall", "addition", "95% CI", "pass@2", "format rate", "metrics.json"):
        assert text in flat
    assert "preference" not in json.loads((out / "metrics.json").read_text())


def test_cli_bad_input_is_badinput(arith, tmp_path):
    args = ["eval", "policy", "--model", str(tmp_path / "missing"), "--data", str(arith), "--out", str(tmp_path)]
    result = CliRunner().invoke(cli_app(), args)
    assert isinstance(result.exception, BadInput) and result.exception.exit_code == 2
    assert "no such model folder" in str(result.exception)
    result = CliRunner().invoke(cli_app(), [*args, "--split", "nonesuch"])
    assert isinstance(result.exception, BadInput) and "unknown split" in str(result.exception)


def test_subprocess_exit_codes(arith, tmp_path):
    """Through the installed entry point: a broken wiring of ``posttrain eval`` fails here (it used to skip)."""
    base = [sys.executable, "-m", "posttrainlab", "eval", "policy", "--data", str(arith), "--out", str(tmp_path)]
    for extra, message in [
        (["--model", str(tmp_path / "missing")], "no such model folder"),
        (["--model", str(tmp_path / "missing"), "--split", "nonesuch"], "unknown split"),
    ]:
        proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
