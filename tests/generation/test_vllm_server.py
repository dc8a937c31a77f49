"""``--backend vllm-server`` without vLLM: the server's lifecycle and the backend's requests, against a stand-in.

``fake_vllm_server`` plays ``python -m vllm.entrypoints.openai.api_server``; the real server is tested in
tests/vllm_real/test_vllm_server_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_vllm_server import fake_python

from cli_capture import cli
from posttrainlab.errors import BadInput
from posttrainlab.generation import vllm_server
from posttrainlab.generation.factory import make_backend, policy_backend
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed
from posttrainlab.generation.vllm_server import ServerError, ServerOptions, VLLMServer, find_python

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def requests_log(tmp_path, monkeypatch):
    path = tmp_path / "requests.jsonl"
    monkeypatch.setenv("FAKE_VLLM_LOG", str(path))
    return path


def test_a_missing_vllm_venv_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(vllm_server.VLLM_PYTHON_ENV, raising=False)
    monkeypatch.setattr(vllm_server.sys, "prefix", str(tmp_path / "lab" / ".venv"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput) as info:
        find_python()
    assert "run `make vllm`" in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setenv(vllm_server.VLLM_PYTHON_ENV, str(tmp_path / "nope" / "python"))
    with pytest.raises(BadInput, match=r"^\$POSTTRAIN_VLLM_PYTHON .*nope/python: no such python; run `make vllm`"):
        find_python()
    venv = tmp_path / "lab" / ".venv-vllm" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text("")
    monkeypatch.delenv(vllm_server.VLLM_PYTHON_ENV)
    assert find_python() == str(venv / "python")  # beside the lab's own venv


@pytest.mark.parametrize(
    "verb",
    [
        ["eval", "policy", "--data", "{data}:test", "--out", "{out}", "--model", "{model}"],
        ["eval", "best-of-n", "--data", "{data}:test", "--out", "{out}", "--policy", "{model}", "--prm", "{prm}"],
        ["eval", "beam-search", "--data", "{data}:test", "--out", "{out}", "--policy", "{model}", "--prm", "{prm}"],
        ["data", "arith-prm", "--data", "{data}", "--out", "{out}", "--policy", "{model}"],
        [
            "train",
            "dpo",
            "--config",
            "{repo}/configs/arith/dpo.yaml",
            "model={model}",
            "dataset.path={data}",
            "output_dir={out}",
            "preference.source=policy",
        ],
    ],  # fmt: skip
)
def test_every_sampling_verb_takes_the_server_backend(verb, arith_dir, tiny_model, tiny_prm, tmp_path, monkeypatch,
                                                      capsys):  # fmt: skip
    """``--backend vllm-server`` reaches the factory in every verb: without the venv, one line, exit 2, no output."""
    monkeypatch.setenv(vllm_server.VLLM_PYTHON_ENV, str(tmp_path / "missing" / "python"))
    out = tmp_path / "out"
    args = [a.format(data=arith_dir, out=out, model=tiny_model, prm=tiny_prm, repo=REPO) for a in verb]
    code, _, err = cli(capsys, *args, "--backend", "vllm-server")
    assert code == 2, err
    assert err.strip().splitlines()[-1].endswith("no such python; run `make vllm` or point it at a venv's bin/python")
    assert not out.exists() or not any(out.iterdir())


def test_policy_backend_keeps_the_transformers_path_and_refuses_others():
    with policy_backend("m") as made:
        assert made is None  # the runner loads its model itself, as without the option
    with pytest.raises(BadInput, match="choose one of transformers, vllm, vllm-server"):
        with policy_backend("m", "openai"):
            pass


def test_the_command_and_environment_are_cpu_sane(monkeypatch):
    for name in ("VLLM_CPU_KVCACHE_SPACE", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(vllm_server.VLLM_ARGS_ENV, "--enforce-eager --max-num-batched-tokens 512")
    options = ServerOptions("m", dtype="bfloat16", threads=3, max_model_len=2048)
    cmd = vllm_server.server_command(options, "py", 8123)
    assert cmd[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    text = " ".join(cmd)
    for part in ("--model m", "--host 127.0.0.1 --port 8123", "--dtype bfloat16", "--generation-config vllm",
                 "--max-model-len 2048", "--seed 0"):  # fmt: skip
        assert part in text
    assert cmd[-3:] == ["--enforce-eager", "--max-num-batched-tokens", "512"]  # $POSTTRAIN_VLLM_ARGS, as they are
    env = vllm_server.server_env(options)
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["OMP_NUM_THREADS"]) == ("4", "3")
    assert (env["VLLM_CPU_OMP_THREADS_BIND"], env["OMP_WAIT_POLICY"]) == ("nobind", "PASSIVE")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")  # the user's own setting is kept
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = vllm_server.server_env(ServerOptions("m"))
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["OMP_NUM_THREADS"]) == ("2", "1")
    active = ServerOptions("m", env=(("OMP_WAIT_POLICY", "ACTIVE"),))  # the options' own environment beats the lab's
    assert vllm_server.server_env(active)["OMP_WAIT_POLICY"] == "ACTIVE"
    with pytest.raises(BadInput, match="kv_cache_gib=0: must be at least 1"):
        ServerOptions("m", kv_cache_gib=0).check()


def test_a_server_that_dies_while_starting_shows_its_log(tmp_path):
    server = VLLMServer(ServerOptions("m", python=str(fake_python(tmp_path, "die"))), progress=False)
    with pytest.raises(ServerError) as info:
        server.start()
    message = str(info.value)
    assert message.startswith("vllm serve exited with code 3 while starting; its log ends:")
    assert "the KV cache does not fit (stand-in)" in message and not server.alive()


def test_a_server_that_never_comes_up_is_stopped_after_the_timeout(tmp_path):
    options = ServerOptions("m", python=str(fake_python(tmp_path, "hang")), startup_timeout_s=2)
    server = VLLMServer(options, progress=False)
    with pytest.raises(ServerError, match="was not up after 2 s; its log ends:\nINFO starting the stand-in"):
        server.start()
    assert server.process is None and server.log_path is None


def test_servers_are_shared_and_the_last_user_stops_them(tmp_path, requests_log, capsys):
    python = str(fake_python(tmp_path, "serve", delay=1.5))
    first = vllm_server.acquire(ServerOptions("m", python=python, threads=1))
    process = first.process
    assert first.alive() and "up after" in capsys.readouterr().err
    second = vllm_server.acquire(ServerOptions("m", python=python, threads=2))  # threads: same server
    assert second is first
    vllm_server.release(second)
    assert first.alive()
    vllm_server.release(first)
    assert process.poll() is not None and not first.alive()


def test_the_backend_sends_token_ids_and_stops_as_the_lab_does(tiny_model, tmp_path, requests_log):
    python = str(fake_python(tmp_path, "serve"))
    backend = make_backend(str(tiny_model), backend="vllm-server", python=python, threads=2, progress=False)
    assert backend.options.threads == 2 and backend._server is None  # nothing started before the first request
    ends = backend.end_ids
    with backend:
        greedy = backend.generate([CHAT, "plain text"], n=3, max_new_tokens=5, seed=4)
        sampled = backend.sample_continuations([PrefixRequest(CHAT, "2 + 3 = ", 11)], n=2, temperature=0.7)
        process = backend._server.process
    assert process.poll() is not None  # the last user closed: stopped
    sent = [json.loads(line) for line in requests_log.read_text().splitlines()]
    bodies = sorted((s["body"] for s in sent), key=lambda b: b["seed"])
    from posttrainlab.generation.prompts import encode_prompt
    from posttrainlab.generation.shared_prefix import encode_request

    expected_seeds = sorted([derive_seed(4, 0), derive_seed(4, 1), 11])
    assert [b["seed"] for b in bodies] == expected_seeds
    by_seed = {b["seed"]: b for b in bodies}
    chat = by_seed[derive_seed(4, 0)]
    assert chat["prompt"] == encode_prompt(backend.tokenizer, CHAT)  # the lab's own rendering, as token ids
    assert (chat["n"], chat["temperature"], chat["top_p"], chat["max_tokens"]) == (1, 0.0, 1.0, 5)  # greedy: one
    assert chat["ignore_eos"] is True and chat["stop_token_ids"] == ends and chat["return_token_ids"] is True
    cont = by_seed[11]
    assert cont["prompt"] == encode_request(backend.tokenizer, PrefixRequest(CHAT, "2 + 3 = ", 11))
    assert (cont["n"], cont["temperature"]) == (2, 0.7)
    assert all(s["env"]["OMP_NUM_THREADS"] == "2" and s["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "nobind" for s in sent)
    decode = backend.tokenizer.decode
    first = decode([chat["prompt"][-1], 7], skip_special_tokens=True)
    assert greedy[0] == [first] * 3  # the reply's ids decoded here, the end token dropped; greedy repeated n times
    assert sampled[0][1] == decode([cont["prompt"][-1], 7, 8], skip_special_tokens=True)
    samples = backend.sample_ids([[5, 6]], [3], n=2, temperature=1.0, stop_token_ids=[9], ignore_eos=True)  # restarts
    assert [s.stop_token for s in samples[0]] == [9, 9] and samples[0][1].tokens == (6, 7, 8, 9)
    backend.close()


def test_a_training_method_that_samples_nothing_refuses_the_option(capsys):
    code, _, err = cli(capsys, "train", "sft", "--config", str(REPO / "configs/arith/sft.yaml"), "--backend", "vllm")
    assert code == 2 and "--backend vllm: train sft samples nothing (it is for dpo, grpo)" in err
