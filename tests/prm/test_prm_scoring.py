"""PRM.from_pretrained loads the three layouts and scores all steps in one pass, equal to prefix by prefix."""

from __future__ import annotations

import pytest
import torch

from posttrainlab.errors import BadInput
from posttrainlab.models.tokenizer import build_tokenizer
from posttrainlab.prm import PRM
from posttrainlab.prm.spec import PRMSpec, write_spec

SOLUTIONS = [
    ("What is 3 + 4 * 2?", ["4 * 2 = 8.", "3 + 8 = 11.", "Answer: 11"]),
    ("Tom has 12 pens and gives away 5. How many are left?", ["12 - 5 = 7.", "Answer: 7"]),
    ("Résumé: what is 3²?", ["3² = 9"]),
]


@pytest.fixture(scope="module")
def token_cls(tmp_path_factory, tiny_model):
    """Layout (a): a 2-label *ForTokenClassification checkpoint, no prm_config.json."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    out = tmp_path_factory.mktemp("prm") / "token-cls"
    torch.manual_seed(1)
    AutoModelForTokenClassification.from_pretrained(tiny_model, num_labels=2).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def verdict(tmp_path_factory, tiny_model):
    """Layout (c): a causal LM with prm_config.json saying head: verdict."""
    import shutil

    out = tmp_path_factory.mktemp("prm") / "verdict"
    shutil.copytree(tiny_model, out)
    write_spec(PRMSpec(head="verdict", chat=False), out)
    return out


def check_one_pass(prm: PRM):
    assert prm.one_pass
    for question, steps in SOLUTIONS:
        got = prm.score(question, steps)
        assert len(got) == len(steps) and all(0.0 < p < 1.0 for p in got)
        assert got == pytest.approx(prm.score_prefixes(question, steps), abs=1e-5)
    batched = prm.score_batch(SOLUTIONS + [("q", [])], batch_size=2)
    assert batched[-1] == []
    for (question, steps), got in zip(SOLUTIONS, batched, strict=False):
        assert got == pytest.approx(prm.score(question, steps), abs=1e-5)


def test_token_classification_layout(token_cls):
    prm = PRM.from_pretrained(token_cls)
    assert prm.spec.head == "token-cls" and prm.spec.chat  # defaults: the tiny tokenizer has a chat template
    check_one_pass(prm)


def test_qwen_prm_layout_loads_natively(qwen_prm):
    from posttrainlab.prm.heads import Qwen2ForProcessRewardModel

    path, state = qwen_prm
    prm = PRM.from_pretrained(path)
    assert isinstance(prm.model, Qwen2ForProcessRewardModel)
    loaded = prm.model.state_dict()
    for key, value in state.items():
        assert torch.equal(loaded[key], value), key  # every tensor came from the file, none re-initialised
    check_one_pass(prm)
    # the reward is softmax index 1 of score.2(relu(score.0(h))) at each separator
    question, steps = SOLUTIONS[0]
    from posttrainlab.prm.format import encode_solution

    enc = encode_solution(prm.tokenizer, prm.spec, question, steps)
    with torch.no_grad():
        hidden = prm.model.model(input_ids=torch.tensor([enc.input_ids])).last_hidden_state[0]
        logits = torch.relu(hidden @ state["score.0.weight"].T + state["score.0.bias"]) @ state["score.2.weight"].T
        want = torch.softmax(logits + state["score.2.bias"], -1)[enc.separators, 1]
    assert prm.score(question, steps) == pytest.approx(want.tolist(), abs=1e-5)


def test_verdict_layout(verdict):
    prm = PRM.from_pretrained(verdict)
    assert prm.spec.head == "verdict" and not prm.spec.chat
    check_one_pass(prm)
    # P(yes) is normalised over the two verdict tokens only
    question, steps = SOLUTIONS[1]
    from posttrainlab.prm.format import encode_solution

    enc = encode_solution(prm.tokenizer, prm.spec, question, steps)
    with torch.no_grad():
        logits = prm.model(input_ids=torch.tensor([enc.input_ids])).logits[0, enc.separators]
    yes, no = prm.tokenizer.convert_tokens_to_ids("+"), prm.tokenizer.convert_tokens_to_ids("-")
    want = torch.softmax(logits[:, [no, yes]], -1)[:, 1]
    assert prm.score(question, steps) == pytest.approx(want.tolist(), abs=1e-5)


def test_encoder_scores_prefix_by_prefix(tmp_path):
    """A bidirectional encoder cannot score in one pass (step k would see later steps)."""
    from transformers import BertConfig, BertForTokenClassification

    tok = build_tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, num_labels=2, pad_token_id=tok.pad_token_id)  # fmt: skip
    torch.manual_seed(3)
    BertForTokenClassification(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    prm = PRM.from_pretrained(tmp_path)
    assert not prm.one_pass
    question, steps = SOLUTIONS[0]
    assert prm.score(question, steps) == pytest.approx(prm.score_prefixes(question, steps), abs=1e-6)


def test_not_a_prm(tiny_model, tmp_path, verdict):
    import shutil

    with pytest.raises(BadInput, match="not a PRM checkpoint"):
        PRM.from_pretrained(tiny_model)
    with pytest.raises(BadInput, match="no such model folder"):
        PRM.from_pretrained(tmp_path / "missing")
    verdict = shutil.copytree(verdict, tmp_path / "verdict")
    (verdict / "prm_config.json").write_text('{"head": "verdict", "yes_token": "yes"}')
    with pytest.raises(BadInput, match="'yes' is 3 tokens"):
        PRM.from_pretrained(verdict)
    (verdict / "prm_config.json").write_text('{"head": "verdict", "colour": 1}')
    with pytest.raises(BadInput, match="unknown key"):
        PRM.from_pretrained(verdict)


def test_hub_id_offline_is_one_line(tmp_path, monkeypatch):
    from posttrainlab.errors import HubUnavailable

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailable, match="HF_HUB_OFFLINE is set and it is not in the local"):
        PRM.from_pretrained("Qwen/Qwen2.5-Math-PRM-7B")
