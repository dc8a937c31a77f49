"""The quickstart methods of the default preset: ``rft`` and the ``sft-continued`` control, with sampled metrics.

sft-continued is rft's fine-tune on the SFT data, from the SFT model, for the steps the run it names took; it must
come after that run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.quickstart import QuickstartConfig, check_config, method_recipe, place, planned_stages
from posttrainlab.quickstart import quickstart_config as preset
from posttrainlab.run_layout import RunLayout

ROOT = Path(__file__).resolve().parents[1]


def test_sft_continued_is_rfts_fine_tune_on_sft_data_for_the_steps_of_the_run_it_names():
    cfg = preset("default", ["seeds=2"])
    place(cfg, RunLayout(Path("OUT")))
    rft, control = method_recipe(cfg, "rft", 1), method_recipe(cfg, "sft-continued", 1)
    assert (rft.model, rft.output_dir, rft.dataset.path, rft.sft_data.path) == (
        "OUT/sft", "OUT/rft-s1", "OUT/data/arith-v1", "OUT/data/arith-v1")  # fmt: skip
    assert (control.model, control.output_dir, control.steps_from) == ("OUT/sft", "OUT/sft-continued-s1", "OUT/rft-s1")
    assert asdict(control.dataset) == asdict(rft.sft_data) and asdict(control.optim) == asdict(rft.optim)
    assert (rft.rejection.seed, control.optim.seed) == (1, 1)


def test_sft_continued_must_follow_the_run_whose_steps_it_matches():
    check_config(QuickstartConfig(methods=["rft", "sft-continued"]))
    check_config(QuickstartConfig(methods=["sft-continued"], continued_steps_from="sft"))
    check_config(QuickstartConfig(methods=["sft-continued"], continued_steps_from=None))
    for methods, source in ((["sft-continued", "rft"], "rft"), (["grpo", "sft-continued"], "rft")):
        with pytest.raises(BadInput, match="continued_steps_from='rft': sft-continued trains as many steps"):
            check_config(QuickstartConfig(methods=methods, continued_steps_from=source))
    cfg = QuickstartConfig(methods=["grpo", "sft-continued"], continued_steps_from="grpo")
    cfg.process.enabled = False
    assert planned_stages(cfg) == ["prepare", "pretrain", "sft", "eval-sft", "grpo", "eval-grpo", "sft-continued",
                                   "eval-sft-continued", "report"]  # fmt: skip


def test_the_rft_sft_continued_and_sampled_eval_stages_run_in_a_run_folder(arith_dir, tiny_model, tmp_path,
                                                                          monkeypatch):  # fmt: skip
    """The stage table's rows as the quickstart runs them, on the tiny model (its samples scripted right)."""
    import json
    import shutil

    from posttrainlab.data.arith.steps import parse_question
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.train import policy_samples

    def right_answers(records, cfg, backend, label):  # an untrained model is never right: script the samples
        return [[{"response": parse_question(r["prompt"]).solution, "correct": True, "outcome": "correct",
                  "parsed": r["answer"]}] * cfg.k for r in records]  # fmt: skip

    monkeypatch.setattr(policy_samples, "graded_samples", right_answers)
    cfg = QuickstartConfig(methods=["rft", "sft-continued"])
    cfg.process.enabled = False
    cfg.rft.dataset.limit, cfg.rft.sft_data.limit, cfg.rft.rejection.k = 4, 8, 2
    o = cfg.rft.optim
    o.batch_size, o.max_steps, o.warmup_ratio, o.learning_rate, o.logging_steps = 4, 2, 0.0, 0.01, 1
    e = cfg.eval
    e.limit, e.samples, e.batch_size, e.max_new_tokens, e.preference_split = 4, 2, 4, 8, None
    layout = RunLayout(tmp_path / "OUT")
    place(cfg, layout, tiny_model)
    shutil.copytree(arith_dir, layout.data)
    shutil.copytree(tiny_model, layout.model("sft"))
    stages = {s.name: s for s in plan(Run(cfg, layout, base=tiny_model))}
    assert stages["sft-continued"].after == ("prepare", "sft", "rft")
    for name in ("rft", "sft-continued", "eval-sft", "eval-rft"):
        stages[name].run()
    rft = json.loads((layout.model("rft") / "train_summary.json").read_text())
    cont = json.loads((layout.model("sft-continued") / "train_summary.json").read_text())
    assert rft["records"] == 4 + 4 and rft["global_step"] == cont["global_step"] == 2  # 4 kept (1 distinct per prompt)
    assert cont["recipe"]["dataset"]["split"] == "sft_train_3k" and cont["recipe"]["steps_from"] == str(
        layout.model("rft")
    )
    sampled = json.loads((layout.eval_dir("rft") / "metrics.json").read_text())["sampled"]
    assert (sampled["n_samples"], sampled["temperature"], sampled["pass_at_1"]["n"]) == (2, 1.0, 4)


@pytest.mark.parametrize(
    "bad, message",
    [("eval.samples=-1", "eval.samples=-1: must be >= 0"), ("eval.sample_temperature=0", "must be greater than 0")],
)
def test_bad_sampled_eval_settings_are_one_line(bad, message):
    with pytest.raises(BadInput, match=message):
        preset("default", [bad])
