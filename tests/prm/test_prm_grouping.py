"""Grouped MC-value training is exact: one sequence per trace gives the loss of one sequence per prefix.

With causal attention the logits at step k's separator depend only on the tokens up to it, and the
tokens up to it are the same in the trace's sequence and in the prefix's own sequence (the separator
is a special token, so tokenisation splits on it). The loss is one mean over the same targets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from posttrainlab.errors import BadInput
from posttrainlab.prm.examples import make_examples, read_items
from posttrainlab.prm.heads import make_head
from posttrainlab.prm.loading import load_for_training
from posttrainlab.prm.losses import IGNORE
from posttrainlab.train.prm import batch_loss, collate
from posttrainlab.train.prm_recipe import PRMDataConfig

MC_STEPS = Path(__file__).resolve().parent / "assets/mc_value_steps.jsonl"


def examples(tok, spec, mc_rows: str, soft: bool):
    items = read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value", mc_rows=mc_rows), soft=soft)
    out, dropped = make_examples(tok, spec, items, span_tokens=False, last_only=False, max_length=4096, where="t")
    assert dropped == 0
    return out


def targets(exs) -> list[float]:
    return sorted(y for ex in exs for y in ex["labels"] if y != IGNORE)


@pytest.mark.parametrize("head,soft", [("token-cls", False), ("verdict", True)])
def test_grouped_loss_equals_per_row_loss(tiny_model, head, soft):
    torch.manual_seed(0)
    model, tok, spec = load_for_training(tiny_model, head=head)
    model.eval()
    grouped, rows = examples(tok, spec, "grouped", soft), examples(tok, spec, "prefix", soft)
    assert len(grouped) == 6 and len(rows) == 16  # 6 traces; 22 rows minus 6 empty prefixes
    assert targets(grouped) == targets(rows)
    assert sum(len(ex["input_ids"]) for ex in grouped) < sum(len(ex["input_ids"]) for ex in rows)
    h, pad = make_head(spec, tok), collate(tok.pad_token_id)
    with torch.no_grad():
        for w in (None, torch.tensor([1.5, 1.0])):
            g = batch_loss(model, h, pad(grouped), soft=soft, class_weights=w).item()
            r = batch_loss(model, h, pad(rows), soft=soft, class_weights=w).item()
            assert g == pytest.approx(r, abs=1e-5)
        # each prefix alone (no padding at all): one target each, so the unweighted mean of their losses
        alone = [batch_loss(model, h, pad([ex]), soft=soft).item() for ex in rows]
        g = batch_loss(model, h, pad(grouped), soft=soft).item()
    assert sum(alone) / len(alone) == pytest.approx(g, abs=1e-5)


def test_step_idx_conventions_give_the_same_items(tmp_path):
    """``count`` (0 = empty prefix, the fixture) and ``last`` (0-based last step, posttrain label mc) agree."""
    import json

    rows = [json.loads(line) for line in MC_STEPS.read_text().splitlines()]
    last = [r | {"step_idx": r["step_idx"] - 1} for r in rows if r["step_idx"] > 0]
    path = tmp_path / "last.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in last))
    for mode in ("grouped", "prefix"):
        want = read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value", mc_rows=mode), soft=True)
        with pytest.raises(BadInput, match="set dataset.mc_step_idx=count or dataset.mc_step_idx=last"):
            read_items(PRMDataConfig(path=str(path), format="mc-value", mc_rows=mode), soft=True)  # auto: ambiguous
        explicit = PRMDataConfig(path=str(path), format="mc-value", mc_rows=mode, mc_step_idx="last")
        assert read_items(explicit, soft=True) == want
    with pytest.raises(BadInput, match="a prefix of 4 steps but the row carries 3"):
        read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value", mc_step_idx="last"), soft=True)


def test_grouped_needs_a_causal_model(tmp_path):
    """A bidirectional encoder would let a step's target see later steps: refused for grouped MC rows."""
    from transformers import BertConfig, BertForMaskedLM

    from posttrainlab.config import load_config
    from posttrainlab.models.tokenizer import build_tokenizer
    from posttrainlab.train.prm import build_trainer
    from posttrainlab.train.prm_recipe import PRMRecipe

    tok = build_tokenizer()
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, pad_token_id=tok.pad_token_id)  # fmt: skip
    BertForMaskedLM(cfg).save_pretrained(tmp_path / "bert")
    tok.save_pretrained(tmp_path / "bert")
    recipe = load_config(
        PRMRecipe, None,
        [f"model={tmp_path / 'bert'}", f"dataset.path={MC_STEPS}", "dataset.format=mc-value", "supervision=soft"],
    )  # fmt: skip
    with pytest.raises(BadInput, match="grouped MC-value training needs a causal model"):
        build_trainer(recipe)
