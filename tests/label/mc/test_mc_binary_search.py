"""What ``--search binary`` guarantees, and that every row says whether its value was measured or inferred."""

from __future__ import annotations

import itertools

import pytest
from mc_fakes import TableBackend, write_jsonl

from posttrainlab.data.formats.mc_value import validate_mc
from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.errors import BadInput
from posttrainlab.label.mc import FirstZeroSearch, MCConfig, OutputConfig, load_problems, run_mc
from posttrainlab.prm.examples import read_items
from posttrainlab.prm.losses import IGNORE
from posttrainlab.train.prm_recipe import PRMDataConfig

Q = "What is 437 + 309 - 125?"
TRUE_V = [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]  # not monotone: a zero at step 1, then recovered, wrong at the end


def search(values):
    """Run the bisection against known per-prefix values; returns the search and the probes in order."""
    s = FirstZeroSearch(len(values), values[-1])
    probes = []
    while (i := s.next_probe()) is not None:
        probes.append(i)
        s.record(i, values[i])
    return s, probes


@pytest.mark.parametrize("length", range(1, 7))
def test_the_documented_guarantee_on_every_value_pattern(length):
    """docs/mc-labelling.md: exhaustive over V in {0, 0.5, 1}^L."""
    for values in itertools.product((0.0, 0.5, 1.0), repeat=length):
        s, probes = search(values)
        written = s.values()
        measured = {i for i, (_, how) in enumerate(written) if how in ("rollout", "trace")}
        assert measured == set(probes) | {length - 1} and len(probes) == len(set(probes))
        for i in measured:  # a measured value is the prefix's own V
            assert written[i][0] == values[i]
        z = s.first_zero
        if values[-1] > 0:  # a correct trace: nothing rolled out, no zero reported
            assert z is None and probes == []
            continue
        # the reported zero is measured 0 and is the first measured zero ...
        assert z in measured and values[z] == 0
        assert all(values[i] > 0 for i in measured if i < z)
        # ... with a measured V > 0 just before it (or it is the first step): a >0 -> 0 transition
        assert z == 0 or (z - 1 in measured and values[z - 1] > 0)
        if all(a > 0 or b == 0 for a, b in itertools.pairwise(values)):  # monotone: once 0, stays 0
            assert z == values.index(0.0)  # the first zero


def _table(values):
    """A stub policy: from the prefix of steps 0..i it answers right iff V[i] is 1 (n continuations alike)."""
    steps = [f"step {i}" for i in range(len(values) - 1)] + ["Answer: 620"]
    table = {
        "".join(f"{s}\n" for s in steps[: i + 1]): ["Answer: 621" if v else "Answer: 3"]
        for i, v in enumerate(values[:-1])
    }
    return steps, table


def test_non_monotone_trace_rows_say_which_values_are_inferred(tmp_path):
    """True V [1,0,1,1,1,1,0]: bisection probes 2, 4, 5 and reports the 5 -> 6 transition, not step 1.

    The prefixes it never rolled out (0, 1, 3) are written as copies of the probe after them and say so in
    ``value_source``; every measured row equals the full run's row.
    """
    steps, table = _table(TRUE_V)
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "q", "question": Q, "steps": steps}])
    out = {}
    for search_kind in ("full", "binary"):
        backend = TableBackend(table)
        run_mc(
            load_problems(str(data)),
            backend,
            tmp_path / search_kind,
            config=MCConfig(n=2, search=search_kind),
            output=OutputConfig(val_problems=0),
            progress=False,
        )
        out[search_kind] = list(iter_rows(tmp_path / search_kind / "train.parquet"))
        if search_kind == "binary":
            assert [r.prefix.count("\n") - 1 for r in backend.requests[1:]] == [2, 4, 5]
    full, binary = out["full"], out["binary"]
    assert [r["reward"] for r in full] == TRUE_V and {r["value_source"] for r in full} == {"measured"}
    assert [r["value_source"] for r in binary] == ["inferred", "inferred", "measured", "inferred"] + ["measured"] * 3
    assert binary[1]["reward"] == 1.0  # a copy of step 2's V, not the true 0.0 ...
    for f, b in zip(full, binary, strict=True):
        if b["value_source"] == "measured":  # ... while every measured value is the full run's
            assert b == f
    assert list(validate_mc(binary)) == [] and list(iter_rows(tmp_path / "binary" / "train.jsonl")) == binary

    # The soft PRM recipe trains on measured values only unless told otherwise.
    path = tmp_path / "binary" / "train.jsonl"
    cfg = PRMDataConfig(path=str(path), format="mc-value", mc_step_idx="last")
    (item,) = read_items(cfg, soft=True)
    assert item.targets == [IGNORE, IGNORE, 1.0, IGNORE, 1.0, 1.0, 0.0]
    (item,) = read_items(
        PRMDataConfig(path=str(path), format="mc-value", mc_step_idx="last", mc_use_inferred=True), soft=True
    )
    assert item.targets == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    messages = read_items(PRMDataConfig(path=str(path), format="mc-value", mc_rows="messages"), soft=True)
    assert [m.target for m in messages] == [1.0, 1.0, 1.0, 0.0]


def test_a_correct_trace_under_binary_search_is_all_inferred_but_its_grade(tmp_path):
    steps, table = _table([1.0, 1.0, 1.0])
    steps[-1] = "Answer: 621"
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "q", "question": Q, "steps": steps}])
    backend = TableBackend(table)
    run_mc(
        load_problems(str(data)),
        backend,
        tmp_path / "out",
        config=MCConfig(n=2, search="binary"),
        output=OutputConfig(val_problems=0),
        progress=False,
    )
    rows = list(iter_rows(tmp_path / "out" / "train.jsonl"))
    assert [(r["reward"], r["value_source"]) for r in rows] == [(1.0, "inferred")] * 2 + [(1.0, "measured")]
    assert len(backend.requests) == 1  # the empty prefix only (solve rate): nothing searched
    cfg = PRMDataConfig(path=str(tmp_path / "out" / "train.jsonl"), format="mc-value", mc_step_idx="last")
    (item,) = read_items(cfg, soft=True)
    assert item.targets == [IGNORE, IGNORE, 1.0]


def test_a_file_of_inferred_rows_only_is_refused_naming_the_setting(tmp_path):
    steps, table = _table([1.0, 1.0, 1.0])
    steps[-1] = "Answer: 621"
    data = write_jsonl(tmp_path / "t.jsonl", [{"id": "q", "question": Q, "steps": steps}])
    run_mc(
        load_problems(str(data)),
        TableBackend(table),
        tmp_path / "out",
        config=MCConfig(n=2, search="binary"),
        output=OutputConfig(val_problems=0),
        progress=False,
    )
    rows = [r for r in iter_rows(tmp_path / "out" / "train.jsonl") if r["value_source"] == "inferred"]
    path = write_jsonl(tmp_path / "inferred.jsonl", rows)
    with pytest.raises(
        BadInput, match=r"inferred\.jsonl: no training rows: all 2 rows .*dataset\.mc_use_inferred=true"
    ):
        read_items(PRMDataConfig(path=str(path), format="mc-value", mc_step_idx="last"), soft=True)
