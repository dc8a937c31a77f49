"""Serving throughput: the judge harness against ``posttrain serve``, and server-side batching, in one run.

Both parts run the real server app (``posttrainlab.serve.app.create_app`` under uvicorn on a loopback
port, in this process) and talk to it with the official ``openai`` client:

1. **Judge harness, ``--num-threads 32`` vs 1.** ``run_judge`` over the same 64 synthetic Math-Shepherd
   rows as ``bench_judge.py``, against a server whose backend answers every ``generate`` call after a
   fixed ``--latency-ms`` (default 50) *whatever the number of prompts in it*: a stand-in for a GPU
   model, whose batch of 32 costs about what one prompt does. It answers each row with its last step,
   so both runs must give the same metrics. With 32 threads the server batches concurrent requests,
   so the run pays the latency once per batch, not once per row; the generate calls are counted.
2. **Server-side batching on the tiny model, 16 concurrent requests: ``--max-batch-size 16`` vs 1.**
   The default tiny model (random init, ~2.0M parameters) on CPU, greedy, ``--max-tokens`` new tokens
   per request; rounds of 16 requests sent at once by 16 client threads. Batched, each round is one
   ``generate`` call that shares every forward pass; with ``--max-batch-size 1`` it is 16 calls one
   after another. Greedy answers must agree between the two servers.

    .venv/bin/python bench/bench_serve.py                    # about a minute on 2 busy cores
    .venv/bin/python bench/bench_serve.py --rows 128 --latency-ms 200 --requests 96

Records/s and requests/s count finished work over wall time; the ratios are printed last.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_judge import make_rows

from posttrainlab.runners.judge import run_judge
from posttrainlab.runners.settings import JudgeSettings
from posttrainlab.serve.app import ServerThread, create_app


class FixedLatencyJudge:
    """A ``SamplingBackend`` that answers each judge prompt with its last step, after a fixed delay per call."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        time.sleep(self.latency_s)
        out = []
        for p in prompts:
            last_step = p[-1]["content"].rsplit("\n", 1)[-1]
            out.append([json.dumps({"hallucination list": [last_step]})] * n)
        return out


def bench_judge_harness(rows: int, latency_ms: float, threads: int) -> float:
    app = create_app(FixedLatencyJudge(latency_ms / 1000), "bench-judge")
    results = {}
    with ServerThread(app) as server, tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bench_rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in make_rows(rows)), encoding="utf-8")
        for n_threads in (1, threads):
            batcher = app.state.batcher
            calls_before = batcher.calls
            cfg = JudgeSettings(
                data_file=str(data), model_name="bench-judge", model_url=server.url, num_threads=n_threads,
                output_dir=Path(tmp) / f"threads-{n_threads}",
            )  # fmt: skip
            start = time.perf_counter()
            run = run_judge(cfg)
            seconds = time.perf_counter() - start
            calls = batcher.calls - calls_before
            results[n_threads] = (run, seconds)
            print(
                f"  --num-threads {n_threads:>2}: {run.judged} records in {seconds:.2f} s = "
                f"{run.judged / seconds:.1f} records/s ({calls} generate calls, {run.judged / calls:.1f} rows each)"
            )
    (one, t1), (many, tn) = results[1], results[threads]
    if one.metrics["metrics"] != many.metrics["metrics"]:
        raise SystemExit("the two judge runs gave different metrics")
    print(f"  metrics identical across thread counts (endpoint latency {latency_ms:g} ms per generate call)")
    return t1 / tn


def bench_batching(requests: int, concurrency: int, max_tokens: int, torch_threads: int) -> float:
    import torch

    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.models.tiny import TinyModelConfig, build_model

    torch.set_num_threads(torch_threads)
    model, tokenizer = build_model(TinyModelConfig())
    backend = TransformersBackend(model, tokenizer, batch_size=concurrency, progress=False)
    chats = [[{"role": "user", "content": f"What is {17 * i % 89} + {31 * i % 97}?"}] for i in range(requests)]
    rates, answers = {}, {}
    for max_batch in (concurrency, 1):
        app = create_app(backend, "tiny", max_batch_size=max_batch, batch_wait_ms=10)
        with ServerThread(app) as server:
            import openai

            client = openai.OpenAI(base_url=server.url, api_key="EMPTY", max_retries=0, timeout=600)

            def ask(messages, client=client):
                reply = client.chat.completions.create(
                    model="tiny", messages=messages, temperature=0, max_tokens=max_tokens
                )
                return reply.choices[0].message.content

            ask(chats[0])  # warm-up
            calls_before = app.state.batcher.calls
            start = time.perf_counter()
            with ThreadPoolExecutor(concurrency) as pool:
                answers[max_batch] = list(pool.map(ask, chats))
            seconds = time.perf_counter() - start
            calls = app.state.batcher.calls - calls_before
        rates[max_batch] = requests / seconds
        print(
            f"  --max-batch-size {max_batch:>2}: {requests} requests ({concurrency} at a time) in {seconds:.2f} s = "
            f"{rates[max_batch]:.1f} requests/s ({calls} generate calls)"
        )
    same = answers[concurrency] == answers[1]
    print(f"  greedy answers identical batched and one at a time: {'yes' if same else 'NO'}")
    return rates[concurrency] / rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=64, help="judge rows (part 1)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="latency of one generate call (part 1)")
    parser.add_argument("--threads", type=int, default=32, help="judge threads compared with 1 (part 1)")
    parser.add_argument("--requests", type=int, default=64, help="requests to the tiny model (part 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests at once (part 2)")
    parser.add_argument("--max-tokens", type=int, default=32, help="new tokens per request (part 2)")
    parser.add_argument("--torch-threads", type=int, default=1, help="torch CPU threads (part 2)")
    args = parser.parse_args()

    print(f"1. judge harness against posttrain serve, fixed-latency backend, {args.rows} rows")
    judge_ratio = bench_judge_harness(args.rows, args.latency_ms, args.threads)
    print(f"2. server-side batching, tiny model on CPU, greedy, {args.max_tokens} new tokens per request")
    batch_ratio = bench_batching(args.requests, args.concurrency, args.max_tokens, args.torch_threads)
    print(f"ratio records/s judge --num-threads {args.threads} / --num-threads 1: {judge_ratio:.1f}x")
    print(f"ratio requests/s --max-batch-size {args.concurrency} / --max-batch-size 1: {batch_ratio:.1f}x")


if __name__ == "__main__":
    main()
