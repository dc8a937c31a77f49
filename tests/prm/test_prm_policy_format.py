"""The policy input format (prm/policy_format.py), the head learning rate and backbone freeze
(train/prm_optim.py), and what training records in prm_config.json (input_format, instruction, no_answer_step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from posttrainlab.config import load_config
from posttrainlab.data.arith.prm_labels import NO_ANSWER_STEP
from posttrainlab.data.arith.problems import INSTRUCTION
from posttrainlab.errors import BadInput
from posttrainlab.generation.prompts import as_messages, encode_prefix, encode_prompt
from posttrainlab.models.tokenizer import build_tokenizer
from posttrainlab.prm import PRM
from posttrainlab.prm.examples import make_examples
from posttrainlab.prm.format import encode_solution
from posttrainlab.prm.loading import load_for_training
from posttrainlab.prm.spec import PRMSpec, write_spec
from posttrainlab.train.prm import train_prm
from posttrainlab.train.prm_optim import freeze_backbone, head_parameter_ids, split_groups
from posttrainlab.train.prm_recipe import PRMRecipe

ROOT = Path(__file__).resolve().parents[2]
POLICY = PRMSpec(input_format="policy", instruction="Solve it.")
Q, STEPS = "What is 351 - 148 + 56?", ["351 - 148 = 203", "203 + 56 = 259", "Answer: 259"]


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_the_policy_reads_the_same_ids(tok):
    """Prompt = the chat template over instruction + question (what the policy was sampled from), then the lines as
    the policy continues them (encode_prefix); each step is read at its newline."""
    enc = encode_solution(tok, POLICY, Q, STEPS, offsets=True)
    prompt = encode_prompt(tok, as_messages(f"Solve it.\n\n{Q}"))
    body = "".join(s + "\n" for s in STEPS)
    assert enc.input_ids == prompt + encode_prefix(tok, body)
    assert tok.decode(enc.input_ids) == (
        f"<|im_start|>user\nSolve it.\n\n{Q}<|im_end|>\n<|im_start|>assistant\n" + body
    )
    assert [tok.decode([enc.input_ids[t]]) for t in enc.separators] == ["\n"] * 3
    assert [body[a:b] for a, b in enc.step_spans] == STEPS
    assert enc.offsets[: len(prompt)] == [(0, 0)] * len(prompt)
    # a prefix reads the same tokens up to its last newline
    prefix = encode_solution(tok, POLICY, Q, STEPS[:2])
    assert prefix.input_ids == enc.input_ids[: enc.separators[1] + 1] and prefix.separators == enc.separators[:2]
    bare = encode_solution(tok, PRMSpec(input_format="policy"), Q, STEPS[:1])  # no instruction: the question alone
    assert tok.decode(bare.input_ids).startswith(f"<|im_start|>user\n{Q}<|im_end|>")


def test_policy_format_refuses_what_is_not_one_line(tok):
    with pytest.raises(ValueError, match="line break"):
        encode_solution(tok, POLICY, Q, ["a\nb"])
    with pytest.raises(ValueError, match="empty"):
        encode_solution(tok, POLICY, Q, ["a", " "])
    with pytest.raises(BadInput, match="input_format"):
        PRMSpec.from_dict({"input_format": "chatml"}, "x")


@pytest.mark.parametrize("head", ["token-cls", "verdict"])
def test_policy_format_scores_in_one_pass_like_prefix_by_prefix(tiny_model, tmp_path, head):
    model, tokenizer, spec = load_for_training(tiny_model, head=head, input_format="policy", instruction=INSTRUCTION)
    assert len(tokenizer) == len(build_tokenizer())  # no separator token, no new embedding
    assert spec.input_format == "policy" and spec.instruction == INSTRUCTION
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    write_spec(spec, tmp_path)
    prm = PRM.from_pretrained(tmp_path)
    assert prm.spec == spec
    for question, steps in [(Q, STEPS), ("What is 2 + 3?", ["2 + 3 = 5", NO_ANSWER_STEP])]:
        got = prm.score(question, steps)
        assert len(got) == len(steps) and got == pytest.approx(prm.score_prefixes(question, steps), abs=1e-5)
    ex, _ = make_examples(tokenizer, spec, [_row()], span_tokens=False, last_only=False, max_length=512, where="x")
    labelled = [t for t, y in enumerate(ex[0]["labels"]) if y != -100]
    assert labelled == encode_solution(tokenizer, spec, Q, STEPS).separators


def _row():
    from posttrainlab.data.formats.step import StepRow

    return StepRow(Q, STEPS, [1, 0, 0])


# ---- head learning rate and backbone freeze --------------------------------------------------------


class Toy(torch.nn.Module):
    base_model_prefix = "model"

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Linear(2, 2)
        self.score = torch.nn.Linear(2, 2, bias=False)


def test_split_groups_and_freeze_by_hand():
    toy = Toy()
    head = head_parameter_ids(toy)
    assert head == {id(toy.score.weight)}
    opt = torch.optim.AdamW(
        [{"params": [toy.model.weight, toy.score.weight], "weight_decay": 0.1},
         {"params": [toy.model.bias], "weight_decay": 0.0}], lr=0.01)  # fmt: skip
    split_groups(opt, head, head_lr=0.5)
    assert [(len(g["params"]), g["lr"], g["prm_head"], g["weight_decay"]) for g in opt.param_groups] == [
        (1, 0.01, False, 0.1),
        (1, 0.5, True, 0.1),
        (1, 0.01, False, 0.0),
    ]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (step + 1))
    freeze_backbone(sched, 2)
    seen = []
    for _ in range(3):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    expected = [[0.0, 0.5, 0.0], [0.0, 0.25, 0.0], [0.01 / 3, 0.5 / 3, 0.01 / 3]]
    assert [x for row in seen for x in row] == pytest.approx([x for row in expected for x in row])
    with pytest.raises(ValueError, match="LambdaLR"):
        freeze_backbone(torch.optim.lr_scheduler.StepLR(opt, 1), 1)


def test_training_records_the_format_and_holds_the_backbone(tiny_model, tmp_path):
    """2 steps with the backbone frozen for 2: every backbone tensor is the base model's; prm_config.json says
    how to read a solution, and that the data held the explicit missing-answer step."""
    from safetensors.torch import load_file

    data = tmp_path / "rows.jsonl"
    two = "What is 2 + 3?"
    rows = [{"prompt": Q, "completions": STEPS, "labels": [True, True, True]},
            {"prompt": two, "completions": ["2 + 3 = 5", NO_ANSWER_STEP], "labels": [True, False]},
            {"prompt": two, "completions": ["2 + 3 = 6", "Answer: 6"], "labels": [False, False]}]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "prm"
    recipe = load_config(PRMRecipe, ROOT / "configs/prm/step.yaml", [
        f"model={tiny_model}", f"output_dir={out}", f"dataset.path={data}", "dataset.format=math-shepherd",
        "input_format=policy", "head_learning_rate=0.05", "freeze_backbone_steps=2", "optim.max_steps=2",
        "optim.batch_size=2", "optim.learning_rate=0.01"])  # fmt: skip
    train_prm(recipe)
    saved = json.loads((out / "prm_config.json").read_text())
    assert (saved["input_format"], saved["instruction"], saved["no_answer_step"]) == (
        "policy", INSTRUCTION, NO_ANSWER_STEP)  # fmt: skip
    base, trained = load_file(str(tiny_model / "model.safetensors")), load_file(str(out / "model.safetensors"))
    backbone = [k for k in trained if k.startswith("model.")]
    assert backbone and all(torch.equal(trained[k], base[k]) for k in backbone)
    assert "score.weight" in trained
    with pytest.raises(BadInput, match="token-cls"):
        load_config(PRMRecipe, ROOT / "configs/prm/step.yaml", ["head=verdict", "freeze_backbone_steps=1"]).check()
