"""The report's headline (``report.results``): the Results table from a run's paired comparisons, and the sentence
saying whether the run's base is the README's reference base."""

from __future__ import annotations

import json

from posttrainlab.report.render import to_markdown
from posttrainlab.report.results import base_note, reference, results_blocks, summarize

BASE = "688d805f" + "0" * 56


def overall(a, b, diff, lo, hi, p, n=500):
    return {"overall": {"acc_a": a, "acc_b": b, "diff": diff, "ci": [lo, hi], "mcnemar_p": p, "b": 3, "c": 7, "n": n}}


def run_numbers():
    metrics = {
        "sft": {"accuracy": {"value": 0.632, "n": 500}, "sampled": {"pass_at_1": {"value": 0.5},
                                                                     "maj_at_k": {"value": 0.64}, "n_samples": 8}},
        "rft": {"accuracy": {"value": 0.638, "n": 500}, "sampled": {"pass_at_1": {"value": 0.51},
                                                                     "maj_at_k": {"value": 0.65}, "n_samples": 8}},
    }  # fmt: skip
    comparisons = {
        "methods": {"rft": overall(0.632, 0.638, 0.006, -0.02, 0.032, 0.7315)},
        "best_of_n": {"n": 16, "selectors": {"prm_vote": overall(0.657, 0.694, 0.037, 0.005, 0.069, 0.035, n=300)}},
        "beam_search": overall(0.657, 0.684, 0.027, -0.02, 0.07, 0.28, n=300),
    }
    info = {"preset": "default", "weights": {"base": {"/cache/base/model.safetensors": BASE}}}
    return summarize(info, metrics, comparisons, {"within_problem": {"min": {"pairwise_accuracy": 0.8271}}})


def test_the_table_holds_each_comparison_with_its_reference():
    summary = run_numbers()
    json.dumps(summary, allow_nan=False)  # strict JSON: report_files/results.json
    text = to_markdown(results_blocks(summary))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == [
        "| SFT (greedy, n=500) | 63.2% | 50.0% | 64.0% |  |  |  |",
        "| RFT (greedy, n=500) | 63.8% | 51.0% | 65.0% | SFT | +0.6 [-2.0, +3.2] | 0.732 |",
        "| majority vote@16 (n=300) | 65.7% |  |  |  |  |  |",
        "| PRM-weighted vote@16 | 69.4% |  |  | majority | +3.7 [+0.5, +6.9] | 0.035 |",
        "| beam search | 68.4% |  |  | majority | +2.7 [-2.0, +7.0] | 0.280 |",
    ]
    assert "pass@1 (8 samples)" in rows[0] and "maj@8" in rows[0]
    assert "pairwise accuracy of the PRM (min): 0.827" in text


def test_the_base_is_named_and_compared_with_the_readmes():
    summary = run_numbers()
    ref = reference("default")
    assert ref is not None and len(ref["base_sha256"]) == 64
    same = {**summary, "base_sha256": ref["base_sha256"], "bf16": ref.get("bf16")}
    assert "the README's reference base" in base_note(same) and ref["commit"] in base_note(same)
    other = base_note({**summary, "base_sha256": "ab" * 32})
    assert other.startswith("Base model weights SHA-256 abababababababab…: NOT the README's reference base")
    known = base_note({**summary, "base_sha256": next(iter(ref["known_bases"])) + "0" * 56})
    assert "not the README's reference base" in known and "measured before" in known
    assert "(no reference run for preset 'smoke')" in base_note({**summary, "preset": "smoke"})
    assert base_note({**summary, "base_sha256": None}) is None


def test_the_readmes_numbers_are_promised_only_for_the_reference_runs_settings():
    """A dev run on the reference base printed "every number below should equal the README's" (its stages
    differ: eval on dev, an orm stage); the promise now needs the reference run's stage hashes too."""
    summary, ref = run_numbers(), reference("default")
    same = {**summary, "base_sha256": ref["base_sha256"], "bf16": ref.get("bf16")}
    stages = dict(ref["stages"]) | {"report": "anything"}
    assert "should equal the README's" in base_note(same, stages)
    assert "should equal the README's" in base_note(same, {})  # no stages.json: nothing known to differ
    dev = stages | {"eval-sft": "0" * 16, "orm": "1" * 16}
    dev.pop("beam-search")
    note = base_note(same, dev)
    assert "should equal" not in note and note.endswith(
        "differ from the reference run's (other settings, or a stage only one of the two has): beam-search, "
        "eval-sft, orm; so the README's numbers are not this run's."
    )


def test_the_run_folders_stage_hashes_are_read_as_the_quickstart_writes_them(tmp_path):
    """``stages.json`` is ``{"stages": {name: record}}`` (``quickstart.record``); reading its top level instead gave
    no stages, so a dev run on the reference base was promised the README's numbers."""
    from posttrainlab.report.run_folder import load_run

    ref = reference("default")
    (tmp_path / "run.json").write_text(json.dumps({"preset": "default"}))
    records = {name: {"hash": h, "status": "done"} for name, h in ref["stages"].items()}
    records["eval-sft"] = {"hash": "0" * 16, "status": "done"}
    (tmp_path / "stages.json").write_text(json.dumps({"stages": records}))
    run = load_run(tmp_path)
    assert run.stages == {name: r["hash"] for name, r in records.items()}
    note = base_note({"preset": "default", "base_sha256": ref["base_sha256"]}, run.stages)
    assert "differ from the reference run's" in note and note.count("eval-sft") == 1
    (tmp_path / "stages.json").write_text(json.dumps({"stages": "nope"}))
    assert load_run(tmp_path).stages == {}


def test_the_same_base_and_settings_trained_in_another_number_format_is_told_its_numbers_move(monkeypatch):
    """optim.bf16 auto trains under bf16 on a CPU with native bf16 and in fp32 on one without: the same base and
    stage hashes, other numbers. The run records which models trained in bf16 (results.json ``bf16``)."""
    from posttrainlab.report import results

    ref = reference("default") | {"bf16": ["prm", "sft"]}
    monkeypatch.setattr(results, "reference", lambda preset: ref)
    same = {**run_numbers(), "base_sha256": ref["base_sha256"]}
    assert "should equal the README's" in base_note(same | {"bf16": ["prm", "sft"]}, ref["stages"])
    note = base_note(same | {"bf16": []}, ref["stages"])
    assert "should equal" not in note
    assert "bf16 autocast trained prm, sft there and nothing here" in note and "numbers move" in note
    assert run_numbers()["bf16"] == []  # summarize records it (none given: none trained in bf16)


def test_the_run_folder_says_which_models_trained_in_bf16(tmp_path):
    from posttrainlab.report.run_folder import load_run

    (tmp_path / "run.json").write_text(json.dumps({"preset": "default"}))
    for stage, bf16 in (("sft", True), ("prm", False), ("rft", None)):
        (tmp_path / stage).mkdir()
        record = {"method": stage} | ({} if bf16 is None else {"bf16": bf16})  # rft: a summary from before
        (tmp_path / stage / "train_summary.json").write_text(json.dumps(record))
    assert load_run(tmp_path).bf16 == ["sft"]
