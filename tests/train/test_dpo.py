"""DPO's preference pairs (train/dpo.py): ``synthetic`` trains on the split's own rows as before; ``policy`` samples the
starting model, writes the pairs before training, trains on them and reuses them on resume; bad values are refused
before any model loads. Every run is the tiny test model for one or two steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.grading.arith import ArithGrader
from posttrainlab.label.policy_pairs import PAIRS, SUMMARY
from posttrainlab.train import dpo
from posttrainlab.train.common import load_records
from posttrainlab.train.recipes import DPORecipe

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/arith/dpo.yaml"


def recipe_args(model, arith_dir, out, *extra: str) -> list[str]:
    return [f"model={model}", f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=4",
            "optim.max_steps=1", "optim.batch_size=4", "optim.save_steps=1", "optim.logging_steps=1",
            "optim.learning_rate=0.01", *extra]  # fmt: skip


def recipe(model, arith_dir, out, *extra: str) -> DPORecipe:
    return load_config(DPORecipe, CONFIG, recipe_args(model, arith_dir, out, *extra))


def pairs_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / PAIRS).read_text().splitlines()]


class RightThenWrong:
    """A ``SamplingBackend`` whose first answer to a prompt is right and every other one off by one."""

    name = "right-then-wrong"

    def __init__(self, records: list[dict]):
        self.answers = {r["prompt"]: r["answer"] for r in records}

    def generate(self, prompts, *, n=1, seed=0, **_):
        return [[f"Answer: {self.answers[p[0]['content']] + (i > 0)}" for i in range(n)] for p in prompts]


class NoBackend:
    name = "none"

    def generate(self, *args, **kwargs):
        raise AssertionError("sampled although the pairs could be reused")


def test_synthetic_trains_on_the_split_rows_as_they_are(arith_dir, tiny_model, tmp_path, monkeypatch):
    seen = {}

    def capture(trainer_cls, recipe, model, tokenizer, args, rows, **extra):
        seen["rows"] = rows
        raise KeyboardInterrupt

    monkeypatch.setattr(dpo, "trl_trainer", capture)
    r = recipe(tiny_model, arith_dir, tmp_path / "dpo")
    assert r.preference.source == "synthetic"
    with pytest.raises(KeyboardInterrupt):
        dpo.train_dpo(r)
    split = load_records(r.dataset)
    assert seen["rows"][0] == {
        "prompt": [{"role": "user", "content": split[0]["prompt"]}],
        "chosen": [{"role": "assistant", "content": split[0]["chosen"]}],
        "rejected": [{"role": "assistant", "content": split[0]["rejected"]}],
    }
    assert len(seen["rows"]) == 4
    assert not (tmp_path / "dpo").exists()  # nothing sampled, nothing written before the trainer


def test_policy_pairs_from_the_tiny_model_train(arith_dir, tiny_model, tmp_path):
    """The real sampling path (TransformersBackend on the tiny model; its chosen are the reference solutions)."""
    out = tmp_path / "dpo"
    dpo.train_dpo(recipe(tiny_model, arith_dir, out, "preference.source=policy", "preference.k=2",
                         "preference.max_new_tokens=8"))  # fmt: skip
    pairs, split = pairs_of(out), {r["id"]: r for r in load_records(recipe(tiny_model, arith_dir, out).dataset)}
    grader = ArithGrader()
    assert [p["source_id"] for p in pairs] == list(split)
    for p in pairs:
        answer = split[p["source_id"]]["answer"]
        assert grader.grade(p["chosen"], answer).correct and not grader.grade(p["rejected"], answer).correct
        assert p["rejected_outcome"] == grader.grade(p["rejected"], answer).outcome
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["counts"]["prompts"] == 4 and summary["counts"]["samples"] == 8
    assert summary["settings"]["policy"] == str(tiny_model) and summary["backend"] == "transformers"
    train = json.loads((out / "train_summary.json").read_text())
    assert train["records"] == len(pairs) and train["global_step"] == 1


def test_policy_pairs_are_written_first_and_reused_on_resume(arith_dir, tiny_model, tmp_path, capsys):
    out = tmp_path / "dpo"
    policy = ("preference.source=policy", "preference.k=2")
    split = load_records(recipe(tiny_model, arith_dir, out).dataset)
    dpo.train_dpo(recipe(tiny_model, arith_dir, out, *policy), backend=RightThenWrong(split))
    pairs = pairs_of(out)
    assert [(p["id"], p["chosen"], p["rejected"], p["chosen_source"]) for p in pairs] == [
        (f"{r['id']}-0", f"Answer: {r['answer']}", f"Answer: {r['answer'] + 1}", "policy") for r in split
    ]
    assert json.loads((out / SUMMARY).read_text())["counts"]["prompts_without_correct"] == 0

    capsys.readouterr()
    dpo.train_dpo(recipe(tiny_model, arith_dir, out, *policy, "optim.max_steps=2"), backend=NoBackend())
    said = capsys.readouterr().out
    assert "dpo: reusing 4 on-policy pairs" in said and "dpo: resuming from" in said
    train = json.loads((out / "train_summary.json").read_text())
    assert train["resumed_from"] == str(out / "checkpoint-1") and train["global_step"] == 2
    assert pairs_of(out) == pairs

    with pytest.raises(BadInput, match=r"preference\.k 2 -> 3"):  # check_run sees the new fields
        dpo.train_dpo(recipe(tiny_model, arith_dir, out, *policy, "preference.k=3"), backend=NoBackend())


def test_a_run_killed_after_sampling_starts_again_with_its_pairs(arith_dir, tiny_model, tmp_path, monkeypatch):
    out = tmp_path / "dpo"
    policy = ("preference.source=policy", "preference.k=2")
    split = load_records(recipe(tiny_model, arith_dir, out).dataset)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(dpo, "build_trainer", killed)
        with pytest.raises(KeyboardInterrupt):
            dpo.train_dpo(recipe(tiny_model, arith_dir, out, *policy), backend=RightThenWrong(split))
    assert sorted(p.name for p in out.iterdir()) == sorted([PAIRS, SUMMARY, "recipe.yaml", "pairs"])  # pairs/: card
    dpo.train_dpo(recipe(tiny_model, arith_dir, out, *policy), backend=NoBackend())  # not refused, not resampled
    assert json.loads((out / "train_summary.json").read_text())["records"] == 4


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (("preference.source=bogus",), "preference.source='bogus': choose one of synthetic, policy, step"),
        (("preference.source=policy", "preference.k=1"), "preference.k=1: need at least 2 samples"),
    ],
)
def test_bad_values_are_refused_before_any_model_loads(capsys, arith_dir, tmp_path, bad, message):
    out = tmp_path / "dpo"
    missing = tmp_path / "no-model"  # checked after the preference values: their message comes first
    code, _, err = cli(capsys, "train", "dpo", "--config", str(CONFIG), *recipe_args(missing, arith_dir, out, *bad))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not out.exists()


def test_sft_weight_adds_the_chosen_answers_nll_to_the_dpo_loss(arith_dir, tiny_model, tmp_path):
    """RPO: the loss is DPO + sft_weight x NLL(chosen); on one batch it grows linearly in the weight, by a positive
    term (an NLL), and weight 0 is DPO alone (one loss type, as before the field existed)."""
    import torch

    losses = {}
    for weight in (0, 1, 2):
        trainer, _ = dpo.build_trainer(recipe(tiny_model, arith_dir, tmp_path / f"w{weight}", f"sft_weight={weight}"))
        assert trainer.args.loss_type == (["sigmoid", "sft"] if weight else ["sigmoid"])
        assert trainer.args.loss_weights == ([1.0, float(weight)] if weight else None)
        trainer.model.eval()
        with torch.no_grad():
            batch = next(iter(trainer.get_train_dataloader()))
            losses[weight] = float(trainer.compute_loss(trainer.model, batch))
    nll = losses[1] - losses[0]
    assert nll > 0.1
    assert losses[2] - losses[0] == pytest.approx(2 * nll, rel=1e-4)


def test_a_negative_sft_weight_is_refused(capsys, arith_dir, tiny_model, tmp_path):
    out = tmp_path / "dpo"
    code, _, err = cli(capsys, "train", "dpo", "--config", str(CONFIG),
                       *recipe_args(tiny_model, arith_dir, out, "sft_weight=-1"))  # fmt: skip
    assert code == 2 and "sft_weight=-1" in err and "must be 0" in err
    assert not out.exists()


class FirstLineWrong:
    """Two answers per arith-v1 prompt, both wrong at line 0: the reference with its first result off by one (the
    wrong line has more after it), and a lone wrong ``Answer:`` line (the wrong line is the last)."""

    name = "first-line-wrong"

    def generate(self, prompts, *, n=1, **_):
        from posttrainlab.data.arith.steps import parse_question, split_steps

        out = []
        for p in prompts:
            problem = parse_question(p[0]["content"])
            lines = split_steps(problem.solution)
            left, _, result = lines[0].rpartition(" = ")
            off = "\n".join([f"{left} = {int(result) + 1}", *lines[1:]])
            out.append(([off, f"Answer: {problem.answer + 1}"] * n)[:n])
        return out


def test_step_pairs_train_on_the_wrong_line_alone(arith_dir, tiny_model, tmp_path):
    """``preference.source=step``: the prompt holds the chat-templated question and the right lines, the completions
    are one line each; a line followed by more ends without TRL's EOS, a last line keeps it."""
    out = tmp_path / "dpo"
    r = recipe(tiny_model, arith_dir, out, "preference.source=step", "preference.k=2", "preference.pairs_per_prompt=2")
    dpo.train_dpo(r, backend=FirstLineWrong())
    pairs = pairs_of(out)
    assert len(pairs) == 8 and {p["step"] for p in pairs} == {0} and {p["prefix"] for p in pairs} == {""}
    assert json.loads((out / "train_summary.json").read_text())["records"] == 8

    with pytest.raises(BadInput, match="needs the sampled step pairs"):  # the split's rows are not step pairs
        dpo.build_trainer(r)
    trainer, _ = dpo.build_trainer(r, pairs)
    tok, eos = trainer.processing_class, trainer.processing_class.eos_token
    for pair, row in zip(pairs, trainer.train_dataset, strict=True):
        question = tok.apply_chat_template(dpo.user(pair["prompt"]), tokenize=False, add_generation_prompt=True)
        assert tok.decode(row["prompt_ids"]) == question
        assert pair["chosen"].endswith("\n") and tok.decode(row["chosen_ids"]) == pair["chosen"]  # no EOS
        last = not pair["rejected"].endswith("\n")
        assert tok.decode(row["rejected_ids"]) == pair["rejected"] + (eos if last else "")
    assert sum(not p["rejected"].endswith("\n") for p in pairs) == 4  # both kinds were checked
