"""The zero-training baseline verifier (prm/baseline.py): exact values with a uniform model, a policy
that knows the reference solutions ranks them first, the tiny model's shape and determinism, ``baseline:POLICY``
everywhere a PRM is named; and the explicit missing-answer step in best-of-N and beam search."""

from __future__ import annotations

import json

import pytest
import torch

from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP
from posttrainlab.data.arith.steps import parse_question, split_steps
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.eval.within_problem import within_problem_by_aggregation
from posttrainlab.models.tokenizer import build_tokenizer
from posttrainlab.prm.baseline import PolicyVerifier, baseline_policy, is_baseline, result_span
from posttrainlab.prm.spec import PRMSpec
from posttrainlab.runners.settings import BeamSettings, BestOfNSettings
from prm_eval_fakes import FakeBackend, OracleScorer, fake_solution

Q = "What is 351 - 148 + 56?"


class Out:
    def __init__(self, logits):
        self.logits = logits


class Uniform(torch.nn.Module):
    """Every next token equally likely: P(result) = V ** -(its tokens)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        return Out(torch.zeros(*input_ids.shape, self.vocab))


class Knows(torch.nn.Module):
    """Puts logit 10 on the next token of any known sequence the input is a prefix of (the reference solutions)."""

    def __init__(self, vocab: int, sequences: list[list[int]]):
        super().__init__()
        self.vocab, self.dummy = vocab, torch.nn.Parameter(torch.zeros(1))
        self.next = {tuple(s[: t + 1]): s[t + 1] for s in sequences for t in range(len(s) - 1)}

    def forward(self, input_ids, attention_mask):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        for b, row in enumerate(input_ids.tolist()):
            for t in range(len(row)):
                nxt = self.next.get(tuple(row[: t + 1]))
                if nxt is not None:
                    logits[b, t, nxt] = 10.0
        return Out(logits)


def test_names():
    assert is_baseline("baseline:runs/sft") and baseline_policy("baseline:runs/sft") == "runs/sft"
    assert not is_baseline("runs/prm")
    with pytest.raises(BadInput, match="name the policy"):
        baseline_policy("baseline:")
    assert result_span("203 + 56 = 259") == (11, 14) and result_span("Answer: 259") == (8, 11)


def test_uniform_model_gives_exact_probabilities():
    tok = build_tokenizer()
    v = len(tok)
    verifier = PolicyVerifier(Uniform(v), tok)
    # byte-level: the results 203, 259, 259 are 3 tokens each, "so 259" is read whole (6 tokens)
    got = verifier.score(Q, ["351 - 148 = 203", "203 + 56 = 259", "Answer: 259", "so 259"])
    assert got == pytest.approx([v**-3, v**-3, v**-3, v**-6], rel=1e-4)
    assert verifier.score_batch([(Q, [])]) == [[]]


def test_a_policy_that_knows_the_reference_ranks_it_first(arith_dir):
    """Samples: the reference, a first line off by one, a wrong answer line. Under ``Knows`` the reference's
    results all have P ~ 0.95 or more; the slipped line and the wrong answer's last digit are near 1/V."""
    tok = build_tokenizer()
    questions = [Q, "What is 94 * 3?", "What is 12 * 11 - 7?"]
    plain = PolicyVerifier(Uniform(len(tok)), tok)
    known = [plain.reads(q, split_steps(parse_question(q).solution))[0] for q in questions]
    verifier = PolicyVerifier(Knows(len(tok), known), tok)
    groups, correct, items = [], [], []
    for q in questions:
        for j in (0, 1, 3):  # reference, first step off, wrong answer line (prm_eval_fakes.KINDS)
            groups.append(q)
            correct.append(j == 0)
            items.append((q, split_steps(fake_solution(q, j))))
    scores = verifier.score_batch(items, batch_size=2)
    assert all(s > 0.9 for row, ok in zip(scores, correct, strict=True) if ok for s in row)
    m = within_problem_by_aggregation(groups, correct, scores)
    assert m["min"]["pairwise_accuracy"] == 1.0 and m["last"]["pairwise_accuracy"] == 1.0 and m["min"]["pairs"] == 6


def test_tiny_policy_shape_determinism_and_prefixes(tiny_policy):
    verifier = PolicyVerifier.from_pretrained(tiny_policy)
    steps = ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"]
    one = verifier.score(Q, steps)
    assert len(one) == 3 and all(0.0 < s <= 1.0 for s in one)
    assert verifier.score(Q, steps) == one
    batch = verifier.score_batch([(Q, steps[:1]), ("What is 2 + 3?", ["2 + 3 = 5"]), (Q, steps)], batch_size=2)
    assert batch[2] == pytest.approx(one, rel=1e-5)
    for k in range(3):  # causal: a step's score never sees the lines after it
        assert verifier.score(Q, steps[: k + 1])[-1] == pytest.approx(one[k], rel=1e-5)


def test_baseline_is_accepted_wherever_a_prm_is_named(arith_dir, tiny_policy, tmp_path):
    from posttrainlab.cli.options import check_prm as cli_check_prm
    from posttrainlab.label.arith_prm import ArithPRMBuild, build
    from posttrainlab.runners.best_of_n import run as best_of_n
    from posttrainlab.runners.prm_eval import check_prm, load_scorer
    from posttrainlab.runners.prm_eval import run as eval_prm

    spec = f"baseline:{tiny_policy}"
    check_prm(spec)
    cli_check_prm(spec)
    assert isinstance(load_scorer(spec), PolicyVerifier)
    with pytest.raises(BadInput, match="no such model folder"):
        check_prm(f"baseline:{tmp_path / 'nowhere'}")
    for bad in (f"baseline:{tmp_path / 'nowhere'}", "baseline:"):
        with pytest.raises(BadInput, match="^--prm "):
            cli_check_prm(bad)
    b = best_of_n(
        tiny_policy,
        spec,
        arith_dir,
        tmp_path / "bon",
        BestOfNSettings(n=4, limit=2),
        backend=FakeBackend(),
        progress=False,
    )
    assert b["prm"] == spec and b["within_problem"]["min"]["problems"] == 2
    aprm = tmp_path / "aprm"
    build("fake", arith_dir, aprm, ArithPRMBuild(k=2, limit=1), backend=FakeBackend())
    m = eval_prm(spec, aprm, tmp_path / "e", progress=False)
    assert m["model"] == spec and m["solutions"] > 0 and m["within_problem"] is not None


class MarkedOracle(OracleScorer):
    """The oracle, as a PRM trained with the explicit missing-answer step: it scores that step 0.05."""

    spec = PRMSpec(no_answer_step=NO_ANSWER_STEP)

    def __init__(self):
        super().__init__()
        self.items = []

    def score(self, question, steps):
        self.items.append(list(steps))
        real = [s for s in steps if s != NO_ANSWER_STEP]
        return (super().score(question, real) if real else []) + [0.05] * (len(steps) - len(real))


def test_best_of_n_appends_the_missing_answer_step(arith_dir, tmp_path):
    from posttrainlab.runners.best_of_n import run

    settings = BestOfNSettings(n=4, limit=2)
    run("p", "q", arith_dir, tmp_path / "bon", settings, backend=FakeBackend(), scorer=MarkedOracle(), progress=False)
    rows = read_jsonl(tmp_path / "bon" / "scores.jsonl")
    missing = rows[0]["samples"][2]  # FakeBackend sample 2: right lines, no answer line
    assert missing["steps"][-1] == NO_ANSWER_STEP and missing["scores"][-1] == 0.05 and missing["min"] == 0.05
    assert rows[0]["samples"][0]["steps"][-1].startswith("Answer:")  # the others are as they were
    plain = tmp_path / "bon2"
    run("p", "q", arith_dir, plain, settings, backend=FakeBackend(), scorer=OracleScorer(), progress=False)
    assert NO_ANSWER_STEP not in read_jsonl(plain / "scores.jsonl")[0]["samples"][2]["steps"]


def test_beam_search_appends_it_to_finished_beams_only(arith_dir, tmp_path):
    """Each beam proposes the reference's next line twice, once ending in eos: an eos-finished beam without an
    answer line is scored with the missing-answer step, an active one never is."""
    from posttrainlab.runners.beam_algorithm import Beam, Step, scored_steps
    from posttrainlab.runners.beam_search import run

    assert scored_steps(Beam(("1 + 1 = 2",), finished="eos"), NO_ANSWER_STEP) == ["1 + 1 = 2", NO_ANSWER_STEP]
    assert scored_steps(Beam(("1 + 1 = 2",)), NO_ANSWER_STEP) == ["1 + 1 = 2"]
    assert scored_steps(Beam(("Answer: 2",), finished="answer"), NO_ANSWER_STEP) == ["Answer: 2"]

    class Policy:
        def propose(self, requests, n, max_new_tokens):
            out = []
            for r in requests:
                lines = parse_question(r.prompt[-1]["content"]).solution.splitlines()
                line = lines[len(r.prefix.splitlines())]
                out.append([Step(line, 3, "eos" if j % 2 else "newline") for j in range(n)])
            return out

    scorer = MarkedOracle()
    settings = BeamSettings(beams=2, proposals=2, limit=2)
    run("p", "q", arith_dir, tmp_path / "beam", settings, proposer=Policy(), scorer=scorer, progress=False)
    marked = [s for s in scorer.items if s[-1] == NO_ANSWER_STEP]
    assert marked and all(not s[-2].startswith("Answer:") for s in marked)
    beam = json.loads((tmp_path / "beam" / "beam.json").read_text())
    assert beam["settings"]["no_answer_step"] == NO_ANSWER_STEP
    for row in read_jsonl(tmp_path / "beam" / "outcomes.jsonl"):
        for b in row["beams"]:
            extra = b["finished"] != "answer"
            assert len(b["scores"]) == len(split_steps(b["response"])) + extra
