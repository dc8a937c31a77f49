"""Pretraining the base: result-only labels, a finite falling loss, the contamination record, the cache."""

from __future__ import annotations

import json
import math

import pytest

from posttrainlab.data.arith.corpus import CorpusConfig
from posttrainlab.train.pretrain import PretrainConfig, PretrainOptim, config_hash, is_cached, pack, pretrain
from tiny_models import SMALL

CFG = PretrainConfig(
    model=SMALL,
    corpus=CorpusConfig(size=600),
    train=PretrainOptim(epochs=1, batch_size=8, seq_len=64, logging_steps=2, save_steps=1000, learning_rate=3e-3),
    heldout_per_op=5,
)


def test_pack_labels_only_results():
    from posttrainlab.models.tokenizer import build_tokenizer

    tok = build_tokenizer()
    ids, labels = pack(tok, [(("+", 12, 9),)] * 8, seq_len=16)
    text = tok.decode(ids[0])
    assert text == "12 + 9 = 21\n12 +"  # 12 tokens an item; blocks of 16 cut through the second one
    kept = "".join(chr(t) for t, lab in zip(ids[0].tolist(), labels[0].tolist(), strict=True) if lab != -100)
    assert kept == " 21\n"  # the first 16 tokens hold one full item and part of the next
    assert ids.shape == labels.shape == (8 * 12 // 16, 16)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    out = tmp_path_factory.mktemp("pt") / "base"
    pretrain(CFG, out)
    return out


def test_pretrain_writes_model_metadata_and_contamination_check(base):
    meta = json.loads((base / "pretrain.json").read_text())
    losses = [h["loss"] for h in meta["log_history"] if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]
    assert meta["contamination"]["overlap"] == 0
    assert json.loads((base / "contamination.json").read_text()) == meta["contamination"]
    assert set(meta["heldout_accuracy"]) == {"+", "-", "*"}
    assert (base / "model.safetensors").is_file()


def test_pretrain_changes_the_weights(base):
    import torch
    from transformers import AutoModelForCausalLM

    from posttrainlab.models.tiny import build_model

    trained = AutoModelForCausalLM.from_pretrained(base).state_dict()
    init, _ = build_model(SMALL)
    changed = [k for k, v in init.state_dict().items() if not torch.equal(v, trained[k])]
    assert len(changed) >= len(trained) // 2


def test_cached_base_is_reused_and_the_hash_tracks_the_config(base):
    assert is_cached(base, CFG)
    before = (base / "model.safetensors").stat().st_mtime_ns
    pretrain(CFG, base)  # returns at once
    assert (base / "model.safetensors").stat().st_mtime_ns == before
    other = PretrainConfig(model=SMALL, corpus=CorpusConfig(size=601), train=CFG.train, heldout_per_op=5)
    assert config_hash(other) != config_hash(CFG) and not is_cached(base, other)


def test_pretrain_refuses_a_folder_with_user_files_before_training(tmp_path, monkeypatch):
    """Checked first: the corpus is never drawn, the folder is left as it was."""
    from posttrainlab.errors import BadInput
    from posttrainlab.train import pretrain as module

    out = tmp_path / "base"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    (out / "results.csv").write_text("a,b\n")
    monkeypatch.setattr(module, "draw_corpus", lambda *a, **k: pytest.fail("trained before checking --out"))
    with pytest.raises(BadInput, match=r"holds other files \(notes\.txt, results\.csv\)"):
        pretrain(CFG, out)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv"]


def test_pretrain_replaces_an_earlier_base_but_not_a_user_file_in_it(base, tmp_path):
    import shutil

    from posttrainlab.errors import BadInput

    earlier = tmp_path / "base"
    shutil.copytree(base, earlier)
    other = PretrainConfig(model=SMALL, corpus=CorpusConfig(size=100), train=CFG.train, heldout_per_op=2)
    pretrain(other, earlier)  # an earlier base of another config: replaced
    assert is_cached(earlier, other) and not is_cached(earlier, CFG)
    (earlier / "notes.txt").write_text("my notes")
    with pytest.raises(BadInput, match=r"notes\.txt"):
        pretrain(CFG, earlier)
    assert (earlier / "notes.txt").read_text() == "my notes" and is_cached(earlier, other)


def test_pretrain_prints_one_line_per_logging_step_and_a_final_line(tmp_path, capfd):
    """Not transformers' tqdm bar and raw log dicts (progress.use_train_log): ``pretrain  step N/M  loss ...``."""
    import re
    from dataclasses import replace

    cfg = replace(CFG, corpus=CorpusConfig(size=100), train=replace(CFG.train, logging_steps=1), heldout_per_op=2)
    pretrain(cfg, tmp_path / "base")
    out, err = capfd.readouterr()
    history = json.loads((tmp_path / "base" / "pretrain.json").read_text())["log_history"]
    losses = [h["loss"] for h in history if "loss" in h]
    steps = [line for line in out.splitlines() if line.startswith("pretrain  step ")]
    n = len(losses)
    assert n > 1 and len(steps) == n
    assert all(line.startswith(f"pretrain  step {i}/{n}  loss {loss:.3g}  lr ") for i, (line, loss)
               in enumerate(zip(steps, losses, strict=True), start=1))  # fmt: skip
    assert re.search(rf"^pretrain done: {n} steps in .*, final loss {losses[-1]:.3g}$", out, re.M)
    assert "{'loss'" not in out + err and f"/{n} [" not in err  # no tqdm training bar (a library call keeps
    # transformers' own saving bar: only the CLI and the quickstart quiet the libraries)
