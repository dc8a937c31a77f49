"""Running a ``posttrain serve`` app: binding the socket, serving it with uvicorn, a test-server thread.

``bind`` and ``run_server`` serve an app from the CLI (the socket is bound before a model loads, so a
busy port fails at once); ``ServerThread`` runs it in a background thread on a free loopback port for
tests and benchmarks. Split from ``serve.app`` (which re-exports these names) so the HTTP layer and
the process around it are read apart.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time

from fastapi import FastAPI

from posttrainlab.errors import BadInput


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_of(sock: socket.socket) -> str:
    """The base URL (``http://HOST:PORT/v1``) of a bound socket."""
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/v1"


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port=0``: a free one); ``BadInput`` when that is impossible."""
    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port}: must be in 0..65535")
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise BadInput(f"--host {host}: cannot resolve it ({e.strerror})") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        hint = " (another server is using it: choose another --port, or 0 for a free one)" if port else ""
        raise BadInput(f"{host}:{port}: cannot listen there: {e.strerror or e}{hint}") from None
    return sock


def uvicorn_config(app: FastAPI, *, log_level: str, access_log: bool):
    import uvicorn

    return uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="on", timeout_keep_alive=30)


def run_server(app: FastAPI, sock: socket.socket, *, log_level: str = "warning", access_log: bool = False) -> None:
    """Serve ``app`` on the bound ``sock`` until interrupted (Ctrl-C stops it cleanly)."""
    import uvicorn

    uvicorn.Server(uvicorn_config(app, log_level=log_level, access_log=access_log)).run(sockets=[sock])


class ServerThread:
    """``app`` served by uvicorn in a daemon thread on a free loopback port (tests, benchmarks).

    ``with ServerThread(create_app(backend, "m")) as server:`` then point a client at ``server.url``.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"):
        import uvicorn

        self.app = app
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.server = uvicorn.Server(uvicorn_config(app, log_level=log_level, access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
