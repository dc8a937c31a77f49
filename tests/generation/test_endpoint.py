"""The one OpenAI-endpoint client (generation/endpoint.py) against a scripted loopback server.

The ``openai`` client retries network faults itself; these tests check that it does so with
``max_retries``, honours ``Retry-After``, and that the retries are counted and named in the one
``EndpointError``. Its waits are recorded instead of slept (``openai`` sleeps with ``time.sleep``).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from posttrainlab.errors import EndpointError
from posttrainlab.generation.endpoint import Endpoint, MalformedReply

CHAT = [{"role": "user", "content": "What is 2 + 3?"}]


def completion(text: str) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return json.dumps(body).encode()


class Server:
    """Answers request k with ``script[k]`` (``(status, headers, body)``), the last one after that."""

    def __init__(self, script: list[tuple[int, dict[str, str], bytes]]):
        self.script, self.count = script, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, headers, body = outer.script[min(outer.count, len(outer.script) - 1)]
                outer.count += 1
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Server:
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


ERROR = json.dumps({"error": {"message": "scripted", "type": "server_error"}}).encode()


@pytest.fixture
def waits(monkeypatch):
    """The waits the ``openai`` client asks for between tries, recorded instead of slept."""
    import openai._base_client as base

    seen: list[float] = []
    monkeypatch.setattr(base.time, "sleep", seen.append)
    return seen


def test_retry_after_is_honoured_and_the_retries_are_counted(waits):
    script = [(429, {"Retry-After": "7"}, ERROR), (503, {}, ERROR), (200, {}, completion("5"))]
    with Server(script) as server:
        reply, retries = Endpoint(server.url, "m", max_retries=4).create("chat", messages=CHAT, max_tokens=5)
    assert reply.choices[0].message.content == "5" and retries == 2 and server.count == 3
    assert waits[0] == 7.0 and 0 < waits[1] < 7.0  # the server's wait, then the client's own backoff


def test_a_fault_that_persists_is_one_endpoint_error_naming_its_tries(waits):
    with Server([(500, {}, ERROR)]) as server:
        with pytest.raises(EndpointError) as info:
            Endpoint(server.url, "m", max_retries=2).create("chat", messages=CHAT)
    e = info.value
    assert server.count == 3 and e.transient and e.retries == 2 and len(waits) == 2
    assert str(e).startswith(f"{server.url}: HTTP 500: ") and str(e).endswith("(after 3 tries)")


def test_a_status_not_worth_retrying_is_raised_at_once(waits):
    with Server([(404, {}, ERROR)]) as server:
        with pytest.raises(EndpointError, match=r"HTTP 404.*is 'm' the served model name") as info:
            Endpoint(server.url, "m", max_retries=4).create("chat", messages=CHAT)
    assert server.count == 1 and not info.value.transient and info.value.retries == 0 and waits == []


@pytest.mark.parametrize("body, what", [(b"", "an empty body"), (b"{not json", "a body that is not a chat completion")])
def test_a_200_that_is_no_completion_is_a_malformed_reply(waits, body, what):
    with Server([(503, {}, ERROR), (200, {}, body)]) as server:
        with pytest.raises(MalformedReply) as info:
            Endpoint(server.url, "m", max_retries=4).create("chat", messages=CHAT)
    assert info.value.what.startswith(what) and info.value.retries == 1 and not info.value.transient
    assert str(info.value).startswith(f"{server.url}: HTTP 200 with {what}")
