"""A scripted OpenAI-compatible endpoint on loopback, for testing the judge harness without a model.

``FakeOpenAI(responder)`` serves ``POST /v1/chat/completions`` (and ``GET /v1/models``) from a
``ThreadingHTTPServer`` in a daemon thread on ``127.0.0.1`` (port chosen by the OS). Every request's
JSON body is kept in ``.requests``; the reply comes from ``responder(body, n)`` where ``n`` counts the
requests so far (0-based) and the result is a :class:`Reply`:

- ``Reply.ok(text)``: a normal completion whose message content is ``text``;
- ``Reply(status=500)``: an HTTP error with a JSON error body;
- ``Reply(raw=b"")``: exactly these bytes as a 200 body (an empty body, broken JSON);
- ``delay``: seconds to wait before answering (beyond the client's timeout it is a timeout).

Per-problem scripts (``by_problem``) make replies independent of thread scheduling: each problem gets
its own queue of replies, so 1 or 32 client threads see the same answers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str | None = None
    raw: bytes | None = None
    delay: float = 0.0
    finish_reason: str = "stop"

    @staticmethod
    def ok(content: str, delay: float = 0.0) -> Reply:
        return Reply(content=content, delay=delay)

    @staticmethod
    def answer(spans: list[str], delay: float = 0.0) -> Reply:
        """A well-formed judge answer listing ``spans``."""
        return Reply(content=json.dumps({"hallucination list": spans}), delay=delay)


Responder = Callable[[dict[str, Any], int], Reply]


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default backlog of 5 drops 32 simultaneous connects (1 s SYN retry)


def completion_body(model: str, content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeOpenAI:
    """A loopback OpenAI-compatible server answering from a scripted responder (module docstring)."""

    def __init__(self, responder: Responder):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()  # headers and body go out in two writes: without NODELAY, Nagle adds ~40 ms
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, status: int, body: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                body = {"object": "list", "data": [{"id": "fake-judge", "object": "model"}]}
                self._send(200, json.dumps(body).encode())

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                with fake._lock:
                    n = len(fake.requests)
                    fake.requests.append(body)
                reply = fake.responder(body, n)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.raw is not None:
                    self._send(reply.status, reply.raw)
                elif reply.status != 200:
                    error = {"error": {"message": f"scripted HTTP {reply.status}", "type": "server_error"}}
                    self._send(reply.status, json.dumps(error).encode())
                else:
                    payload = completion_body(body.get("model", ""), reply.content or "", reply.finish_reason)
                    self._send(200, json.dumps(payload).encode())

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def problem_of(body: dict[str, Any]) -> str:
    """The problem text of a judge request (the line after ``Problem:`` in the user message)."""
    text = body["messages"][-1]["content"]
    return text.split("Problem:\n", 1)[1].split("\n", 1)[0]


def scripted(replies: list[Reply], then: Reply | None = None) -> Responder:
    """Replies in request order; ``then`` (default: an empty list) once they run out."""
    fallback = then or Reply.answer([])

    def respond(body: dict[str, Any], n: int) -> Reply:
        return replies[n] if n < len(replies) else fallback

    return respond


def by_problem(scripts: dict[str, list[Reply]], default: Reply | None = None) -> Responder:
    """Each problem's replies in its own order, whatever the interleaving of threads."""
    lock = threading.Lock()
    seen: dict[str, int] = {}
    fallback = default or Reply.answer([])

    def respond(body: dict[str, Any], n: int) -> Reply:
        problem = problem_of(body)
        with lock:
            k = seen.get(problem, 0)
            seen[problem] = k + 1
        replies = scripts.get(problem, [])
        return replies[k] if k < len(replies) else (replies[-1] if replies else fallback)

    return respond
