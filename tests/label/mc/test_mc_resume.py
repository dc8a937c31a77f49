"""Kill / resume / shards: a restarted or sharded run writes the same bytes and repeats no finished problem."""

from __future__ import annotations

import json

import pytest
from mc_fakes import Killing

from posttrainlab.errors import BadInput
from posttrainlab.label.mc import MCConfig, OutputConfig, RunOptions, load_problems, run_mc
from posttrainlab.label.mc.scripted import ScriptedArithPolicy

CONFIG = MCConfig(n=4, samples_per_problem=2)
OUTPUT = OutputConfig(val_problems=2, keep_band=(0.1, 0.9))


def label(problems_file, out, backend, **kw):
    problems = load_problems(str(problems_file))
    kw.setdefault("config", CONFIG)
    return run_mc(problems, backend, out, output=OUTPUT, progress=False, **kw)


def files(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def outputs(out):
    return {k: v for k, v in files(out).items() if not k.startswith("work/shard-")}


@pytest.fixture
def reference(tmp_path, problems_file):
    backend = Killing(ScriptedArithPolicy(), after=10**9)
    summary = label(problems_file, tmp_path / "ref", backend)
    return tmp_path / "ref", backend.rollouts, summary


def test_killed_run_resumes_to_identical_output_without_repeating_finished_problems(tmp_path, problems_file, reference):
    ref, ref_rollouts, _ = reference
    out = tmp_path / "killed"
    first = Killing(ScriptedArithPolicy(), after=7)  # two calls a problem: killed in the 4th problem's rollouts
    with pytest.raises(KeyboardInterrupt):
        label(problems_file, out, first)
    finished = (out / "work" / "shard-0-of-1.jsonl").read_text().splitlines()
    assert len(finished) == 3 and not (out / "train.jsonl").exists()  # no output before every problem is done

    policy = ScriptedArithPolicy()
    second = Killing(policy, after=10**9)
    summary = label(problems_file, out, second)
    assert summary["finished"] and summary["session"]["problems"] == 9
    assert outputs(out) == outputs(ref)
    assert files(out)["work/shard-0-of-1.jsonl"] == files(ref)["work/shard-0-of-1.jsonl"]
    done = sum(json.loads(line)["rollouts"] for line in finished)
    assert second.rollouts == ref_rollouts - done  # the three finished problems are not rolled out again
    # and a run over a finished folder samples nothing and rewrites the same outputs
    third = Killing(ScriptedArithPolicy(), after=0)
    assert label(problems_file, out, third)["session"]["rollouts"] == 0
    assert outputs(out) == outputs(ref)


def test_a_torn_last_line_is_dropped_and_redone(tmp_path, problems_file, reference):
    ref, _, _ = reference
    out = tmp_path / "torn"
    with pytest.raises(KeyboardInterrupt):
        label(problems_file, out, Killing(ScriptedArithPolicy(), after=4))
    work = out / "work" / "shard-0-of-1.jsonl"
    with open(work, "a", encoding="utf-8") as f:
        f.write('{"id": "p002", "fingerp')  # the kill came in the middle of a write
    label(problems_file, out, ScriptedArithPolicy())
    assert outputs(out) == outputs(ref)
    assert work.read_bytes() == files(ref)["work/shard-0-of-1.jsonl"]


def test_shards_then_merge_equal_one_run(tmp_path, problems_file, reference):
    ref, _, _ = reference
    out = tmp_path / "sharded"
    seen = []
    for i in range(3):
        summary = label(problems_file, out, ScriptedArithPolicy(), run=RunOptions(shard=(i, 3)))
        seen.append(summary["session"]["problems"])
    assert sum(seen) == 12 and summary["finished"]  # the last shard finds every problem done and writes
    assert outputs(out) == outputs(ref)


def test_batched_problems_give_the_same_labels(tmp_path, problems_file, reference):
    ref, _, _ = reference
    label(problems_file, tmp_path / "batched", ScriptedArithPolicy(), run=RunOptions(problems_per_call=5))
    assert outputs(tmp_path / "batched") == outputs(ref)


def test_other_settings_are_refused(tmp_path, problems_file, reference):
    ref, _, _ = reference
    with pytest.raises(BadInput, match=r"other settings \(n: 4 -> 8\)"):
        label(problems_file, ref, ScriptedArithPolicy(), config=MCConfig(n=8, samples_per_problem=2))
