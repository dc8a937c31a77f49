"""vLLM for real (issue #23): one ``vllm serve`` of SmolLM2-135M-Instruct from ``make vllm``'s venv, for the module.

The server is started by the lab's own code (``generation.vllm_server.acquire``) in float32 with 2 threads, a 1 GiB
KV cache and ``--enforce-eager`` (``$POSTTRAIN_VLLM_ARGS``: up in ~40 s instead of ~140 s without
``torch.compile``). Every ``--backend vllm-server`` the verbs build for the same model and dtype in this process
shares it (``ServerOptions.same_server``), so the verbs run through their own CLI code against one server; the
judge and the annotator reach the same server as any OpenAI-compatible endpoint (``--model-url``), the seed
card's own workflow. Few prompts, few tokens: the module's time is the server's start-up plus ~1 min.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.generation.prompts import as_messages
from posttrainlab.generation.shared_prefix import PrefixRequest
from posttrainlab.generation.vllm_server import VLLM_ARGS_ENV, ServerOptions, acquire, stop_all
from posttrainlab.generation.vllm_server_backend import VLLMServerBackend

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.xdist_group("vllm")]

MS_SMALL = Path(__file__).resolve().parents[1] / "assets" / "judge" / "ms_small.jsonl"
#: greedy answers allowed to differ between vLLM's float32 kernels and transformers' (measured: 0 of 8, 48 tokens)
MAX_GREEDY_DIFFERENCES = 1


@pytest.fixture(scope="module")
def served(smollm2):
    """The module's one server (module docstring); stopped when the module ends."""
    patch = pytest.MonkeyPatch()
    patch.setenv(VLLM_ARGS_ENV, "--enforce-eager")
    server = acquire(ServerOptions(str(smollm2), dtype="float32", threads=2, kv_cache_gib=1))
    yield server
    stop_all()
    patch.undo()


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


def test_greedy_eval_policy_through_vllm_equals_the_transformers_backend(served, smollm2, arith_dir, tmp_path, capsys):
    common = ("eval", "policy", "--model", str(smollm2), "--data", f"{arith_dir}:test", "--limit", "6",
              "--max-new-tokens", "40", "--threads", "1", "--no-progress")  # fmt: skip
    code, _, err = cli(capsys, *common, "--out", str(tmp_path / "vllm"), "--backend", "vllm-server")
    assert code == 0, err
    code, _, err = cli(capsys, *common, "--out", str(tmp_path / "hf"))
    assert code == 0, err
    served_rows, local_rows = _rows(tmp_path / "vllm"), _rows(tmp_path / "hf")
    differ = [a["id"] for a, b in zip(served_rows, local_rows, strict=True) if a["response"] != b["response"]]
    assert len(served_rows) == 6 and len(differ) <= MAX_GREEDY_DIFFERENCES, differ
    served_m = json.loads((tmp_path / "vllm" / "metrics.json").read_text())
    local_m = json.loads((tmp_path / "hf" / "metrics.json").read_text())
    assert (served_m["generation"]["backend"], local_m["generation"]["backend"]) == ("vllm-server", "transformers")
    # preference pairs are scored, not sampled: the server backend loads the policy in transformers for them
    assert served_m["preference"]["accuracy"] == local_m["preference"]["accuracy"]


def test_label_mc_through_vllm_writes_valid_rows_reproducibly(served, smollm2, arith_dir, tmp_path, capsys):
    import pandas as pd

    frames = []
    for name in ("a", "b"):
        out = tmp_path / name
        code, _, err = cli(
            capsys,
            *("label", "mc", "--policy", str(smollm2), "--data", f"{arith_dir}:sft_train", "--out", str(out)),
            *("--n", "4", "--limit", "1", "--val-problems", "0", "--max-new-tokens", "24", "--seed", "3"),
            *("--backend", "vllm-server", "--threads", "1", "--no-progress"),
        )
        assert code == 0, err
        frames.append(pd.read_parquet(out / "train.parquet"))
    rows = frames[0]
    assert len(rows) > 0 and rows["reward"].between(0, 1).all()
    assert set(rows["value_source"]) <= {"measured", "inferred"}
    pd.testing.assert_frame_equal(frames[0], frames[1])  # the same seed: the same continuations, the same values


def test_n_samples_are_distinct_and_seeded_and_steps_stop_at_a_newline(served, smollm2):
    from posttrainlab.runners.beam_algorithm import BackendProposer

    backend = VLLMServerBackend(str(smollm2), server=served, progress=False)
    prompts = [as_messages("What is 17 + 25?"), as_messages("What is 9 * 8?")]
    first = backend.generate(prompts, n=4, temperature=1.0, max_new_tokens=12, seed=3)
    assert all(len(set(samples)) == 4 for samples in first)
    assert backend.generate(prompts, n=4, temperature=1.0, max_new_tokens=12, seed=3) == first
    assert backend.generate(prompts, n=4, temperature=1.0, max_new_tokens=12, seed=4) != first
    steps = BackendProposer(backend, temperature=1.0).propose([PrefixRequest(prompts[0], "", 5)], 3, 16)[0]
    assert len(steps) == 3 and all("\n" not in s.text and 0 < s.tokens <= 16 for s in steps)
    assert {s.end for s in steps} <= {"newline", "eos", "length"}


def test_generate_annotate_and_the_judge_against_the_vllm_endpoint(served, smollm2, arith_dir, tmp_path, capsys):
    gen = tmp_path / "gen"
    code, _, err = cli(
        capsys,
        *("generate", "--model", str(smollm2), "--data", f"{arith_dir}:test", "--out", str(gen)),
        *("--k", "2", "--limit", "1", "--max-new-tokens", "24", "--backend", "vllm-server"),
    )
    assert code == 0, err
    assert len((gen / "generations.jsonl").read_text().splitlines()) == 2
    url, name = served.url, served.served_name
    code, stdout, err = cli(
        capsys,
        *("annotate", "--model-name", name, "--model-url", url, "--data", str(gen), "--out", str(tmp_path / "ann")),
        *("--max-attempts", "1", "--max-tokens", "24", "--num-threads", "4"),
    )
    assert code == 0, err
    assert len((tmp_path / "ann" / "annotations.jsonl").read_text().splitlines()) == 2
    code, out, err = cli(
        capsys,
        *("eval", "judge", "--data-file", str(MS_SMALL), "--model-name", name, "--model-url", url),
        *("--on-invalid", "record", "--max-tokens", "24", "--max-samples", "2", "--num-threads", "8"),
        *("--output-dir", str(tmp_path / "judge")),
    )
    assert code == 0, err
    runs = list((tmp_path / "judge").glob("ms_small__*.jsonl"))
    assert len(runs) == 1 and len(runs[0].read_text().splitlines()) == 2
    metric = json.loads(next((tmp_path / "judge").glob("ms_small__*_metric.json")).read_text())
    assert metric["model_url"] == url and metric["test_data_size"] + metric["failed_rows"] == 2
