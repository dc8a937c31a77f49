"""The one PRM format: exact text, one label per separator, span labels inside <HAL> spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.models.tokenizer import build_tokenizer
from posttrainlab.prm.examples import make_examples, read_items
from posttrainlab.prm.format import encode_solution, format_solution
from posttrainlab.prm.losses import IGNORE
from posttrainlab.prm.spec import PRMSpec
from posttrainlab.train.prm_recipe import PRMDataConfig

FORMATS = Path(__file__).resolve().parents[1] / "assets/formats"
SEP = "<extra_0>"


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


def test_plain_and_chat_text_exactly(tok):
    plain = PRMSpec(chat=False)
    text, spans = format_solution(tok, plain, "1+1?", ["1+1 = 2", "Answer: 2"])
    assert text == "1+1?\n1+1 = 2<extra_0>Answer: 2<extra_0>"
    assert [text[a:b] for a, b in spans] == ["1+1 = 2", "Answer: 2"]
    chat = PRMSpec(chat=True, system_prompt="S")
    text, spans = format_solution(tok, chat, "1+1?", ["1+1 = 2", "Answer: 2"])
    assert text == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
        "<|im_start|>assistant\n1+1 = 2<extra_0>Answer: 2<extra_0><|im_end|>\n"
    )
    assert [text[a:b] for a, b in spans] == ["1+1 = 2", "Answer: 2"]


def test_separator_inside_a_step_is_refused(tok):
    with pytest.raises(ValueError, match="step 1 contains the separator"):
        format_solution(tok, PRMSpec(), "q", ["a", f"b{SEP}c"])


@pytest.mark.parametrize("chat", [True, False])
@pytest.mark.parametrize(
    "path,fmt", [("span_good_step.jsonl", "step"), ("ms_list.jsonl", "math-shepherd"), ("pb.jsonl", "processbench")]
)
def test_exactly_one_label_per_separator(tok, chat, path, fmt):
    spec = PRMSpec(chat=chat)
    items = read_items(PRMDataConfig(path=str(FORMATS / path), format=fmt), soft=False)
    examples, dropped = make_examples(tok, spec, items, span_tokens=False, last_only=False, max_length=4096, where="t")
    assert dropped == 0 and len(examples) == len(items)
    sep_id = tok.convert_tokens_to_ids(SEP)
    for item, ex in zip(items, examples, strict=True):
        seps = [i for i, t in enumerate(ex["input_ids"]) if t == sep_id]
        labelled = [i for i, y in enumerate(ex["labels"]) if y != IGNORE]
        assert labelled == seps and len(seps) == len(item.steps)
        assert [ex["labels"][i] for i in seps] == item.targets


def test_step_labels_come_from_the_file(tok):
    rows = [json.loads(line) for line in (FORMATS / "ms_list.jsonl").read_text().splitlines()]
    items = read_items(PRMDataConfig(path=str(FORMATS / "ms_list.jsonl"), format="math-shepherd"), soft=False)
    assert [it.targets for it in items] == [[float(x) for x in r["labels"]] for r in rows]  # every step kept
    items = read_items(PRMDataConfig(path=str(FORMATS / "pb.jsonl"), format="processbench"), soft=False)
    assert [it.targets for it in items] == [[1.0, 0.0], [1.0, 1.0], [0.0]]  # cut after the first error


def test_last_step_only_and_truncation(tok):
    spec = PRMSpec(chat=False)
    items = read_items(PRMDataConfig(path=str(FORMATS / "span_good_step.jsonl"), format="step"), soft=False)
    examples, _ = make_examples(tok, spec, items, span_tokens=False, last_only=True, max_length=4096, where="t")
    for item, ex in zip(items, examples, strict=True):
        labelled = [y for y in ex["labels"] if y != IGNORE]
        assert labelled == item.targets[-1:]
    # cut inside the second step of row 0: only the first separator keeps its label
    enc = encode_solution(tok, spec, items[0].question, items[0].steps)
    cut = enc.separators[1]
    examples, dropped = make_examples(
        tok, spec, items[:1], span_tokens=False, last_only=False, max_length=cut, where="t"
    )
    assert dropped == 0 and len(examples[0]["input_ids"]) == cut
    assert [y for y in examples[0]["labels"] if y != IGNORE] == [1.0]


def _span_examples(tok, chat):
    spec = PRMSpec(chat=chat)
    items = read_items(PRMDataConfig(path=str(FORMATS / "span_good.jsonl"), format="span"), soft=False)
    examples, _ = make_examples(tok, spec, items, span_tokens=True, last_only=False, max_length=4096, where="t")
    return items, examples


def _text(tok, ids):
    return tok.decode(ids)


@pytest.mark.parametrize("chat", [True, False])
def test_span_labels_land_inside_hal_spans(tok, chat):
    items, examples = _span_examples(tok, chat)
    sep_id = tok.convert_tokens_to_ids(SEP)
    # expected wrong text per row: the <HAL> characters within the kept steps
    want_wrong = ["", "15 * 2 / 3 = 5", "4.", "", "", "8", "6" + "squaring doubles"]
    for item, ex, wrong in zip(items, examples, want_wrong, strict=True):
        ids, labels = ex["input_ids"], ex["labels"]
        seps = [i for i, t in enumerate(ids) if t == sep_id]
        assert [labels[i] for i in seps] == item.targets  # the step labels stay on the separators
        zero = [t for i, t in enumerate(ids) if labels[i] == 0.0 and i not in seps]
        assert _text(tok, zero).replace(" ", "") == wrong.replace(" ", "")
        # every step byte is labelled (one token per byte), and nothing else: not the question, not the template
        step_tokens = [t for i, t in enumerate(ids) if labels[i] != IGNORE and i not in seps]
        assert _text(tok, step_tokens) == "".join(item.steps)


def test_span_row_text(tok):
    """Row 1 exactly: the HAL fragment of step 2 is 0, the rest of the three steps is 1."""
    items, examples = _span_examples(tok, False)
    ids, labels = examples[1]["input_ids"], examples[1]["labels"]
    zero = "".join(tok.decode([t]) for t, y in zip(ids, labels, strict=True) if y == 0.0 and t != 259)
    one = "".join(tok.decode([t]) for t, y in zip(ids, labels, strict=True) if y == 1.0 and t != 259)
    assert zero == "15 * 2 / 3 = 5"
    steps = items[1].steps
    assert one == steps[0] + steps[1] + steps[2].replace("15 * 2 / 3 = 5", "")


def test_bad_rows_name_file_and_row(tmp_path):
    with pytest.raises(BadInput, match=r"step_bad.jsonl: row \d+: "):
        read_items(PRMDataConfig(path=str(FORMATS / "step_bad.jsonl"), format="step"), soft=False)
    with pytest.raises(BadInput, match="no such file"):
        read_items(PRMDataConfig(path=str(tmp_path / "missing.jsonl"), format="step"), soft=False)
    with pytest.raises(BadInput, match=r"mc_value.jsonl: row 0: grouped/prefix MC-value training needs a string"):
        read_items(PRMDataConfig(path=str(FORMATS / "mc_value.jsonl"), format="mc-value"), soft=True)
