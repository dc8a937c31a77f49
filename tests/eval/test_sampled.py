"""Sampled metrics (eval/sampled.py, eval/sampled_compare.py): pass@1 over K samples, maj@K with its tie rules and
the paired tests, computed by hand on made-up outcomes; ``evaluate_policy`` with samples writes them and the
per-problem outcomes; ``posttrain eval compare`` pairs two such evaluations."""

from __future__ import annotations

import json
import math

import pytest

from cli_capture import cli
from posttrainlab.errors import BadInput
from posttrainlab.eval.sampled import (
    add_votes,
    incomplete_beta,
    mean_interval,
    sampled_metrics,
    t_quantile,
    t_two_sided_p,
)
from posttrainlab.eval.sampled_compare import paired_means, paired_sampled
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.runners.compare import read_sampled, sampled_comparison
from posttrainlab.runners.policy import evaluate_policy
from posttrainlab.runners.settings import PolicyEvalSettings

T_975_4 = 2.7764451052  # Student's t, 97.5% quantile, 4 degrees of freedom (tables)

# (id, category, answer, K = 4 samples): c = 1, 2, 0, 0, 4 correct; majority 6 (wrong), 7 (tie with 8, 7 first:
# right), 2 (only required-form answers vote: wrong), none (no answer: wrong), 6 (right)
PROBLEMS = [
    ("p1", "addition", 5, ["Answer: 5", "Answer: 6", "Answer: 6", "x"]),
    ("p2", "addition", 7, ["Answer: 7", "Answer: 8", "Answer: 8", "Answer: 7"]),
    ("p3", "subtraction", 1, ["answer: 1", "answer: 1", "answer: 1", "Answer: 2"]),
    ("p4", "subtraction", 3, ["none", "none", "none", "none"]),
    ("p5", "multiplication", 6, ["Answer: 6"] * 4),
]


def rows() -> list[dict]:
    grader = ArithGrader()
    out = []
    for pid, category, answer, texts in PROBLEMS:
        grades = [grader.grade(t, answer) for t in texts]
        samples = [{"response": t, "correct": g.correct, "outcome": g.outcome, "parsed": g.parsed}
                   for t, g in zip(texts, grades, strict=True)]  # fmt: skip
        out.append({"id": pid, "category": category, "answer": answer, "samples": samples})
    return out


def test_votes_pass_at_1_and_maj_at_k_by_hand():
    rs = add_votes(rows())
    assert [(r["n_correct"], r["maj_answer"], r["maj_correct"]) for r in rs] == [
        (1, 6, False), (2, 7, True), (0, 2, False), (0, None, False), (4, 6, True)]  # fmt: skip
    m = sampled_metrics(rs, ["addition", "subtraction", "multiplication"])
    assert m["n_samples"] == 4 and m["format_rate"] == 12 / 20  # 3 + 4 + 1 + 0 + 4 answers in the required form
    p1 = m["pass_at_1"]
    assert p1["value"] == pytest.approx(0.35) and p1["n"] == 5  # (1/4 + 2/4 + 0 + 0 + 1) / 5
    s = math.sqrt(((0.25 - 0.35) ** 2 + 0.15**2 + 0.35**2 + 0.35**2 + 0.65**2) / 4)
    assert p1["ci95"] == pytest.approx([0.0, 0.35 + T_975_4 * s / math.sqrt(5)], abs=1e-6)
    assert {c: v["value"] for c, v in p1["per_category"].items()} == pytest.approx(
        {"addition": 0.375, "subtraction": 0.0, "multiplication": 1.0})  # fmt: skip
    maj = m["maj_at_k"]
    assert (maj["k"], maj["correct"], maj["n"], maj["value"]) == (4, 2, 5, 0.4)
    assert {c: (v["correct"], v["n"]) for c, v in maj["per_category"].items()} == {
        "addition": (1, 2), "subtraction": (0, 2), "multiplication": (1, 1)}  # fmt: skip
    with pytest.raises(BadInput, match="same number of samples"):
        sampled_metrics([*rs[:1], {**rs[1], "samples": rs[1]["samples"][:2]}], ["addition"])


def test_student_t_and_the_mean_interval_against_closed_forms():
    for t in (0.5, 1.0, math.sqrt(5), 4.0):  # df = 4: P(|T| > t) = 1 - t (t² + 6) / (t² + 4)^(3/2)
        assert t_two_sided_p(t, 4) == pytest.approx(1 - t * (t * t + 6) / (t * t + 4) ** 1.5, abs=1e-10)
    for t in (0.3, 1.0, 3.0):  # df = 1 (Cauchy): 1 - 2 atan(t) / pi
        assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 * math.atan(t) / math.pi, abs=1e-10)
    assert t_quantile(4) == pytest.approx(T_975_4, abs=1e-8) and t_quantile(1) == pytest.approx(12.7062047, abs=1e-6)
    assert incomplete_beta(2, 3, 0.4) == pytest.approx(0.5248) and incomplete_beta(1, 1, 0.3) == pytest.approx(0.3)
    assert mean_interval([0.5]) == {"value": 0.5, "ci95": [0.0, 1.0], "n": 1}
    assert mean_interval([0.4, 0.4, 0.4])["ci95"] == pytest.approx([0.4, 0.4])


A = {"p1": ("addition", 1, 4, False), "p2": ("addition", 2, 4, True), "p3": ("subtraction", 0, 4, False),
     "p4": ("subtraction", 0, 4, False), "p5": ("multiplication", 4, 4, True)}  # fmt: skip
B = {"p1": ("addition", 3, 4, True), "p2": ("addition", 2, 4, True), "p3": ("subtraction", 1, 4, False),
     "p4": ("subtraction", 2, 4, True), "p5": ("multiplication", 4, 4, True)}  # fmt: skip


def test_paired_pass_at_1_and_maj_at_k_by_hand():
    """d = 1/2, 0, 1/4, 1/2, 0: mean 1/4, s_d = 1/4, t = sqrt(5), p = 1 - sqrt(5) 11 / 27 (df 4); maj: b = 0, c = 2."""
    result = paired_sampled(A, B)
    s = result["pass_at_1"]["overall"]
    assert (s["n"], s["mean_a"], s["mean_b"], s["diff"]) == (5, pytest.approx(0.35), pytest.approx(0.6), 0.25)
    assert s["t"] == pytest.approx(math.sqrt(5)) and s["p"] == pytest.approx(1 - math.sqrt(5) * 11 / 27, abs=1e-10)
    half = T_975_4 * 0.25 / math.sqrt(5)
    assert s["ci"] == pytest.approx([0.25 - half, 0.25 + half]) and not s["significant"]
    assert result["pass_at_1"]["categories"]["multiplication"]["p"] == 1.0  # one problem: nothing known
    maj = result["maj_at_k"]["overall"]
    assert (maj["b"], maj["c"], maj["mcnemar_p"], maj["acc_a"], maj["acc_b"]) == (0, 2, 0.5, 0.4, 0.8)
    assert list(result["maj_at_k"]["categories"]) == ["addition", "subtraction", "multiplication"]
    other_k = {i: (c, n * 2, k * 2, m) for i, (c, n, k, m) in B.items()}  # same pass@1 from 8 samples
    result = paired_sampled(A, other_k)
    assert result["maj_at_k"] is None and result["pass_at_1"]["overall"]["diff"] == 0.25
    assert paired_means([(0.5, 0.5)] * 3)["p"] == 1.0 and paired_means([(0.0, 0.5)] * 3)["p"] == 0.0
    with pytest.raises(BadInput, match="cover different problems"):
        paired_sampled(A, {k: v for k, v in B.items() if k != "p5"})


class FakeBackend:
    """Greedy: always wrong. Sampled: each PROBLEMS row's four samples, in order."""

    name = "fake"

    def __init__(self):
        self.calls = []
        self.by_prompt = {f"question {pid}": (answer, texts) for pid, _, answer, texts in PROBLEMS}

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        self.calls.append({"n": n, "temperature": temperature})
        answers = [self.by_prompt[p[0]["content"]] for p in prompts]
        return [[f"Answer: {a + 1}"] if n == 1 else texts[:n] for a, texts in answers]


@pytest.fixture()
def handmade(tmp_path):
    path = tmp_path / "handmade.jsonl"
    path.write_text("".join(json.dumps({"id": pid, "category": cat, "prompt": f"question {pid}", "answer": ans}) + "\n"
                            for pid, cat, ans, _ in PROBLEMS), encoding="utf-8")  # fmt: skip
    return path


def test_evaluate_policy_writes_sampled_metrics_and_per_problem_outcomes(handmade, tmp_path):
    backend = FakeBackend()
    out = tmp_path / "eval"
    metrics = evaluate_policy(
        "fake",
        str(handmade),
        out,
        PolicyEvalSettings(preference_split=None, samples=4, sample_temperature=0.7),
        backend=backend,
    )
    assert backend.calls == [{"n": 1, "temperature": 0.0}, {"n": 4, "temperature": 0.7}]
    assert metrics["accuracy"]["correct"] == 0 and "pass_at_k" not in metrics  # greedy, k = 1
    sampled = metrics["sampled"]
    assert (sampled["n_samples"], sampled["temperature"], sampled["maj_at_k"]["correct"]) == (4, 0.7, 2)
    assert sampled["pass_at_1"]["value"] == pytest.approx(0.35)
    saved = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [(r["n_correct"], r["maj_answer"], r["maj_correct"]) for r in saved] == [
        (1, 6, False), (2, 7, True), (0, 2, False), (0, None, False), (4, 6, True)]  # fmt: skip
    assert read_sampled(out) == {"p1": ("addition", 1, 4, False), "p2": ("addition", 2, 4, True),
                                 "p3": ("subtraction", 0, 4, False), "p4": ("subtraction", 0, 4, False),
                                 "p5": ("multiplication", 4, 4, True)}  # fmt: skip
    greedy = evaluate_policy(
        "fake", str(handmade), tmp_path / "greedy", PolicyEvalSettings(preference_split=None), backend=FakeBackend()
    )
    assert "sampled" not in greedy and "samples" not in (tmp_path / "greedy" / "samples.jsonl").read_text()
    with pytest.raises(BadInput, match="no id or no samples"):
        read_sampled(tmp_path / "greedy")
    with pytest.raises(BadInput, match="sample_temperature=0.0: must be > 0"):
        evaluate_policy(
            "fake",
            str(handmade),
            tmp_path / "x",
            PolicyEvalSettings(samples=4, sample_temperature=0.0),
            backend=FakeBackend(),
        )


def test_compare_pairs_sampled_outcomes_when_both_sides_have_them(handmade, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        evaluate_policy(
            "fake", str(handmade), folder, PolicyEvalSettings(preference_split=None, samples=4), backend=FakeBackend()
        )
    result = sampled_comparison(a, b)
    assert (result["temperature_a"], result["temperature_b"]) == (1.0, 1.0)
    assert result["pass_at_1"]["overall"]["diff"] == 0.0 and result["maj_at_k"]["overall"]["mcnemar_p"] == 1.0
    code, out, err = cli(capsys, "eval", "compare", str(a), str(b))
    assert code == 0, err
    assert "sampled pass@1 B − A = +0.0 [+0.0, +0.0] points (paired t-test p 1.000)" in out
    assert "maj@K B − A = +0.0 points" in out
    code, out, err = cli(capsys, "eval", "compare", str(a), str(b), "--json")
    assert code == 0 and json.loads(out)["sampled"]["pass_at_1"]["overall"]["n"] == 5


def test_the_report_shows_sampled_metrics_and_pairs_them_with_sft(handmade, tmp_path):
    from posttrainlab.report.render import to_markdown
    from posttrainlab.report.sampled import sampled_section

    metrics = {}
    for name in ("sft", "rft", "grpo"):
        n = 1 if name == "grpo" else 4  # grpo evaluated greedily only: no sampled row
        metrics[name] = evaluate_policy(
            "fake",
            str(handmade),
            tmp_path / "eval" / name,
            PolicyEvalSettings(preference_split=None, samples=n),
            backend=FakeBackend(),
        )
    text = to_markdown(sampled_section(tmp_path, metrics))
    assert "## Sampled accuracy" in text and "| rft |" not in text  # method_label: RFT, like SFT and GRPO
    assert "| RFT | 0.0% [0.0, 43.4] | 35.0% [0.0, 86.9] | 40.0% [11.8, 76.9] | 4 | 1.0 |" in text
    assert "| RFT | +0.0 [+0.0, +0.0] | 1.000 | +0.0 [" in text and "grpo" not in text
    assert sampled_section(tmp_path, {"grpo": metrics["grpo"]}) == []
