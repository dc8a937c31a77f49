"""The OpenAI-compatible HTTP layer of ``posttrain serve``: FastAPI routes over any ``SamplingBackend``.

Hand-written, not vLLM's server, because vLLM's server needs vLLM's engine (a GPU); this one fronts
whatever ``generate`` it is given: the transformers backend on CPU, the arith program judge, a test
double. It speaks the subset of the OpenAI API that the judge harness and the trainers' rollout
clients use, and says so when asked for more:

- ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions`` with ``temperature``
  (default 1, as OpenAI), ``top_p``, ``max_tokens`` (``max_completion_tokens`` for chat), ``n``,
  ``seed`` and ``stop`` (a string or a list). Responses follow the OpenAI schema; ``usage`` is filled
  in when the backend has a tokenizer (counted by re-tokenizing; ``finish_reason`` is ``length`` when
  a completion used all of ``max_tokens``, else ``stop``).
- **Errors are OpenAI-shaped** (``{"error": {"message", "type", "param", "code"}}``) so a client shows
  the reason: 400 for a malformed or unsupported request (``stream``, ``logprobs``, ``echo``, tools,
  penalties...: refused rather than silently ignored), or a prompt plus ``max_tokens`` beyond the
  model's context (vLLM's behaviour, which the judge harness documents); 401 for a missing or wrong
  key when the server has one; 404 for another model name; 500 when the backend fails.
- **Chats go to the backend as messages**, not as text: the backend renders them (the transformers
  backend with the model's chat template, or a plain ``role: content`` prompt when it has none).
- **Concurrent requests are batched** by :class:`~posttrainlab.serve.batcher.Batcher`, whose
  ``generate`` runs in a worker thread so this event loop keeps answering.

``create_app`` builds the app; ``bind`` and ``run_server`` serve it from the CLI (the socket is bound
before a model loads, so a busy port fails at once); ``ServerThread`` runs it in a background thread on
a free loopback port for tests and benchmarks.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
import threading
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from posttrainlab.errors import BadInput, PosttrainError, one_line
from posttrainlab.generation import Prompt, SamplingBackend
from posttrainlab.serve.batcher import Batcher, SamplingParams

log = logging.getLogger("posttrainlab.serve")

#: ``max_tokens`` when a completions request gives none (OpenAI's documented default).
DEFAULT_COMPLETION_MAX_TOKENS = 16
#: ``max_tokens`` when a chat request gives none and the context length is unknown (else: the rest of it).
DEFAULT_CHAT_MAX_TOKENS = 256
#: The largest ``n`` one request may ask for.
MAX_N = 128

# Request fields this server does not implement, with the values that mean "not asked for".
_UNSUPPORTED: dict[str, tuple] = {
    "logprobs": (None, False, 0),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "suffix": (None, ""),
    "tools": (None, []),
    "functions": (None, []),
    "tool_choice": (None, "none", "auto"),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "repetition_penalty": (None, 1),
    "logit_bias": (None, {}),
    "response_format": (None, {"type": "text"}),
}


# ---- requests ------------------------------------------------------------------------------------


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    n: int | None = Field(None, ge=1, le=MAX_N)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    best_of: int | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)


class CompletionRequest(_Request):
    prompt: str | list[str]


# ---- errors --------------------------------------------------------------------------------------


class ApiError(Exception):
    """An HTTP error with an OpenAI-style body."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param, code=self.code)


def error_response(status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None):
    body = {"error": {"message": message, "type": type, "param": param, "code": code if code is not None else status}}
    return JSONResponse(body, status_code=status)


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    """The first few validation errors on one line, and the field of the first."""
    parts, param = [], None
    for err in exc.errors()[:3]:
        if err.get("type") == "json_invalid":
            return f"the body is not valid JSON ({err.get('msg')} at position {err['loc'][-1]})", None
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        where = ".".join(loc)
        param = param or where or None
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts) or "invalid request", param


# ---- token counts --------------------------------------------------------------------------------


class TokenCounter:
    """Token counts for ``usage``, ``finish_reason`` and the context check, from a backend's tokenizer.

    Prompts are counted as the transformers backend encodes them (``encode_prompt``); completions by
    re-tokenizing their text, which is exact for the byte-level tiny tokenizer and close for BPE ones.
    """

    def __init__(self, tokenizer, context_length: int | None = None):
        self.tokenizer = tokenizer
        self.context_length = context_length

    @classmethod
    def for_backend(cls, backend: SamplingBackend) -> TokenCounter | None:
        """A counter when the backend has a ``tokenizer`` (and, for the context, ``model.config``); else None."""
        tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is None or not callable(tokenizer):
            return None
        config = getattr(getattr(backend, "model", None), "config", None)
        context = getattr(config, "max_position_embeddings", None)
        return cls(tokenizer, context if isinstance(context, int) and context > 0 else None)

    def prompt(self, prompt: Prompt) -> int:
        from posttrainlab.generation.transformers_backend import encode_prompt

        return len(encode_prompt(self.tokenizer, prompt))

    def text(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


# ---- the app -------------------------------------------------------------------------------------


def _check_request(req: _Request, model_name: str) -> None:
    if req.model != model_name:
        raise ApiError(
            404,
            f"The model `{req.model}` does not exist: this server serves `{model_name}` (see GET /v1/models)",
            param="model",
            code="model_not_found",
        )
    if req.stream:
        raise ApiError(400, "stream: streaming is not supported by posttrain serve; send stream=false", param="stream")
    n = req.n or 1
    if req.best_of is not None and req.best_of != n:
        raise ApiError(400, f"best_of={req.best_of}: not supported (only best_of == n)", param="best_of")
    for name, value in (req.model_extra or {}).items():
        if name in _UNSUPPORTED and value not in _UNSUPPORTED[name]:
            raise ApiError(400, f"{name}: not supported by posttrain serve", param=name)


def _message(m: ChatMessage, i: int) -> dict[str, str]:
    """A message as the backend takes it: ``{"role", "content"}`` with text content."""
    content = m.content
    if content is None:
        content = ""
    elif isinstance(content, list):
        texts = []
        for part in content:
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"messages.{i}.content: only text parts are supported", param="messages")
            texts.append(part["text"])
        content = "\n".join(texts)
    return {"role": m.role, "content": content}


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return tuple(s for s in ([stop] if isinstance(stop, str) else stop) if s)


def create_app(
    backend: SamplingBackend,
    model_name: str,
    api_key: str | None = None,
    *,
    max_batch_size: int = 32,
    batch_wait_ms: float = 10.0,
    seed: int | None = None,
    counter: TokenCounter | None | str = "auto",
) -> FastAPI:
    """An OpenAI-compatible app serving ``backend`` under ``model_name`` (module docstring).

    ``api_key``: when set, every ``/v1`` request must send ``Authorization: Bearer <api_key>``.
    ``max_batch_size`` / ``batch_wait_ms``: the batcher's limits. ``seed``: the batcher's generator for
    sampled requests without a seed (None: from the OS). ``counter``: token counts ("auto": from the
    backend's tokenizer when it has one; None: no usage, no context check).
    The batcher is ``app.state.batcher`` (its counters say how many ``generate`` calls were made).
    """
    batcher = Batcher(backend, max_batch_size=max_batch_size, wait_ms=batch_wait_ms, seed=seed)
    tokens = TokenCounter.for_backend(backend) if counter == "auto" else counter
    assert tokens is None or isinstance(tokens, TokenCounter)
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await batcher.close()

    app = FastAPI(title="posttrain serve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.batcher = batcher
    app.state.model_name = model_name
    app.state.counter = tokens

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        return error_response(400, message, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    def authorize(authorization: str | None = Header(None)) -> None:
        if api_key is None:
            return
        if not authorization:
            raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", code="invalid_api_key")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            raise ApiError(401, "incorrect API key", code="invalid_api_key")

    router = APIRouter(prefix="/v1", dependencies=[Depends(authorize)])

    def model_card() -> dict[str, Any]:
        return {"id": model_name, "object": "model", "created": created, "owned_by": "posttrainlab"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/models")
    async def list_models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [model_card()]})

    @router.get("/models/{model_id:path}")
    async def get_model(model_id: str) -> JSONResponse:
        if model_id != model_name:
            raise ApiError(404, f"The model `{model_id}` does not exist", param="model", code="model_not_found")
        return JSONResponse(model_card())

    def max_tokens_for(requested: int | None, prompt_tokens: list[int] | None, default: int | None) -> int:
        """The request's ``max_tokens``, checked against the context; ``default=None`` means the rest of it."""
        context = tokens.context_length if tokens is not None else None
        longest = max(prompt_tokens) if prompt_tokens else 0
        if context is not None and longest >= context:
            raise ApiError(
                400,
                f"This model's maximum context length is {context} tokens, and the prompt has {longest} tokens",
                param="messages",
                code="context_length_exceeded",
            )
        if requested is None:
            if default is not None:
                requested = default
            elif context is not None:
                requested = context - longest
            else:
                requested = DEFAULT_CHAT_MAX_TOKENS
        if context is not None and longest + requested > context:
            raise ApiError(
                400,
                f"This model's maximum context length is {context} tokens. However, you requested {requested} "
                f"output tokens and your prompt contains {longest} input tokens, for a total of "
                f"{longest + requested} tokens. Please reduce max_tokens.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return requested

    def params_for(req: _Request, max_tokens: int) -> SamplingParams:
        return SamplingParams(
            n=req.n or 1,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            max_tokens=max_tokens,
            seed=req.seed,
            stop=_stop(req.stop),
        )

    async def generate(prompts: list[Prompt], params: SamplingParams) -> list[list[str]]:
        try:
            return await batcher.generate(prompts, params)
        except BadInput as e:
            raise ApiError(400, str(e)) from None
        except PosttrainError as e:
            raise ApiError(500, f"the backend failed: {e}", type="server_error") from None
        except Exception as e:
            log.exception("backend.generate failed")
            raise ApiError(500, f"the backend failed: {one_line(e)}", type="server_error") from None

    def finished(text: str, max_tokens: int) -> tuple[str, int | None]:
        """``(finish_reason, completion tokens or None)``."""
        if tokens is None:
            return "stop", None
        used = min(tokens.text(text), max_tokens)  # re-tokenized text can count more (bytes cut mid-character)
        return ("length" if used >= max_tokens else "stop"), used

    def usage(prompt_tokens: list[int] | None, completion_tokens: list[int | None]) -> dict[str, int] | None:
        if prompt_tokens is None or any(c is None for c in completion_tokens):
            return None
        p, c = sum(prompt_tokens), sum(completion_tokens)  # type: ignore[arg-type]
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def reply(id_prefix: str, kind: str, choices: list[dict], used: dict[str, int] | None) -> JSONResponse:
        """An OpenAI response body: id, object, created, model, choices and, when counted, usage."""
        body = {
            "id": f"{id_prefix}-{uuid.uuid4().hex}",
            "object": kind,
            "created": int(time.time()),
            "model": model_name,
            "choices": choices,
        }
        if used is not None:
            body["usage"] = used
        return JSONResponse(body)

    @router.post("/chat/completions")
    async def chat_completions(req: ChatRequest) -> JSONResponse:
        _check_request(req, model_name)
        messages = [_message(m, i) for i, m in enumerate(req.messages)]
        prompt_tokens = [tokens.prompt(messages)] if tokens is not None else None
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        max_tokens = max_tokens_for(requested, prompt_tokens, None)
        (texts,) = await generate([messages], params_for(req, max_tokens))
        choices, counts = [], []
        for i, text in enumerate(texts):
            reason, used = finished(text, max_tokens)
            counts.append(used)
            message = {"role": "assistant", "content": text}
            choices.append({"index": i, "message": message, "finish_reason": reason, "logprobs": None})
        return reply("chatcmpl", "chat.completion", choices, usage(prompt_tokens, counts))

    @router.post("/completions")
    async def completions(req: CompletionRequest) -> JSONResponse:
        _check_request(req, model_name)
        prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
        if not prompts:
            raise ApiError(400, "prompt: give a string or a non-empty list of strings", param="prompt")
        prompt_tokens = [tokens.prompt(p) for p in prompts] if tokens is not None else None
        max_tokens = max_tokens_for(req.max_tokens, prompt_tokens, DEFAULT_COMPLETION_MAX_TOKENS)
        outs = await generate(prompts, params_for(req, max_tokens))
        choices, counts = [], []
        for texts in outs:  # OpenAI's order: prompt by prompt, n choices each
            for text in texts:
                reason, used = finished(text, max_tokens)
                counts.append(used)
                choices.append({"index": len(choices), "text": text, "finish_reason": reason, "logprobs": None})
        return reply("cmpl", "text_completion", choices, usage(prompt_tokens, counts))

    app.include_router(router)
    return app


# ---- running it ----------------------------------------------------------------------------------


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


def _config(app: FastAPI, *, log_level: str, access_log: bool):
    import uvicorn

    return uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="on", timeout_keep_alive=30)


def run_server(app: FastAPI, sock: socket.socket, *, log_level: str = "warning", access_log: bool = False) -> None:
    """Serve ``app`` on the bound ``sock`` until interrupted (Ctrl-C stops it cleanly)."""
    import uvicorn

    uvicorn.Server(_config(app, log_level=log_level, access_log=access_log)).run(sockets=[sock])


class ServerThread:
    """``app`` served by uvicorn in a daemon thread on a free loopback port (tests, benchmarks).

    ``with ServerThread(create_app(backend, "m")) as server:`` then point a client at ``server.url``.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"):
        import uvicorn

        self.app = app
        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.server = uvicorn.Server(_config(app, log_level=log_level, access_log=False))
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
