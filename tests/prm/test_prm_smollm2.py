"""PRMs on the real model (SmolLM2-135M-Instruct): ``<extra_0>`` joins a BPE vocabulary, tied weights stay tied,
labels sit exactly on the separators, and scoring in one pass equals scoring each prefix on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Tom has 3 apples and buys 2 more. How many apples does he have?"
STEPS = ["Tom starts with 3 apples.", "He buys 2 more, so 3 + 2 = 5.", "The answer is 5."]


def _train(capsys, config: str, smollm2: Path, out: Path, *extra: str) -> Path:
    args = ["train", "prm", "--config", str(ROOT / "configs" / "prm" / config), f"model={smollm2}"]
    args += [f"output_dir={out}", "optim.max_steps=2", "optim.batch_size=2", "optim.learning_rate=0.0001", *extra]
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    return out


def test_separator_is_one_new_special_token_and_labels_sit_on_it(smollm2):
    from transformers import AutoTokenizer

    from posttrainlab.data.formats.step import StepRow as Solution
    from posttrainlab.prm.examples import make_example
    from posttrainlab.prm.format import encode_solution
    from posttrainlab.prm.loading import load_for_training

    before = AutoTokenizer.from_pretrained(smollm2)
    assert "<extra_0>" not in before.get_vocab()
    assert len(before("<extra_0>", add_special_tokens=False)["input_ids"]) > 1  # BPE splits it
    model, tokenizer, spec = load_for_training(str(smollm2), head="verdict")
    sep = tokenizer.convert_tokens_to_ids("<extra_0>")
    assert tokenizer("a<extra_0>b", add_special_tokens=False)["input_ids"].count(sep) == 1
    assert tokenizer.added_tokens_decoder[sep].special  # never split, never normalised
    assert model.get_input_embeddings().num_embeddings == len(tokenizer) == len(before) + 1
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    assert spec.chat  # the model's own chat template
    enc = encode_solution(tokenizer, spec, QUESTION, STEPS)
    assert [enc.input_ids[p] for p in enc.separators] == [sep] * 3
    example = make_example(
        tokenizer, spec, Solution(QUESTION, STEPS, [1.0, 0.0, 1.0]), span_tokens=False, last_only=False, max_length=512
    )
    labelled = [i for i, label in enumerate(example["labels"]) if label != -100]
    assert labelled == enc.separators and [example["labels"][i] for i in labelled] == [1.0, 0.0, 1.0]
    # each step's text is exactly the tokens between separators (no BPE merge across the separator)
    text = tokenizer.decode(enc.input_ids)
    assert all(step + "<extra_0>" in text for step in STEPS)


@pytest.mark.parametrize(
    ("config", "extra"),
    [
        ("step.yaml", ()),
        ("span.yaml", ()),
        ("soft.yaml", ("dataset.mc_step_idx=count",)),
    ],
)
def test_train_prm_on_the_real_model_and_score_it(config, extra, smollm2, tmp_path, capsys):
    from posttrainlab.prm import PRM

    out = _train(capsys, config, smollm2, tmp_path / "prm", *extra)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert any("loss" in r and r["loss"] == r["loss"] for r in log)  # finite, not NaN
    prm = PRM.from_pretrained(out)
    tokenizer = prm.tokenizer
    assert len(tokenizer("<extra_0>", add_special_tokens=False)["input_ids"]) == 1
    if config == "soft.yaml":  # verdict head: the LM head, still tied to the resized embeddings
        model = prm.model
        assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    one_pass = prm.score(QUESTION, STEPS)
    per_prefix = prm.score_prefixes(QUESTION, STEPS)
    assert len(one_pass) == 3 and all(0.0 <= s <= 1.0 for s in one_pass)
    assert one_pass == pytest.approx(per_prefix, abs=1e-4)


def test_result_head_on_the_real_model_starts_as_its_baseline_verifier_and_trains(smollm2, tmp_path, capsys):
    """SmolLM2's BPE (digits one token each) in the policy format: the untrained result head scores each line as
    the baseline verifier does; two training steps run, keep the weights tied, and score in one pass as per prefix."""
    from posttrainlab.data.arith.problems import INSTRUCTION
    from posttrainlab.prm import PRM
    from posttrainlab.prm.baseline import PolicyVerifier
    from posttrainlab.prm.loading import load_for_training
    from posttrainlab.prm.spec import write_spec

    q, steps = "What is 94 * 3?", ["94 * 3 = 282", "Answer: 282"]
    model, tokenizer, spec = load_for_training(smollm2, head="result", input_format="policy", instruction=INSTRUCTION)
    assert model.get_input_embeddings().num_embeddings == len(tokenizer)  # nothing added
    untrained = tmp_path / "untrained"
    model.save_pretrained(untrained)
    tokenizer.save_pretrained(untrained)
    write_spec(spec, untrained)
    got = PRM.from_pretrained(untrained).score(q, steps)
    assert got == pytest.approx(PolicyVerifier.from_pretrained(smollm2).score(q, steps), rel=1e-3, abs=1e-6)
    data = tmp_path / "rows.jsonl"
    rows = [{"prompt": q, "completions": steps, "labels": [True, True]},
            {"prompt": q, "completions": ["94 * 3 = 292", "Answer: 292"], "labels": [False, False]}]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = _train(capsys, "step.yaml", smollm2, tmp_path / "prm", "head=result", "input_format=policy",
                 f"dataset.path={data}", "dataset.format=math-shepherd")  # fmt: skip
    prm = PRM.from_pretrained(out)
    assert prm.spec.head == "result"
    assert prm.model.get_input_embeddings().weight.data_ptr() == prm.model.get_output_embeddings().weight.data_ptr()
    one_pass = prm.score(q, steps)
    assert len(one_pass) == 2 and one_pass == pytest.approx(prm.score_prefixes(q, steps), rel=1e-3, abs=1e-6)
