"""``posttrain label mc --ray R`` on a local Ray cluster (one per module, 2 CPUs): the rows of R = 2 and of R = 1
are the single-process run's, byte for byte, also when a Ray run is interrupted and resumed; the ray.data.llm path's
one-row-per-continuation fan-out samples what one vLLM request with ``n`` samples does (a stand-in stage)."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace

import pytest
from mc_fakes import write_jsonl

from cli_capture import cli
from posttrainlab.label.mc import MCConfig, MCRunConfig, OutputConfig, RunOptions, load_problems, run_mc

ARGS = ["--n", "2", "--samples-per-problem", "2", "--max-new-tokens", "12", "--limit", "6", "--val-problems", "1"]
ARGS += ["--keep-band", "0.1", "0.9", "--threads", "1", "--no-progress"]


@pytest.fixture(scope="module")
def ray_cluster():
    from posttrainlab.generation.ray_backend import cluster

    with cluster(cpus=2) as ray:  # the CLI finds it running and uses it (a local start costs ~12 s)
        yield ray


def outputs(out) -> dict[str, bytes]:
    """Every file but the work files (the card's command line is pytest's: the same for every run in this process)."""
    files = [p for p in sorted(out.rglob("*")) if p.is_file()]
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in files if not p.name.startswith("shard-")}


def work_lines(out) -> list[str]:
    """The work records, sorted (replicas finish in any order; the outputs are rebuilt in data order)."""
    return sorted((out / "work" / "shard-0-of-1.jsonl").read_text().splitlines())


@pytest.mark.ray
@pytest.mark.slow
def test_ray_rows_equal_the_single_process_rows_for_r_2_and_1_and_after_an_interrupted_run(
    tmp_path, problems_file, tiny_policy, ray_cluster, capsys
):
    from posttrainlab.label.mc.ray_runner import run_mc_ray

    base = ["label", "mc", "--policy", str(tiny_policy), "--data", str(problems_file), *ARGS]
    single, ray2, resumed = tmp_path / "single", tmp_path / "ray2", tmp_path / "resumed"
    code, _, err = cli(capsys, *base, "--out", str(single))
    assert code == 0, err
    code, printed, err = cli(capsys, *base, "--out", str(ray2), "--ray", "2")
    assert code == 0, err
    assert "6 problems, " in printed and "on 2 Ray replicas" in printed
    assert outputs(ray2) == outputs(single) and len(outputs(single)) == 12  # rows, band-0.1-0.9/, card, config...
    assert work_lines(ray2) == work_lines(single)

    paths = {"policy": str(tiny_policy), "data": str(problems_file), "out": str(resumed)}
    sampling = {"n": 2, "samples_per_problem": 2, "max_new_tokens": 12, "limit": 6}
    cfg = MCRunConfig(**paths, **sampling, val_problems=1, keep_band=(0.1, 0.9), threads=1, progress=False, ray=2)
    problems = load_problems(str(problems_file), limit=6)
    seen = []

    def stop_after_two(record):
        seen.append(record["id"])
        if len(seen) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the replicas label the rest

    with pytest.raises(KeyboardInterrupt):
        run_mc_ray(problems, cfg, on_record=stop_after_two)
    assert len(work_lines(resumed)) == 2 and not (resumed / "train.jsonl").exists()
    summary = run_mc_ray(problems, replace(cfg, ray=1))  # the Ray Data run was stopped: its replicas freed the CPUs
    assert summary["finished"] and summary["session"]["problems"] == 4 and summary["session"]["replicas"] == 1
    assert outputs(resumed) == outputs(single)
    assert work_lines(resumed) == work_lines(single)


def engine_text(seed: int) -> str:
    """A stand-in for one vLLM sample with ``n = 1`` and this seed: a two-step trace, its answer 0 or 1."""
    rng = random.Random(seed)
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return f"{a} + {b} = {a + b}\nAnswer: {rng.randint(0, 1)}"


class OneRequestNSamples:
    """What vLLM does with ``SamplingParams(n=N, seed=s)`` in one process: child j samples with seed ``s + j``."""

    def sample_continuations(self, requests, *, n=1, temperature=1.0, **kw):
        return [[engine_text(r.seed + j) for j in range(n)] for r in requests]


@pytest.mark.ray
@pytest.mark.slow
def test_vllm_path_one_row_per_continuation_equals_one_request_with_n_samples(
    tmp_path, tiny_policy, ray_cluster, capsys, monkeypatch
):
    from transformers import AutoTokenizer

    from posttrainlab.generation.ray_llm import LLM_MISSING, RayLLMSampler, keep_columns

    ray_cluster.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    tokenizer = AutoTokenizer.from_pretrained(tiny_policy)

    def stage(row):  # the vLLM stage's contract: tokenized_prompt + sampling_params in, generated_text out
        params = row["sampling_params"]
        assert params["n"] == 1 and params["max_tokens"] == 12 and list(row["tokenized_prompt"])
        return keep_columns({**row, "generated_text": engine_text(int(params["seed"]))})

    sampler = RayLLMSampler(tokenizer, lambda ds: ds.map(stage))
    rows = [{"id": f"q{i}", "question": f"Is {i} odd? Answer 1 or 0.", "answer": i % 2} for i in range(6)]
    problems = load_problems(str(write_jsonl(tmp_path / "problems.jsonl", rows)))
    kw = dict(
        config=MCConfig(n=3, samples_per_problem=2, max_new_tokens=12),
        output=OutputConfig(val_problems=1),
        run=RunOptions(problems_per_call=6),
        progress=False,
    )
    summary = run_mc(problems, sampler, tmp_path / "rows", **kw)
    reference = run_mc(problems, OneRequestNSamples(), tmp_path / "reference", **kw)
    assert sampler.passes == summary["session"]["calls"] == 2  # the root continuations, then every prefix at once
    assert summary["session"]["rollouts"] == reference["session"]["rollouts"] > 6 * 3
    assert outputs(tmp_path / "rows") == outputs(tmp_path / "reference")
    values = [json.loads(x)["reward"] for x in (tmp_path / "rows" / "train.jsonl").read_text().splitlines()]
    assert 0 < sum(values) < len(values)  # the stand-in's answers vary, so the rows are not all one value

    monkeypatch.setitem(sys.modules, "ray.data.llm", None)  # as without the ray[llm] extra's packages (this venv)
    args = ["--policy", str(tiny_policy), "--data", str(tmp_path / "problems.jsonl"), "--out", str(tmp_path / "v")]
    code, _, err = cli(capsys, "label", "mc", "--backend", "vllm", *args, "--val-problems", "1", "--ray", "1")
    assert code == 2 and err.strip().endswith(LLM_MISSING) and len(err.strip().splitlines()) == 1


def test_ray_settings_and_a_missing_ray_are_one_line_errors(tmp_path, problems_file, capsys, monkeypatch):
    from posttrainlab.generation.ray_backend import MISSING

    base = ["label", "mc", "--policy", "x", "--data", str(problems_file), "--out", str(tmp_path / "o")]
    code, _, err = cli(capsys, *base, "--ray", "0")
    assert code == 2 and "--ray 0: need at least one replica" in err
    code, _, err = cli(capsys, *base, "--ray-address", "auto")
    assert code == 2 and "--ray-address needs --ray R" in err
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where the extra is not installed
    code, _, err = cli(capsys, *base, "--ray", "2")
    assert code == 2 and err.strip().endswith(MISSING)
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o" / "work").exists()
