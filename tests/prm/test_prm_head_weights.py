"""A PRM is scored only with the weights its checkpoint holds: a missing or misshapen head is refused, not
re-initialised at random; only training may make a new head, and it says so in one line."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from posttrainlab.cli import main
from posttrainlab.errors import BadInput
from posttrainlab.prm import PRM
from posttrainlab.prm.loading import load_for_training
from posttrainlab.prm.spec import PRMSpec, write_spec

QUESTION, STEPS = "What is 3 + 4 * 2?", ["4 * 2 = 8.", "3 + 8 = 11.", "Answer: 11"]


def edit_weights(folder: Path, drop=(), replace=None) -> None:
    """Rewrite ``folder/model.safetensors`` without the tensors ``drop`` and with ``replace``'s tensors."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = load_file(str(path))
    for key in drop:
        del state[key]
    state |= replace or {}
    save_file(state, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def token_cls_prm(tmp_path_factory, tiny_model) -> Path:
    """A token-cls PRM saved as ``posttrain train prm`` saves one (a fresh head, seeded)."""
    out = tmp_path_factory.mktemp("prm") / "token-cls"
    torch.manual_seed(5)
    model, tokenizer, spec = load_for_training(tiny_model, head="token-cls")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_spec(spec, out)
    return out


@pytest.fixture(scope="module")
def untied_lm(tmp_path_factory, tiny_model) -> Path:
    """The tiny causal LM with its own (untied) LM head, saved with ``lm_head.weight``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("prm") / "untied"
    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone() * 2)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(out)
    return out


def copy(src: Path, dst: Path) -> Path:
    return Path(shutil.copytree(src, dst))


def test_good_checkpoint_scores_the_same_at_each_load(token_cls_prm):
    from safetensors.torch import load_file

    first = PRM.from_pretrained(token_cls_prm, device="cpu")
    saved = load_file(str(token_cls_prm / "model.safetensors"))
    for key in ("score.weight", "score.bias"):
        assert torch.equal(first.model.state_dict()[key], saved[key]), key  # the head came from the file
    assert PRM.from_pretrained(token_cls_prm, device="cpu").score(QUESTION, STEPS) == first.score(QUESTION, STEPS)


@pytest.mark.parametrize("drop", [["score.weight"], ["score.weight", "score.bias"]])
def test_missing_token_cls_head_is_refused(token_cls_prm, tmp_path, drop):
    folder = copy(token_cls_prm, tmp_path / "prm")
    edit_weights(folder, drop=drop)
    with pytest.raises(BadInput, match="missing from the checkpoint: " + ", ".join(sorted(drop))) as e:
        PRM.from_pretrained(folder, device="cpu")
    assert str(folder) in str(e.value) and "\n" not in str(e.value)


def test_head_of_another_shape_is_refused(token_cls_prm, tmp_path):
    folder = copy(token_cls_prm, tmp_path / "prm")
    edit_weights(folder, replace={"score.weight": torch.randn(3, 32), "score.bias": torch.randn(3)})
    with pytest.raises(
        BadInput, match=r"score.bias \(checkpoint 3, model 2\), score.weight \(checkpoint 3x32, model 2x32\)"
    ):
        PRM.from_pretrained(folder, device="cpu")


def test_qwen_prm_layout_missing_its_score_mlp_is_refused(qwen_prm, tmp_path):
    folder = copy(qwen_prm[0], tmp_path / "qwen")
    edit_weights(folder, drop=["score.2.weight", "score.2.bias"])
    with pytest.raises(BadInput, match="missing from the checkpoint: score.2.bias, score.2.weight"):
        PRM.from_pretrained(folder, device="cpu")


def test_verdict_head_is_the_lm_head(untied_lm, tiny_model, tmp_path):
    """A tied LM head is the embedding and cannot go missing alone; an untied one can, and is refused."""
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tiny_model).tie_word_embeddings
    good = copy(untied_lm, tmp_path / "good")
    write_spec(PRMSpec(head="verdict", chat=False), good)
    a = PRM.from_pretrained(good, device="cpu")
    assert not torch.equal(a.model.lm_head.weight, a.model.model.embed_tokens.weight)  # really untied
    assert PRM.from_pretrained(good, device="cpu").score(QUESTION, STEPS) == a.score(QUESTION, STEPS)
    bad = copy(good, tmp_path / "bad")
    edit_weights(bad, drop=["lm_head.weight"])
    with pytest.raises(BadInput, match="missing from the checkpoint: lm_head.weight"):
        PRM.from_pretrained(bad, device="cpu")
    with pytest.raises(BadInput, match="lm_head.weight; refusing to train on"):  # no new verdict head either
        load_for_training(bad, head="verdict")


def test_cli_eval_prm_on_a_headless_checkpoint_exits_2(token_cls_prm, tmp_path, capsys):
    folder = copy(token_cls_prm, tmp_path / "prm")
    edit_weights(folder, drop=["score.weight"])
    data = tmp_path / "steps.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q", "steps": ["s1", "s2"], "step_labels": [1, 0]}) + "\n")
    out = tmp_path / "eval"
    with pytest.raises(SystemExit) as e:
        main(["eval", "prm", "--model", str(folder), "--data", str(data), "--out", str(out), "--no-progress",
              "--device", "cpu"])  # fmt: skip
    assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()
    lines = [ln for ln in err if ln.strip() and "Loading weights" not in ln]  # less transformers' progress bar
    assert len(lines) == 1 and lines[0].startswith("posttrain: error: ") and "score.weight" in lines[0]
    assert not out.exists()


def test_training_on_a_base_says_new_head_in_one_line(tiny_model, caplog):
    with caplog.at_level(logging.WARNING):
        model, _, _ = load_for_training(tiny_model, head="token-cls")
    notices = [r.getMessage() for r in caplog.records if "new token-classification head" in r.getMessage()]
    assert notices == [
        f"prm: new token-classification head `score` (2 classes) on top of {tiny_model}; its weights start random"
    ]
    assert "LOAD REPORT" not in caplog.text  # transformers' multi-line table, silenced for this case only
    assert model.score.weight.shape == (2, 32)


def test_training_refuses_a_base_missing_backbone_weights(tiny_model, tmp_path):
    folder = copy(tiny_model, tmp_path / "base")
    edit_weights(folder, drop=["model.norm.weight"])
    with pytest.raises(BadInput, match="missing from the checkpoint: model.norm.weight"):
        load_for_training(folder, head="token-cls")


def test_other_load_reports_are_not_silenced(token_cls_prm, tmp_path, caplog):
    """A tensor the model does not use is transformers' to report; the load goes on."""
    folder = copy(token_cls_prm, tmp_path / "prm")
    edit_weights(folder, replace={"extra.weight": torch.zeros(2)})
    with caplog.at_level(logging.WARNING):
        PRM.from_pretrained(folder, device="cpu")
    assert "LOAD REPORT" in caplog.text and "extra.weight" in caplog.text
