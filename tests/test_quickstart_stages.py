"""The quickstart's stage counter: ``planned_stages`` per config, and ``StageLog`` run over fake stage functions on a
fake clock: its console lines, ``OUT/quickstart.log`` and ``OUT/run.json``."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from posttrainlab.errors import BadInput
from posttrainlab.quickstart import QuickstartConfig, StageLog, planned_stages, quickstart_config, stage_log

ALL = ["prepare", "pretrain", "sft", "eval-sft", "rft", "eval-rft", "sft-continued", "eval-sft-continued",
       "arith-prm", "prm", "eval-prm", "best-of-n", "beam-search", "report"]  # fmt: skip


def test_the_plan_of_each_shipped_preset_and_of_switches():
    assert planned_stages(QuickstartConfig()) == [s for s in ALL if "rft" not in s and "continued" not in s]
    assert planned_stages(quickstart_config("default", ["methods=[rft,sft-continued]"])) == ALL
    smoke = [s for s in ALL if s not in ("rft", "eval-rft")]  # tests/test_quickstart.py's run.json names
    assert planned_stages(quickstart_config("smoke")) == smoke
    smollm2 = quickstart_config("smollm2")
    assert planned_stages(smollm2)[:2] == ["prepare", "import"] and "pretrain" not in planned_stages(smollm2)
    cfg = QuickstartConfig(methods=["grpo"], base_model="runs/my-model")  # a folder: no import stage
    cfg.eval.eval_base, cfg.process.enabled = True, False
    assert planned_stages(cfg) == ["prepare", "eval-base", "sft", "eval-sft", "grpo", "eval-grpo", "report"]
    cfg.seeds = 2  # each seed of each method, SFT's too, right after its first seed
    assert planned_stages(cfg) == ["prepare", "eval-base", "sft", "eval-sft", "sft-s1", "eval-sft-s1", "grpo",
                                   "eval-grpo", "grpo-s1", "eval-grpo-s1", "report"]  # fmt: skip


def test_each_seed_trains_a_copy_of_the_recipe_with_the_next_seed():
    from posttrainlab.errors import BadInput
    from posttrainlab.quickstart import RunLayout, check_config, method_recipe, place

    cfg = QuickstartConfig(seeds=2)
    place(cfg, RunLayout(Path("OUT")))
    first, second = method_recipe(cfg, "dpo-policy", 0), method_recipe(cfg, "dpo-policy", 1)
    assert (first.output_dir, second.output_dir) == ("OUT/dpo-policy", "OUT/dpo-policy-s1")
    assert (first.preference.source, second.optim.seed - first.optim.seed) == ("policy", 1)
    assert second.preference.seed == first.preference.seed + 1 and second.model == "OUT/sft"
    assert cfg.dpo.preference.source == "synthetic" and method_recipe(cfg, "sft", 1).output_dir == "OUT/sft-s1"
    for bad in (QuickstartConfig(methods=["ppo"]), QuickstartConfig(seeds=0)):
        with pytest.raises(BadInput):
            check_config(bad)


@pytest.fixture
def clock(monkeypatch):
    """StageLog's clock: starts at 1000 s and moves only when a fake stage says how long it took."""
    now = [1000.0]
    monkeypatch.setattr(stage_log, "time", SimpleNamespace(time=lambda: now[0]))
    return now


def small_cfg() -> QuickstartConfig:
    cfg = QuickstartConfig(methods=["dpo"])
    cfg.process.enabled = False
    return cfg  # prepare, pretrain, sft, eval-sft, dpo, eval-dpo, report: 7 stages


def console() -> Console:
    return Console(file=io.StringIO(), width=100, color_system=None)


def lines(con: Console) -> list[str]:
    """What the console printed, a rule's line drawing (``──── stage 2/7: pretrain ────``) as ``== ... ==``."""
    return [line.strip("─ ").join(("== ", " ==")) if line.startswith("─") else line.rstrip()
            for line in con.file.getvalue().splitlines()]  # fmt: skip


def takes(clock, seconds: float):
    def fn() -> None:
        clock[0] += seconds

    return fn


def log_rows(out) -> list[list[str]]:
    text = (out / "quickstart.log").read_text(encoding="utf-8")
    return [line.split("\t")[1:] for line in text.splitlines() if not line.startswith("#")]  # less the time


def test_stage_headers_end_lines_and_the_log(tmp_path, clock):
    con = console()
    run = StageLog(tmp_path, small_cfg())
    run.stage("prepare", True, takes(clock, 99), con)  # done before: not run
    run.stage("pretrain", False, takes(clock, 150), con)
    run.stage("sft", False, takes(clock, 3), con)
    assert lines(con) == [
        "stage 1/7: prepare cached (already done, reusing it)",
        "== stage 2/7: pretrain ==",
        "stage 2/7: pretrain done in 2:30 (total 2:30)",
        "== stage 3/7: sft ==",
        "stage 3/7: sft done in 3.0 s (total 2:33)",
    ]
    assert log_rows(tmp_path) == [
        ["stage 1/7", "prepare", "cached", "0.0"],
        ["stage 2/7", "pretrain", "start", "-"],
        ["stage 2/7", "pretrain", "done", "150.0"],
        ["stage 3/7", "sft", "start", "-"],
        ["stage 3/7", "sft", "done", "3.0"],
    ]
    header = (tmp_path / "quickstart.log").read_text().splitlines()[0]
    assert header.startswith("# ") and header.endswith(
        "quickstart preset=default: 7 stages: prepare pretrain sft eval-sft dpo eval-dpo report"
    )
    stages = json.loads((tmp_path / "run.json").read_text())["stages"]  # as before: the report reads them
    assert stages == [{"name": "prepare", "seconds": 0.0, "status": "cached", "run": 1},
                      {"name": "pretrain", "seconds": 150.0, "status": "done", "run": 1},
                      {"name": "sft", "seconds": 3.0, "status": "done", "run": 1}]  # fmt: skip


def test_a_second_run_says_how_long_the_rest_took_last_time(tmp_path, clock):
    first = StageLog(tmp_path, small_cfg())
    for name, seconds in zip(planned_stages(small_cfg()), (1, 600, 120, 30, 60, 30, 5), strict=True):
        first.stage(name, False, takes(clock, seconds), console())
    con = console()
    again = StageLog(tmp_path, small_cfg())  # the rest after pretrain: 120 + 30 + 60 + 30 + 5 s = 4:05
    again.stage("prepare", True, takes(clock, 0), con)
    again.stage("pretrain", False, takes(clock, 12), con)
    assert lines(con)[-1] == "stage 2/7: pretrain done in 0:12 (total 0:12; rest ~4:05 by the last run)"
    text = (tmp_path / "quickstart.log").read_text()
    assert text.count("# ") == 2 and text.count("\tdone\t") == 8  # appended, not rewritten


def test_stages_are_numbered_in_the_plans_order_and_nothing_else_runs(tmp_path, clock):
    run = StageLog(tmp_path, small_cfg())
    run.stage("prepare", False, takes(clock, 1), console())
    with pytest.raises(RuntimeError, match="stage sft run out of the plan's order .next planned: pretrain"):
        run.stage("sft", False, takes(clock, 1), console())  # the runner walks the plan: this is a bug


def test_a_failing_stage_is_logged_and_raises(tmp_path, clock):
    run = StageLog(tmp_path, small_cfg())

    def boom() -> None:
        clock[0] += 7
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        run.stage("prepare", False, boom, console())
    assert log_rows(tmp_path) == [["stage 1/7", "prepare", "start", "-"], ["stage 1/7", "prepare", "failed", "7.0"]]
    assert not (tmp_path / "run.json").exists()  # run.json records finished stages only, as before


@pytest.mark.parametrize("split", ["test", "dev"])
def test_best_of_n_and_beam_search_run_on_the_split_the_policies_are_evaluated_on(monkeypatch, split):
    """Tuning with ``eval.split=dev`` must not read test: best-of-N and beam search follow ``eval.split`` (they once
    stayed on test), and the split joins their stage records only when it is not test."""
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.runners import beam_search, best_of_n

    seen = {}
    monkeypatch.setattr(best_of_n, "run", lambda *a, **k: seen.setdefault("best-of-n", a[4].split))
    monkeypatch.setattr(beam_search, "run", lambda *a, **k: seen.setdefault("beam-search", a[4].split))
    cfg = QuickstartConfig()
    cfg.eval.split = split
    place(cfg, RunLayout(Path("OUT")))
    chosen = {s.name: s for s in plan(Run(cfg, RunLayout(Path("OUT")))) if s.name in ("best-of-n", "beam-search")}
    for stage in chosen.values():
        stage.run()
        assert ("split" in stage.settings) == (split != "test")
    assert seen == {"best-of-n": split, "beam-search": split}


def test_a_recipe_field_added_later_joins_the_stage_record_only_when_set():
    """``dpo.sft_weight`` (RPO) came after run folders recorded their dpo stages: at its default (0, DPO alone) the
    record is the one made before it existed, so those folders stay current; set, it is recorded (and changes the
    stage's hash)."""
    from dataclasses import asdict

    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.quickstart.record import _plain

    def dpo_record(cfg: QuickstartConfig) -> dict:
        place(cfg, RunLayout(Path("OUT")))
        stage = next(s for s in plan(Run(cfg, RunLayout(Path("OUT")))) if s.name == "dpo")
        return _plain(stage.settings, "OUT")

    cfg = QuickstartConfig(methods=["dpo"])
    place(cfg, RunLayout(Path("OUT")))
    before = {k: v for k, v in _plain(asdict(cfg.dpo), "OUT").items() if k != "sft_weight"}
    before["optim"] = {k: v for k, v in before["optim"].items() if k != "bf16"}  # the same rule (OPTIM_ADDED)
    assert dpo_record(QuickstartConfig(methods=["dpo"])) == before
    rpo = QuickstartConfig(methods=["dpo"])
    rpo.dpo.sft_weight = 1.0
    assert dpo_record(rpo) == before | {"sft_weight": 1.0}


def test_arith_prm_train_prompts_reach_the_build_and_join_its_record_only_when_set(monkeypatch):
    """``process.train_prompts`` (more RL prompts for the PRM's data) came after run folders recorded their arith-prm
    stage: at its default the record is the old one; set, the build samples those splits and the record says so."""
    from copy import deepcopy

    from posttrainlab.data.arith.prm_labels import ArithPRMOptions
    from posttrainlab.label import arith_prm
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan

    built = {}
    monkeypatch.setattr(arith_prm, "build", lambda policy, data, out, settings, **_: built.setdefault("s", settings))

    def stage(cfg: QuickstartConfig):
        place(cfg, RunLayout(Path("OUT")))
        return next(s for s in plan(Run(cfg, RunLayout(Path("OUT")))) if s.name == "arith-prm")

    old_cfg = QuickstartConfig()  # what runs recorded before the option did: rl_train's prompts, first-error labels
    old_cfg.process.train_prompts, old_cfg.process.labelling = ["rl_train"], ArithPRMOptions()
    old = stage(old_cfg)
    assert set(old.settings) == {"k", "limit", "temperature", "references", "reference_limit"}
    more = deepcopy(old_cfg)
    more.process.train_prompts = ["rl_train_1500", "rl_extra"]
    chosen = stage(more)
    assert chosen.settings == old.settings | {"train_prompts": ["rl_train_1500", "rl_extra"]}
    assert set(stage(QuickstartConfig()).settings) == set(old.settings) | {"train_prompts", "labelling"}
    chosen.run()
    assert built["s"].train_prompts == ("rl_train_1500", "rl_extra")


def test_process_orm_adds_an_outcome_model_that_scores_best_of_n_beside_the_prm(monkeypatch):
    """``process.orm=true`` (issue #39): an ``orm`` stage, the PRM's recipe with outcome labels on the same data, and
    best-of-N scoring its samples with both; off, the stage records are those of runs made before it existed."""
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.runners import best_of_n

    def stages(overrides):
        cfg = quickstart_config("default", overrides)
        place(cfg, RunLayout(Path("OUT")))
        return {s.name: s for s in plan(Run(cfg, RunLayout(Path("OUT"))))}

    off, on = stages([]), stages(["process.orm=true"])
    assert "orm" not in off and list(on).index("orm") == list(on).index("best-of-n") - 1
    orm, prm = on["orm"].settings, on["prm"].settings
    assert (orm["supervision"], prm["supervision"], orm["output_dir"]) == ("outcome", "step", "OUT/orm")
    assert (orm["dataset"]["path"], orm["model"]) == (prm["dataset"]["path"], prm["model"])  # same samples, same start
    assert orm["length_grouping"] is prm["length_grouping"] is True  # recorded: not the runs before it (plan.PRM_ADDED)
    assert on["best-of-n"].settings == off["best-of-n"].settings | {"orm": True}
    assert on["best-of-n"].after[-1] == "orm" and "orm" not in off["best-of-n"].after
    seen = {}
    monkeypatch.setattr(best_of_n, "run", lambda *a, orm=None, **k: seen.setdefault("orm", orm))
    on["best-of-n"].run()
    assert seen["orm"] == Path("OUT/orm")
    with pytest.raises(BadInput, match="orm=true: an ORM trains on whole solutions"):
        quickstart_config("default", ["process.orm=true", "process.labelling.labels=first-error"])


def test_grpo_prm_trains_grpos_recipe_with_the_runs_prm_once_the_prm_exists():
    """``methods=[grpo, grpo-prm]`` (issue #39 item 6): grpo-prm is grpo's recipe with ``OUT/prm`` as its
    ``prm_reward``, trained after the PRM (methods ran before it), paired with GRPO in the report; refused without
    the process stages."""
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.report.paired import HEAD_TO_HEAD

    cfg = quickstart_config("default", ["methods=[grpo,grpo-prm]", "grpo.prm_reward.mode=step"])
    place(cfg, RunLayout(Path("OUT")))
    stages = {s.name: s for s in plan(Run(cfg, RunLayout(Path("OUT"))))}
    names = list(stages)
    assert names.index("grpo") < names.index("arith-prm") < names.index("prm") < names.index("grpo-prm")
    assert names[names.index("grpo-prm") + 1] == "eval-grpo-prm" and names[-1] == "report"
    grpo, with_prm = stages["grpo"].settings, stages["grpo-prm"].settings
    assert grpo["prm_reward"].path is None and with_prm["prm_reward"].path == "OUT/prm"
    assert with_prm["output_dir"] == "OUT/grpo-prm" and with_prm["prm_reward"].mode == "step"
    same = {k: v for k, v in with_prm.items() if k not in ("output_dir", "prm_reward")}
    assert same == {k: v for k, v in grpo.items() if k not in ("output_dir", "prm_reward")}  # the same GRPO
    assert stages["grpo-prm"].after == ("prepare", "sft", "prm")
    assert ("grpo", "grpo-prm") in HEAD_TO_HEAD
    with pytest.raises(BadInput, match="methods: grpo-prm reads the run's PRM; it needs process.enabled=true"):
        quickstart_config("default", ["methods=[grpo-prm]", "process.enabled=false"])


def test_rft_answer_is_rfts_recipe_keeping_every_right_answer_paired_with_rft():
    """``methods=[rft,rft-answer,...]`` (issue #39 item 6): rft-answer differs from rft in ``rejection.filter``
    (and its folder) only, trains from ``OUT/sft`` beside rft, and the report pairs the two; a run whose rft keeps
    right answers already is refused, since the two would be one recipe."""
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.report.paired import HEAD_TO_HEAD

    cfg = quickstart_config("default", ["methods=[rft,rft-answer,sft-continued]"])
    place(cfg, RunLayout(Path("OUT")))
    stages = {s.name: s for s in plan(Run(cfg, RunLayout(Path("OUT"))))}
    names = list(stages)
    assert names[names.index("rft-answer") + 1] == "eval-rft-answer" and names.index("rft-answer") < names.index("prm")
    rft, answer = stages["rft"].settings, stages["rft-answer"].settings
    assert (rft["rejection"].filter, answer["rejection"].filter) == ("process", "answer")
    assert answer["output_dir"] == "OUT/rft-answer" and answer["model"] == "OUT/sft"
    strip = ("output_dir", "rejection")
    assert {k: v for k, v in answer.items() if k not in strip} == {k: v for k, v in rft.items() if k not in strip}
    assert replace(answer["rejection"], filter="process") == rft["rejection"]
    assert cfg.rft.rejection.filter == "process"  # the config's own recipe is untouched
    # sft-continued still matches rft's steps, not rft-answer's
    assert stages["sft-continued"].after == ("prepare", "sft", "rft")
    assert ("rft-answer", "rft") in HEAD_TO_HEAD
    with pytest.raises(BadInput, match="rft-answer is rft with rejection.filter=answer"):
        quickstart_config("default", ["methods=[rft,rft-answer]", "rft.rejection.filter=answer"])


def test_grpo_prm_only_is_grpo_with_the_runs_prm_as_its_only_reward():
    """``grpo-prm-only``: grpo's recipe with ``OUT/prm`` as ``prm_reward`` and the grader's weights at 0, after the
    PRM; the report pairs it with GRPO and with GRPO-prm (issue #39 item 6: outcome vs process vs both)."""
    from posttrainlab.quickstart import RunLayout, place
    from posttrainlab.quickstart.plan import Run, plan
    from posttrainlab.report.paired import HEAD_TO_HEAD

    cfg = quickstart_config("default", ["methods=[grpo,grpo-prm,grpo-prm-only]", "grpo.prm_reward.mode=step"])
    place(cfg, RunLayout(Path("OUT")))
    stages = {s.name: s for s in plan(Run(cfg, RunLayout(Path("OUT"))))}
    names = list(stages)
    assert names.index("prm") < names.index("grpo-prm") < names.index("grpo-prm-only")
    both, alone = stages["grpo-prm"].settings, stages["grpo-prm-only"].settings
    assert (alone["rewards"].correctness, alone["rewards"].format) == (0.0, 0.0)
    assert both["rewards"].correctness == 1.0 and cfg.grpo.rewards.correctness == 1.0  # the config's own: untouched
    assert alone["prm_reward"] == both["prm_reward"] and alone["output_dir"] == "OUT/grpo-prm-only"
    assert stages["grpo-prm-only"].after == ("prepare", "sft", "prm")
    assert {("grpo", "grpo-prm-only"), ("grpo-prm", "grpo-prm-only")} <= set(HEAD_TO_HEAD)
    with pytest.raises(BadInput, match="grpo-prm-only reads the run's PRM"):
        quickstart_config("default", ["methods=[grpo-prm-only]", "process.enabled=false"])
