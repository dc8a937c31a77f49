"""A loopback OpenAI-compatible server with ``/completions`` and ``/chat/completions`` and ``n`` choices.

``FakeEndpoint(responder)``: every request body is kept in ``.requests`` (with ``_path``); the reply comes
from ``responder(body, k)`` (``k`` counts requests, 0-based): a list of texts (one choice each), or an
``int`` HTTP status to fail with. Binds 127.0.0.1 on a port the OS picks; a daemon thread serves it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any], int], "list[str] | int"]


class _Server(ThreadingHTTPServer):
    request_queue_size = 64
    daemon_threads = True


class FakeEndpoint:
    def __init__(self, responder: Responder):
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                chat = self.path.endswith("/chat/completions")
                if not chat and not self.path.endswith("/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                with lock:
                    k = len(fake.requests)
                    fake.requests.append({**body, "_path": "chat" if chat else "completions"})
                reply = fake.responder(body, k)
                if isinstance(reply, int):
                    self._send(reply, {"error": {"message": f"scripted HTTP {reply}", "type": "server_error"}})
                    return
                if chat:
                    choices = [
                        {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                        for i, t in enumerate(reply)
                    ]
                    kind = "chat.completion"
                else:
                    choices = [
                        {"index": i, "text": t, "finish_reason": "stop", "logprobs": None} for i, t in enumerate(reply)
                    ]
                    kind = "text_completion"
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                payload = {"id": "x", "object": kind, "created": 0, "model": body.get("model", ""), "usage": usage}
                self._send(200, {**payload, "choices": choices[::-1]})  # out of order: clients sort by index

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
