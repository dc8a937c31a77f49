"""A stand-in for ``python -m vllm.entrypoints.openai.api_server``, run by the lab as its "vLLM python".

``fake_python(tmp_path, mode)`` writes an executable that runs this file with the test's Python, whatever the
arguments. ``mode`` (``$FAKE_VLLM``): ``serve`` answers ``/health`` after ``$FAKE_VLLM_DELAY`` seconds and
``/v1/completions`` with ``token_ids`` made from the request (the prompt's last id, then 7, 8, ..., ending
with the first ``stop_token_ids`` entry: ``n`` choices, choice ``j`` one token longer than choice ``j - 1``),
appending each request body and the environment's ``VLLM_CPU_*`` / ``OMP_NUM_THREADS`` to ``$FAKE_VLLM_LOG``;
``die`` prints a few log lines and exits 3; ``hang`` never answers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def fake_python(folder: Path, mode: str, delay: float = 0.0) -> Path:
    """An executable "python" that runs this stand-in in ``mode``."""
    script = folder / "python"
    script.write_text(
        f'#!/bin/sh\nFAKE_VLLM={mode} FAKE_VLLM_DELAY={delay} exec {sys.executable} {Path(__file__).resolve()} "$@"\n'
    )
    script.chmod(0o755)
    return script


def _port(argv: list[str]) -> int:
    return int(argv[argv.index("--port") + 1])


class Handler(BaseHTTPRequestHandler):
    started = time.monotonic()

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        ready = time.monotonic() - self.started >= float(os.environ.get("FAKE_VLLM_DELAY", "0"))
        self._reply(200 if ready and self.path == "/health" else 503, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        env = {k: v for k, v in os.environ.items() if k.startswith("VLLM_CPU_") or k == "OMP_NUM_THREADS"}
        with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
            log.write(json.dumps({"body": body, "env": env, "argv": sys.argv[1:]}) + "\n")
        end = (body.get("stop_token_ids") or [0])[0]
        choices = []
        for j in range(body.get("n", 1)):
            tokens = [body["prompt"][-1], *range(7, 8 + j), end]
            choices.append({"index": j, "text": "", "token_ids": tokens, "finish_reason": "stop", "stop_reason": end})
        self._reply(200, {"id": "x", "object": "text_completion", "created": 0, "model": body["model"],
                          "choices": choices})  # fmt: skip


def main() -> None:
    mode = os.environ["FAKE_VLLM"]
    print("INFO starting the stand-in vLLM server", flush=True)
    if mode == "die":
        print("ValueError: the KV cache does not fit (stand-in)", flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(3600)
    ThreadingHTTPServer(("127.0.0.1", _port(sys.argv)), Handler).serve_forever()


if __name__ == "__main__":
    main()
