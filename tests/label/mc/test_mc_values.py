"""MC values by hand: V per prefix, hard labels, rows in the card's schema, splits, filters, binary search, judge."""

from __future__ import annotations

import json

import pytest
from mc_fakes import TableBackend, arith_rows, write_jsonl

from posttrainlab.data.formats.mc_value import KEYS, split_overlap, validate_mc
from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.errors import BadInput
from posttrainlab.generation.shared_prefix import derive_seed
from posttrainlab.label.mc import (
    PROMPT_TEMPLATE,
    FirstZeroSearch,
    MCConfig,
    OutputConfig,
    load_problems,
    read_work,
    run_mc,
    simulate_binary,
    validation_ids,
)
from posttrainlab.label.mc.agreement import agreement, cohen_kappa, score
from posttrainlab.label.mc.scripted import ScriptedArithPolicy

Q = "What is 437 + 309 - 125?"
RIGHT = ["437 + 309 = 746", "746 - 125 = 621", "Answer: 621"]
WRONG = ["437 + 309 = 745", "745 - 125 = 620", "Answer: 620"]
TABLE = {
    "": ["437 + 309 = 746\n746 - 125 = 621\nAnswer: 621", "Answer: 3"],
    "437 + 309 = 746\n": ["746 - 125 = 621\nAnswer: 621", "Answer: 600", "Answer: 621", "Answer: 621"],
    "437 + 309 = 746\n746 - 125 = 621\n": ["Answer: 621", "Answer: 1"],
    "437 + 309 = 745\n": ["Answer: 621", "x", "x", "x"],
}


@pytest.fixture
def traces_file(tmp_path):
    rows = [{"id": "q1", "question": Q, "steps": RIGHT}, {"id": "q1", "question": Q, "steps": WRONG}]
    return write_jsonl(tmp_path / "traces.jsonl", rows)


def run(tmp_path, data, backend, name="out", config=None, output=None, **kw):
    problems = load_problems(str(data))
    config = config or MCConfig(n=4)
    output = output or OutputConfig(val_problems=0)
    return run_mc(problems, backend, tmp_path / name, config=config, output=output, progress=False, **kw)


def test_values_and_hard_labels_by_hand(tmp_path, traces_file):
    backend = TableBackend(TABLE)
    summary = run(tmp_path, traces_file, backend)
    rows = list(iter_rows(tmp_path / "out" / "train.jsonl"))
    assert [r["reward"] for r in rows] == [0.75, 0.5, 1.0, 0.25, 0.0, 0.0]
    assert [r["correct"] for r in rows] == [True, True, True, False, False, False]
    assert [r["reward"] > 0 for r in rows] == [True, True, True, True, False, False]  # Math-Shepherd hard label
    assert [(r["sample_index"], r["step_idx"], r["num_steps"]) for r in rows] == [
        (0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 3), (1, 1, 3), (1, 2, 3)
    ]  # fmt: skip
    assert rows[0]["messages"] == [
        {"role": "user", "content": PROMPT_TEMPLATE.replace("<<QUESTION>>", Q).replace("<<PREFIX>>", RIGHT[0])},
        {"role": "assistant", "content": "yes"},
    ]
    assert list(rows[0]) == [*KEYS, "value_source", "question", "steps"]  # + the text columns grouped PRM reads
    assert {r["value_source"] for r in rows} == {"measured"}  # a full search measures every prefix
    assert rows[0]["question"] == Q and rows[0]["steps"] == rows[2]["steps"] and len(rows[0]["steps"]) == 3
    card_only = OutputConfig(val_problems=0, text_columns=False)
    run(tmp_path, traces_file, TableBackend(TABLE), name="card", output=card_only)
    card_rows = list(iter_rows(tmp_path / "card" / "train.jsonl"))
    assert [list(r) for r in card_rows] == [[*KEYS, "value_source"]] * 6  # card columns (+ the optional one)
    assert {(r["label"], r["source"], r["loss_weight"], r["enable_thinking"]) for r in rows} == {
        ("yes", "arith-v1", 1.0, False)
    }
    # One request from the empty prefix (4 continuations: solve rate 1/2), then one per prefix but the last.
    assert [r.prefix for r in backend.requests] == [
        "", "437 + 309 = 746\n", "437 + 309 = 746\n746 - 125 = 621\n", "437 + 309 = 745\n",
        "437 + 309 = 745\n745 - 125 = 620\n",
    ]  # fmt: skip
    assert backend.requests[1].seed == derive_seed(0, "q1", 0, 0)
    assert summary["rollouts"] == 4 + 4 * 4 and summary["mean_solve_rate"] == 0.5
    assert summary["value_table"]["train"]["v_eq_0"] == pytest.approx(2 / 6)
    assert (tmp_path / "out" / "train.parquet").is_file() and (tmp_path / "out" / "value_table.md").is_file()

    _, records = read_work(tmp_path / "out")
    result = agreement(records, [4, 2], {"n": 4, "search": "full"})
    at4, at2 = result["table"]
    assert at4["hard"] == {"accuracy": pytest.approx(5 / 6), "kappa": pytest.approx(2 / 3)}
    assert at4["mean_v_wrong"] == pytest.approx(1 / 12) and at4["mean_v_right"] == pytest.approx(0.75)
    assert at2["mean_v_wrong"] == pytest.approx(1 / 6) and at2["mean_v_right"] == pytest.approx(2 / 3)
    assert at4["rolled_out"]["prefixes"] == 4


def test_kappa_by_hand():
    assert cohen_kappa([1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]) == pytest.approx(2 / 3)
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([0, 0, 0], [0, 0, 0]) is None
    s = score([0.0, 0.0], [0, 1])
    assert s["hard"]["accuracy"] == 0.5 and s["hard"]["kappa"] == 0.0


def test_rows_pass_the_mc_value_validator_and_splits_are_disjoint(tmp_path, problems_file):
    from posttrainlab.cli import main

    run(tmp_path, problems_file, ScriptedArithPolicy(), output=OutputConfig(val_problems=3))
    out = tmp_path / "out"
    train, val = list(iter_rows(out / "train.parquet")), list(iter_rows(out / "val.parquet"))
    assert train == list(iter_rows(out / "train.jsonl")) and val == list(iter_rows(out / "val.jsonl"))
    assert list(validate_mc(train + val)) == []
    assert split_overlap({"train": train, "val": val}) == {}
    assert len({r["id"] for r in val}) == 3 and {r["id"] for r in val} == validation_ids(
        [f"p{i:03d}" for i in range(12)], 3
    )
    for path in ("train.parquet", "val.jsonl"):
        try:
            main(["data", "validate", "--format", "mc-value", str(out / path)])
        except SystemExit as e:  # only a failure raises; success returns
            assert e.code in (0, None)


def test_validation_ids_do_not_depend_on_order():
    ids = [f"p{i}" for i in range(50)]
    assert validation_ids(ids, 7) == validation_ids(ids[::-1], 7) and len(validation_ids(ids, 7)) == 7


def test_keep_band_and_mid_difficulty_variants(tmp_path, problems_file):
    output = OutputConfig(val_problems=2, keep_band=(0.1, 0.9), mid_difficulty=(0.2, 0.8))
    summary = run(tmp_path, problems_file, ScriptedArithPolicy(0.3, 0.1), output=output, config=MCConfig(n=8))
    out = tmp_path / "out"
    full = list(iter_rows(out / "train.jsonl")) + list(iter_rows(out / "val.jsonl"))
    band = list(iter_rows(out / "band-0.1-0.9" / "train.jsonl")) + list(iter_rows(out / "band-0.1-0.9" / "val.jsonl"))
    assert band == [r for r in full if 0.1 <= r["reward"] <= 0.9] and 0 < len(band) < len(full)
    _, records = read_work(out)
    rate = {r["id"]: r["solve_rate"] for r in records}
    mid = list(iter_rows(out / "mid-0.2-0.8" / "train.parquet"))
    assert mid == [r for r in full if 0.2 <= rate[r["id"]] <= 0.8 and r["id"] not in summary["val_ids"]]
    assert set(summary["value_table"]) == {
        "train", "val", "band-0.1-0.9/train", "band-0.1-0.9/val", "mid-0.2-0.8/train", "mid-0.2-0.8/val"
    }  # fmt: skip


def test_too_many_validation_problems_is_bad_input(tmp_path, problems_file):
    with pytest.raises(BadInput, match="--val-problems 12: only 12 problems"):
        run(tmp_path, problems_file, ScriptedArithPolicy(), output=OutputConfig(val_problems=12))


def test_binary_search_agrees_on_a_monotone_backend_with_fewer_rollouts(tmp_path):
    steps = [f"step {i}" for i in range(8)] + ["Answer: 620"]  # first zero at prefix 5
    table = {"".join(f"step {j}\n" for j in range(i + 1)): ["Answer: 621"] for i in range(5)}
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "q", "question": Q, "steps": steps}])
    full_backend, binary_backend = TableBackend(table), TableBackend(table)
    full = run(tmp_path, data, full_backend, "full")
    binary = run(tmp_path, data, binary_backend, "binary", config=MCConfig(n=4, search="binary"))
    rows_full = list(iter_rows(tmp_path / "full" / "train.jsonl"))
    rows_binary = list(iter_rows(tmp_path / "binary" / "train.jsonl"))
    without_source = [{k: v for k, v in r.items() if k != "value_source"} for r in rows_binary]
    assert without_source == [{k: v for k, v in r.items() if k != "value_source"} for r in rows_full]
    assert [r["reward"] for r in rows_full] == [1.0] * 5 + [0.0] * 4
    assert [r["value_source"] for r in rows_binary] == [
        "inferred", "inferred", "inferred", "measured", "measured", "measured", "inferred", "inferred", "measured"
    ]  # fmt: skip
    assert full["rollouts"] == 4 + 8 * 4 and binary["rollouts"] == 4 + 3 * 4  # root + probes at 3, 5, 4
    assert [r.prefix.count("\n") - 1 for r in binary_backend.requests[1:]] == [3, 5, 4]
    assert binary["prefixes_by_rule"] == {"after_zero": 2, "carried": 3, "rollout": 3, "trace": 1}
    assert binary["prefixes_by_source"] == {"measured": 4, "inferred": 5}
    assert full["prefixes_by_source"] == {"measured": 9, "inferred": 0}


def test_binary_values_rule():
    s = FirstZeroSearch(4, 1.0)  # a correct trace: nothing to search, every prefix carries the trace's 1.0
    assert s.next_probe() is None and s.values() == [(1.0, "carried")] * 3 + [(1.0, "trace")]
    assert simulate_binary([0.0, 0.5, 0.0]) == ([0.0, 0.0, 0.0], 1)
    assert simulate_binary([1.0]) == ([1.0], 0)


def test_binary_run_equals_its_replay_on_a_full_run(tmp_path, problems_file):
    """Per-prefix seeds: a binary run measures what the full run measured at each visited prefix."""
    policy = dict(p_error=0.25, p_recover=0.1)
    cfg = dict(n=4, samples_per_problem=2)
    full = run(tmp_path, problems_file, ScriptedArithPolicy(**policy), "full", config=MCConfig(**cfg))
    binary = run(tmp_path, problems_file, ScriptedArithPolicy(**policy), "bin", config=MCConfig(**cfg, search="binary"))
    _, full_records = read_work(tmp_path / "full")
    _, bin_records = read_work(tmp_path / "bin")
    for f, b in zip(full_records, bin_records, strict=True):
        for tf, tb in zip(f["traces"], b["traces"], strict=True):
            values = [p["value"] for p in tf["prefixes"]]
            assert [p["value"] for p in tb["prefixes"]] == simulate_binary(values)[0]
    assert binary["rollouts"] < full["rollouts"]


def test_trace_file_without_answers_reads_arith_answers_and_rejects_others(tmp_path):
    data = write_jsonl(tmp_path / "t.jsonl", [{"question": Q, "steps": RIGHT}])
    (problem,) = load_problems(str(data))
    assert problem.answer == 621 and problem.traces == [RIGHT] and problem.id.startswith("q-")
    bad = write_jsonl(tmp_path / "b.jsonl", [{"question": "What is the capital of France?", "steps": ["Paris"]}])
    with pytest.raises(BadInput, match="no answer"):
        load_problems(str(bad))
    dup = write_jsonl(tmp_path / "d.jsonl", arith_rows(2) + arith_rows(1))
    with pytest.raises(BadInput, match="repeats"):
        load_problems(str(dup))


class YesNoJudge:
    """A judge backend: yes when the response mentions 621, garbage for 'weird', else no."""

    def __init__(self):
        self.prompts = []

    def generate(self, prompts, **kw):
        self.prompts += prompts
        out = []
        for p in prompts:
            response = p[0]["content"].split("Solution:\n", 1)[1]
            out.append(["I cannot tell"] if "weird" in response else ["yes" if "621" in response else "no"])
        return out


def test_judge_relabel_replaces_grades_and_keeps_the_raw_ones(tmp_path, traces_file):
    from posttrainlab.label.mc.judge import Relabeler

    table = dict(TABLE)
    table["437 + 309 = 746\n"] = ["So the result is 621.", "weird", "Answer: 621", "Answer: 5"]
    judge = YesNoJudge()
    relabeler = Relabeler(judge, mode="all", retries=1)
    run(tmp_path, traces_file, TableBackend(table), relabeler=relabeler)
    _, (record,) = read_work(tmp_path / "out")
    first = record["traces"][0]["prefixes"][0]
    assert first["raw"] == [0, 0, 1, 0] and first["grades"] == [1, 0, 1, 0] and first["value"] == 0.5
    assert relabeler.stats.invalid == 1  # 'weird' never got a verdict: its raw grade (wrong) stands
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["judge"]["mode"] == "all"

    only = Relabeler(YesNoJudge(), mode="unparsed")
    run(tmp_path, traces_file, TableBackend(table), "unparsed", relabeler=only)
    asked = [p[0]["content"].split("Solution:\n", 1)[1] for p in only.backend.prompts]
    assert all("Answer:" not in a for a in asked) and any("So the result is 621." in a for a in asked)
