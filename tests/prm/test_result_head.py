"""The ``result`` head (prm/heads.py ``ResultHead``, prm/results.py): untrained it scores exactly as the
zero-training baseline verifier; its loss is the binary cross-entropy of the policy's probability of each line's
result, worked out by hand; it trains, saves, loads and scores in one pass like prefix by prefix; bad
combinations stop in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from posttrainlab.config import load_config
from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP
from posttrainlab.data.arith.problems import INSTRUCTION
from posttrainlab.data.formats.step import StepRow
from posttrainlab.errors import BadInput
from posttrainlab.models.tokenizer import build_tokenizer
from posttrainlab.prm import PRM
from posttrainlab.prm.baseline import PolicyVerifier
from posttrainlab.prm.examples import JudgePrompt, make_example
from posttrainlab.prm.format import encode_solution
from posttrainlab.prm.heads import ResultHead
from posttrainlab.prm.loading import load_for_training
from posttrainlab.prm.results import NO_STEP, result_tokens, segments
from posttrainlab.prm.spec import PRMSpec, write_spec
from posttrainlab.train.prm import batch_loss, collate, train_prm
from posttrainlab.train.prm_recipe import PRMRecipe

ROOT = Path(__file__).resolve().parents[2]
Q = "What is 351 - 148 + 56?"
STEPS = ["351 - 148 = 203", "203 + 56 = 260", "Answer: 260"]
SPEC = PRMSpec(head="result", input_format="policy", instruction=INSTRUCTION)


class Uniform(torch.nn.Module):
    """Every next token equally likely: P(result) = V ** -(its tokens)."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.dummy = vocab, torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask, **kwargs):
        class Out:
            logits = torch.zeros(*input_ids.shape, self.vocab) + self.dummy

        return Out()


def save_result_prm(policy, out: Path) -> Path:
    model, tokenizer, spec = load_for_training(policy, head="result", input_format="policy", instruction=INSTRUCTION)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_spec(spec, out)
    return out


def test_segments_point_each_result_token_at_its_steps_read_position():
    tok = build_tokenizer()
    enc = encode_solution(tok, SPEC, Q, STEPS, offsets=True)
    seg = segments(enc, STEPS)
    for k, positions in enumerate(result_tokens(enc, STEPS)):
        assert len(positions) == 3 and all(seg[t] == enc.separators[k] for t in positions)  # "203", byte-level
    assert sum(s != NO_STEP for s in seg) == 9
    cut = segments(enc, STEPS, enc.separators[1])  # max_length cuts before step 1 is read: only step 0 keeps its
    assert len(cut) == enc.separators[1] and {s for s in cut if s != NO_STEP} == {enc.separators[0]}


def test_untrained_result_head_scores_as_the_baseline_verifier(tiny_policy, tmp_path):
    prm = PRM.from_pretrained(save_result_prm(tiny_policy, tmp_path / "prm"))
    assert prm.spec.head == "result"
    baseline = PolicyVerifier.from_pretrained(tiny_policy)
    items = [(Q, STEPS), ("What is 2 + 3?", ["2 + 3 = 5", NO_ANSWER_STEP]), ("What is 94 * 3?", ["94 * 3 = 292"])]
    got, want = prm.score_batch(items, batch_size=2), baseline.score_batch(items, batch_size=3)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-4, abs=1e-7)
    assert prm.score(Q, STEPS) == pytest.approx(prm.score_prefixes(Q, STEPS), rel=1e-4)  # causal: one pass


def test_loss_is_the_cross_entropy_of_the_result_probability_by_hand():
    """Uniform model, byte-level tokens: P("203") = V^-3 for a right step, P("7") = V^-1 for a wrong one."""
    tok = build_tokenizer()
    v = len(tok)
    row = StepRow(question="What is 5 + 2?", steps=["5 + 2 = 203", "Answer: 7"], labels=[1.0, 0.0])
    ex = make_example(tok, SPEC, row, span_tokens=False, last_only=False, max_length=512)
    assert set(ex) == {"input_ids", "labels", "segments"}
    batch = collate(tok.pad_token_id)([ex, ex])
    assert batch["segments"].shape == batch["input_ids"].shape
    loss = batch_loss(Uniform(v), ResultHead(), batch, soft=False)
    want = (-math.log(v**-3) - math.log(1 - v**-1)) / 2
    assert float(loss.detach()) == pytest.approx(want, rel=1e-5)
    soft = StepRow(question="What is 5 + 2?", steps=["5 + 2 = 203"], labels=[0.25])
    batch = collate(tok.pad_token_id)([make_example(tok, SPEC, soft, span_tokens=False, last_only=False,
                                                    max_length=512)])  # fmt: skip
    p = v**-3
    assert float(batch_loss(Uniform(v), ResultHead(), batch, soft=True).detach()) == pytest.approx(
        -(0.25 * math.log(p) + 0.75 * math.log(1 - p)), rel=1e-5
    )
    with pytest.raises(ValueError, match="verdict"):
        make_example(tok, SPEC, JudgePrompt(messages=[{"role": "user", "content": "x"}], target=1.0),
                     span_tokens=False, last_only=False, max_length=512)  # fmt: skip


def test_trains_from_the_policy_and_moves_scores_toward_the_labels(tiny_policy, tmp_path):
    """Rows whose only wrong line is ``2 + 3 = 6`` and right line ``2 + 3 = 5``: after training the right line
    outscores the wrong one by more than the untrained policy did."""
    data = tmp_path / "rows.jsonl"
    rows = [
        {"prompt": "What is 2 + 3?", "completions": ["2 + 3 = 5", "Answer: 5"], "labels": [True, True]},
        {"prompt": "What is 2 + 3?", "completions": ["2 + 3 = 6", "Answer: 6"], "labels": [False, False]},
        {"prompt": "What is 2 + 3?", "completions": ["2 + 3 = 5", NO_ANSWER_STEP], "labels": [True, False]},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows * 4))  # fmt: skip
    out = tmp_path / "prm"
    recipe = load_config(PRMRecipe, ROOT / "configs/prm/step.yaml", [
        f"model={tiny_policy}", f"output_dir={out}", f"dataset.path={data}", "dataset.format=math-shepherd",
        "head=result", "input_format=policy", "optim.max_steps=6", "optim.batch_size=4",
        "optim.learning_rate=0.01", "optim.logging_steps=1"])  # fmt: skip
    train_prm(recipe)
    saved = json.loads((out / "prm_config.json").read_text())
    assert (saved["head"], saved["input_format"], saved["no_answer_step"]) == ("result", "policy", NO_ANSWER_STEP)
    before, after = PolicyVerifier.from_pretrained(tiny_policy), PRM.from_pretrained(out)

    def gap(scorer):
        right, wrong = scorer.score_batch([("What is 2 + 3?", ["2 + 3 = 5"]), ("What is 2 + 3?", ["2 + 3 = 6"])])
        return math.log(right[0]) - math.log(wrong[0])

    assert gap(after) > gap(before) + 1.0
    assert set(json.loads((out / "train_summary.json").read_text())) >= {"global_step", "train_loss"}


def test_bad_combinations_are_one_line(tiny_prm):
    step = ROOT / "configs/prm/step.yaml"
    with pytest.raises(BadInput, match="a result head is the LM"):
        load_config(PRMRecipe, step, ["head=result", "head_learning_rate=0.01"]).check()
    with pytest.raises(BadInput, match="supervision span"):
        load_config(PRMRecipe, ROOT / "configs/prm/span.yaml", ["head=result"]).check()
    with pytest.raises(BadInput, match="head result needs a causal LM"):
        load_for_training(tiny_prm, head="result")
    with pytest.raises(ValueError, match="segments"):
        ResultHead().logits(Uniform(4), torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
