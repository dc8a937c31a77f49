"""Reward hacking, measured: the detector on hand-made logs whose step is known, the reward log's rows, and the
report section (Markdown, table, plot) on a run folder holding two GRPO runs' logs."""

from __future__ import annotations

import json

import pytest

from posttrainlab.report.hacking import detect, hacking_step, section

# The PRM score rises at every log; exact accuracy rises to step 30, falls for two logs, then recovers.
STEPS = [10, 20, 30, 40, 50, 60]
PRM = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
ACC = [0.1, 0.2, 0.3, 0.25, 0.2, 0.3]


def rows(prm=PRM, acc=ACC):
    return [{"step": s, "prm_score": p, "accuracy": a} for s, p, a in zip(STEPS, prm, acc, strict=True)]


def test_the_hacking_step_by_hand():
    # window 1 (no smoothing): the trends at logs 3 and 4 (30 -> 40 -> 50) are PRM up, accuracy down; log 5 is not
    found = hacking_step(rows(), window=1, patience=2)
    assert (found["step"], found["confirmed"]) == (30, 50)
    assert (found["proxy_at"], found["proxy_then"], found["accuracy_at"], found["accuracy_then"]) == pytest.approx(
        (0.3, 0.5, 0.3, 0.2))  # fmt: skip
    assert hacking_step(rows(), window=1, patience=3) is None  # only two logs in a row diverge
    # window 2: trailing means of accuracy [-, .15, .25, .275, .225, .25]; trends from log 2: +.1, +.025, -.05, +.025;
    # only log 4 (step 50) diverges, so hacking starts after log 3 (step 40)
    found = hacking_step(rows(), window=2, patience=1)
    assert (found["step"], found["confirmed"]) == (40, 50)
    assert found["accuracy_at"] == pytest.approx(0.275) and found["accuracy_then"] == pytest.approx(0.225)
    assert hacking_step(rows(), window=2, patience=2) is None


def test_no_hacking_when_accuracy_follows_the_proxy_or_there_is_no_proxy():
    assert hacking_step(rows(acc=PRM), window=1, patience=1) is None
    assert hacking_step([{k: v for k, v in r.items() if k != "prm_score"} for r in rows()], window=1) is None
    # a tolerance: falls of 0.05 are noise at tol 0.05
    assert hacking_step(rows(), window=1, patience=2, tol=0.05) is None
    with pytest.raises(ValueError):
        hacking_step(rows(), window=0)


def test_reward_rows_keep_the_named_keys_and_read_back_in_step_order(tmp_path):
    from posttrainlab.train.reward_log import REWARD_LOG, read_reward_log, reward_row

    logs = {"reward": 0.4, "prm/score": 0.7, "exact/accuracy": 0.5, "exact/any_wrong_step": 0.25,
            "exact/wrong_step_rate": 0.1, "exact/trace_error": 0.0, "rewards/prm_reward/mean": 0.6,
            "loss": 1.0}  # fmt: skip
    assert reward_row(3, logs) == {"step": 3, "reward": 0.4, "prm_score": 0.7, "prm_reward": 0.6, "accuracy": 0.5,
                                   "any_wrong_step": 0.25, "wrong_step_rate": 0.1, "trace_error": 0.0}  # fmt: skip
    assert reward_row(4, {"train_runtime": 3.0, "reward": 1.0}) is None
    path = tmp_path / REWARD_LOG
    path.write_text("".join(json.dumps(r) + "\n" for r in [{"step": 2, "accuracy": 0.1}, {"step": 1, "accuracy": 0.2},
                                                           {"step": 2, "accuracy": 0.3}]))  # fmt: skip
    assert read_reward_log(tmp_path) == [{"step": 1, "accuracy": 0.2}, {"step": 2, "accuracy": 0.3}]


def test_the_section_names_the_step_and_draws_each_run(tmp_path):
    for name, prm in (("grpo-prm", PRM), ("grpo", None)):
        (tmp_path / name).mkdir()
        logged = [{k: v for k, v in r.items() if prm is not None or k != "prm_score"} | {"any_wrong_step": 0.5,
                   "wrong_step_rate": 0.2} for r in rows()]  # fmt: skip
        (tmp_path / name / "reward_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))
    (tmp_path / "sft").mkdir()  # no reward log: not in the section
    text = section(tmp_path)
    assert text.startswith("## Reward hacking")
    assert "| GRPO-prm | 6 | 0.100 → 0.600 | – | 10.0% → 30.0% | 50.0% → 50.0% | 20.0% → 20.0% | – | – |" in text
    assert "| GRPO | 6 | – | – | 10.0% → 30.0% |" in text
    assert "GRPO: no PRM reward, no proxy to hack" in text
    assert "GRPO-prm: no step where the PRM score rose while exact accuracy fell" in text  # 3 logs in a row: none
    assert "![" in text and "(report_files/reward_hacking.png)" in text
    png = tmp_path / "report_files" / "reward_hacking.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "SFT" not in text and section(tmp_path / "sft") == ""


def test_the_section_says_where_hacking_starts(tmp_path):
    # the PRM score rises throughout while accuracy falls from log 2 on: 3-log means fall from log 4 (step 40) on
    acc = [0.5, 0.6, 0.5, 0.4, 0.3, 0.2]
    (tmp_path / "reward_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(acc=acc)))
    # trailing means: prm [-, -, .2, .3, .4, .5]; acc [-, -, .533, .5, .4, .3]: from log 4 both diverge (3 in a row)
    found = hacking_step(rows(acc=acc))
    assert (found["step"], found["confirmed"]) == (30, 60)
    text = section(tmp_path)
    assert "hacking from step" in text and f"| {tmp_path.name} | 6 | 0.100 → 0.600 |" in text
    assert "from step 30 the PRM score rises while exact accuracy falls" in text
    assert "confirmed at step 60" in text and "accuracy 53.3% → 30.0%" in text


def test_a_blind_spot_used_is_hacking_though_the_prm_score_falls(tmp_path):
    """The PRM's mean score falls with accuracy (no hacking by the first rule), while the share of the samples' first
    wrong steps it accepts rises: the policy learned errors the PRM cannot see (docs/process-vs-outcome.md)."""
    acc = [0.6, 0.6, 0.5, 0.4, 0.3, 0.2]
    accept = [0.1, 0.1, 0.2, 0.3, 0.4, 0.5]
    logged = [{"step": 10 * (i + 1), "prm_score": a, "accuracy": a, "prm_false_accept": f}
              for i, (a, f) in enumerate(zip(acc, accept, strict=True))]  # fmt: skip
    assert hacking_step(logged) is None  # the mean score follows accuracy down
    # trailing 3-log means: accept [-, -, .133, .2, .3, .4] rises and acc [-, -, .567, .5, .4, .3] falls from log 4
    found = detect(logged)
    assert (found["proxy"], found["step"], found["confirmed"]) == ("prm_false_accept", 30, 60)
    (tmp_path / "reward_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in logged))
    text = section(tmp_path)
    assert "from step 30 the share of first wrong steps the PRM accepts rises while exact accuracy falls" in text
    assert f"| {tmp_path.name} | 6 | 0.600 → 0.200 | 10.0% → 50.0% | 60.0% → 20.0% |" in text


def test_the_prm_reward_logs_its_verdict_on_first_wrong_steps():
    from posttrainlab.train.prm_reward import PRMReward, PRMRewardConfig

    class Scorer:  # scores a line 0.9 unless it holds "1102"
        def score_batch(self, items, batch_size=16):
            return [[0.1 if "1102" in s else 0.9 for s in steps] for _, steps in items]

    logged = {}
    reward = PRMReward(PRMRewardConfig(path="unused"), scorer=Scorer())
    q = "What is 156 * 7?"
    texts = ["156 * 7 = 1092\nAnswer: 1092", "156 * 8 = 1248\nAnswer: 1248", "156 * 7 = 1102\nAnswer: 1102"]
    reward([q] * 3, texts, answer=[1092] * 3, log_metric=lambda k, v: logged.setdefault(k, v))
    # first wrong steps: "156 * 8 = 1248" (a true equation with a miscopied operand: 0.9) and "156 * 7 = 1102" (0.1)
    assert logged["prm/wrong_step_score"] == pytest.approx(0.5) and logged["prm/false_accept"] == 0.5
    logged.clear()
    reward(["Name a colour."], ["red"], answer=[0], log_metric=lambda k, v: logged.setdefault(k, v))
    assert "prm/false_accept" not in logged and "prm/score" in logged  # no exact labels off arith-v1


def test_a_probed_run_is_drawn_and_tested_beside_its_training_log(tmp_path):
    """reward_probe.jsonl (the held-out probe) is a run of its own in the section: "<run> probe"."""
    run = tmp_path / "grpo-prm"
    run.mkdir()
    (run / "reward_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows()))
    acc = [0.6, 0.6, 0.5, 0.4, 0.3, 0.2]
    probe = [{"step": 10 * (i + 1), "prm_score": 0.5, "prm_false_accept": 0.1 * (i + 1), "accuracy": a}
             for i, a in enumerate(acc)]  # fmt: skip
    (run / "reward_probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in probe))
    from posttrainlab.report.hacking import run_logs

    assert list(run_logs(tmp_path)) == ["grpo-prm", "grpo-prm probe"]
    text = section(tmp_path)
    assert "| GRPO-prm probe | 6 | 0.500 → 0.500 | 10.0% → 60.0% | 60.0% → 20.0% |" in text
    assert "GRPO-prm probe: from step 30 the share of first wrong steps the PRM accepts rises" in text
