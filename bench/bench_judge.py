"""Judge throughput against a fixed-latency endpoint: ``--num-threads 32`` vs 1, side by side in one run.

A judge run is bound by the endpoint's latency, not by this machine: each request waits for a model to
write up to 8,000 tokens. The card's script sends 32 requests at a time for that reason, and a server
that batches concurrent requests (vLLM, ``posttrain serve``) answers them in about the time of one.
This benchmark stands in for such a server with a loopback OpenAI-compatible endpoint that answers
every request after a fixed delay (``--latency-ms``, default 50), whatever the number in flight, and
runs the real harness (``posttrainlab.runners.judge.run_judge`` with the ``openai`` client) over the same
64 synthetic Math-Shepherd rows with 1 thread, then with 32, each into a fresh output folder. Both runs
must give the same metrics. Records/s counts judged rows over the judging time (data loading and
metric writing included); the ratio is printed last.

    .venv/bin/python bench/bench_judge.py                      # 64 rows, 50 ms: about 5 s
    .venv/bin/python bench/bench_judge.py --rows 128 --latency-ms 200

Against a real server, run the CLI twice and compare the rows/s it prints:
``posttrain eval judge --data-file F --model-name N --model-url URL --num-threads 1 --run-tag t1``.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from posttrainlab.runners.judge import run_judge
from posttrainlab.runners.settings import JudgeSettings


def make_rows(n: int, seed: int = 0) -> list[dict]:
    """Synthetic Math-Shepherd rows: 3-6 arithmetic steps, about half with a wrong step from some point on."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        steps, labels, wrong = [], [], rng.random() < 0.5
        first_wrong = rng.randint(1, 3) if wrong else 99
        for k in range(rng.randint(3, 6)):
            value = a * (k + 1) + b + (7 if k >= first_wrong else 0)
            steps.append(f"Step {k + 1}: {a} * {k + 1} + {b} = {value}.")
            labels.append(k < first_wrong)
        rows.append({"prompt": f"Problem {i}: what is {a} * k + {b} for k = 1, 2, ...?", "completions": steps,
                     "labels": labels})  # fmt: skip
    return rows


def serve(latency_s: float) -> ThreadingHTTPServer:
    """A loopback endpoint answering every chat request after ``latency_s`` with the last step as the span."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()  # headers and body go out in two writes: without NODELAY, Nagle adds ~40 ms
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            last_step = body["messages"][-1]["content"].rsplit("\n", 1)[-1]
            time.sleep(latency_s)
            content = json.dumps({"hallucination list": [last_step]})
            reply = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                }  # fmt: skip
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    ThreadingHTTPServer.request_queue_size = 128  # the default backlog of 5 drops 32 simultaneous connects
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--threads", type=int, default=32)
    args = parser.parse_args()

    server = serve(args.latency_ms / 1000)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "bench_rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in make_rows(args.rows)), encoding="utf-8")
        results = {}
        for threads in (1, args.threads):
            cfg = JudgeSettings(
                data_file=str(data), model_name="bench", model_url=url, num_threads=threads,
                output_dir=Path(tmp) / f"threads-{threads}",
            )  # fmt: skip
            start = time.perf_counter()
            run = run_judge(cfg)
            seconds = time.perf_counter() - start
            results[threads] = (run, seconds)
            rate = run.judged / seconds
            print(f"--num-threads {threads:>2}: {run.judged} records in {seconds:.2f} s = {rate:.1f} records/s")
        server.shutdown()
    (one, t1), (many, tn) = results[1], results[args.threads]
    if one.metrics["metrics"] != many.metrics["metrics"]:
        raise SystemExit("the two runs gave different metrics")
    print(f"metrics identical across thread counts (span F1 label-aligned, reads gold labels: "
          f"{one.metrics['metrics']['All']['span_level']['f1']:.4f})")  # fmt: skip
    print(f"endpoint latency {args.latency_ms:g} ms, {args.rows} rows")
    print(f"ratio records/s --num-threads {args.threads} / --num-threads 1: {t1 / tn:.1f}x")


if __name__ == "__main__":
    main()
