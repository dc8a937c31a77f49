"""The OpenAI-compatible HTTP layer of ``posttrain serve``: FastAPI routes over any ``SamplingBackend``.

Hand-written, not vLLM's server, because vLLM's server needs vLLM's engine (a GPU); this one fronts
whatever ``generate`` it is given: the transformers backend on CPU, the arith program judge, a test
double. It speaks the subset of the OpenAI API (and of vLLM's extensions) that the judge harness, the
trainers' rollout clients and ``label mc --backend openai`` use, and says so when asked for more:

- ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``. Which request fields
  are implemented, accepted as having no effect, or refused with a 400 naming them is
  ``serve.requests``'s policy (nothing is dropped silently); among them vLLM's ``top_k``, ``min_p``,
  ``min_tokens``, ``stop_token_ids``, ``ignore_eos`` and, for chat, ``add_generation_prompt`` and
  ``continue_final_message`` (what the MC labeller's OpenAI backend sends to continue a prefix).
- **Prompts are encoded here** when the backend has a tokenizer: chats with the model's chat template
  and the request's rendering options (``transformers_backend.encode_prompt``), so the context check
  and ``usage.prompt_tokens`` count the very ids the model sees. A backend with ``sample_ids`` (the
  transformers backend) is given those ids and answers with token ids, so ``usage.completion_tokens``
  counts the tokens generated (an eos or stop token included) and ``finish_reason`` is the sampler's
  (``length`` when ``max_tokens`` ran out, else ``stop``). A backend that only generates text (the
  program judge, test doubles) gets the chat as messages, reports ``stop`` and no ``usage``, and
  refuses (400) the fields ``generate`` has no argument for.
- **Errors are OpenAI-shaped** (``{"error": {"message", "type", "param", "code"}}``) so a client shows
  the reason: 400 for a malformed or unsupported request, or a prompt plus ``max_tokens`` beyond the
  model's context (vLLM's behaviour, which the judge harness documents); 401 for a missing or wrong
  key when the server has one; 404 for another model name; 500 when the backend fails.
- **Concurrent requests are batched** by :class:`~posttrainlab.serve.batcher.Batcher`, whose calls
  run in a worker thread so this event loop keeps answering; sampled requests with a seed are batched
  too, each prompt drawing from its own generator.

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
from starlette.exceptions import HTTPException as StarletteHTTPException

from posttrainlab.errors import BadInput, PosttrainError, one_line
from posttrainlab.generation import Prompt, SamplingBackend
from posttrainlab.serve.batcher import Batcher, Completion, SamplingParams
from posttrainlab.serve.requests import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    beyond_generate,
    chat_messages,
    chat_options,
    check_request,
    error_response,
    sampling_params,
    validation_message,
)

log = logging.getLogger("posttrainlab.serve")

#: ``max_tokens`` when a completions request gives none (OpenAI's documented default).
DEFAULT_COMPLETION_MAX_TOKENS = 16
#: ``max_tokens`` when a chat request gives none and the context length is unknown (else: the rest of it).
DEFAULT_CHAT_MAX_TOKENS = 256


# ---- token counts --------------------------------------------------------------------------------


class TokenCounter:
    """Prompt token ids for the context check, ``usage`` and ``sample_ids``, from a backend's tokenizer.

    Prompts are encoded as the transformers backend encodes them (``encode_prompt``, with the chat
    rendering options); ``vocab_size`` bounds ``stop_token_ids`` when the model config says it.
    """

    def __init__(self, tokenizer, context_length: int | None = None, vocab_size: int | None = None):
        self.tokenizer = tokenizer
        self.context_length = context_length
        self.vocab_size = vocab_size

    @classmethod
    def for_backend(cls, backend: SamplingBackend) -> TokenCounter | None:
        """A counter when the backend has a ``tokenizer`` (and, for the limits, ``model.config``); else None."""
        tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is None or not callable(tokenizer):
            return None
        config = getattr(getattr(backend, "model", None), "config", None)
        context, vocab = getattr(config, "max_position_embeddings", None), getattr(config, "vocab_size", None)
        positive = [x if isinstance(x, int) and x > 0 else None for x in (context, vocab)]
        return cls(tokenizer, *positive)

    def encode(self, prompt: Prompt, **options) -> list[int]:
        from posttrainlab.generation.transformers_backend import encode_prompt

        try:
            return encode_prompt(self.tokenizer, prompt, **options)
        except BadInput as e:
            raise ApiError(400, f"messages: {e}", param="messages") from None


# ---- the app -------------------------------------------------------------------------------------


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
    sampled requests without a seed (None: from the OS). ``counter``: prompt encoding ("auto": with the
    backend's tokenizer when it has one; None: no encoding, so no usage, no context check and no
    ``sample_ids``). The batcher is ``app.state.batcher`` (its counters say how many backend calls were made).
    """
    batcher = Batcher(backend, max_batch_size=max_batch_size, wait_ms=batch_wait_ms, seed=seed)
    tokens = TokenCounter.for_backend(backend) if counter == "auto" else counter
    assert tokens is None or isinstance(tokens, TokenCounter)
    by_ids = tokens is not None and callable(getattr(backend, "sample_ids", None))  # module docstring
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
        message, param = validation_message(exc)
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

    def max_tokens_for(requested: int | None, ids: list[list[int]] | None, default: int | None) -> int:
        """The request's ``max_tokens``, checked against the context; ``default=None`` means the rest of it."""
        context = tokens.context_length if tokens is not None else None
        longest = max(map(len, ids)) if ids else 0
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

    def params_for(req, max_tokens: int, options: dict[str, bool] | None = None) -> SamplingParams:
        params = sampling_params(req, max_tokens, tokens.vocab_size if tokens is not None else None)
        unsupported = [] if by_ids else beyond_generate(params, options)
        if unsupported:
            name = unsupported[0]
            raise ApiError(
                400,
                f"{name}: not supported by this server's backend ({type(backend).__name__} generates text only)",
                param=name,
            )
        return params

    async def generate(prompts: list[Prompt], params: SamplingParams, ids: list[list[int]] | None):
        try:
            return await batcher.generate(prompts, params, ids if by_ids else None)
        except BadInput as e:
            raise ApiError(400, str(e)) from None
        except PosttrainError as e:
            raise ApiError(500, f"the backend failed: {e}", type="server_error") from None
        except Exception as e:
            log.exception("backend call failed")
            raise ApiError(500, f"the backend failed: {one_line(e)}", type="server_error") from None

    def choice(c: Completion) -> tuple[str, str, int | None]:
        """``(text, finish_reason, completion tokens or None)``: exact from a ``Sample``; text only otherwise."""
        if isinstance(c, str):
            return c, "stop", None
        return c.text, c.finish_reason, len(c.tokens)

    def usage(ids: list[list[int]] | None, completion_tokens: list[int | None]) -> dict[str, int] | None:
        if ids is None or any(c is None for c in completion_tokens):
            return None
        p, c = sum(map(len, ids)), sum(completion_tokens)  # type: ignore[arg-type]
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
        check_request(req, model_name)
        messages, options = chat_messages(req), chat_options(req)
        ids = [tokens.encode(messages, **options)] if tokens is not None else None
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        max_tokens = max_tokens_for(requested, ids, None)
        (out,) = await generate([messages], params_for(req, max_tokens, options), ids)
        choices, counts = [], []
        for i, c in enumerate(out):
            text, reason, used = choice(c)
            counts.append(used)
            message = {"role": "assistant", "content": text}
            choices.append({"index": i, "message": message, "finish_reason": reason, "logprobs": None})
        return reply("chatcmpl", "chat.completion", choices, usage(ids, counts))

    @router.post("/completions")
    async def completions(req: CompletionRequest) -> JSONResponse:
        check_request(req, model_name)
        prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
        if not prompts:
            raise ApiError(400, "prompt: give a string or a non-empty list of strings", param="prompt")
        ids = [tokens.encode(p) for p in prompts] if tokens is not None else None
        max_tokens = max_tokens_for(req.max_tokens, ids, DEFAULT_COMPLETION_MAX_TOKENS)
        outs = await generate(prompts, params_for(req, max_tokens), ids)
        choices, counts = [], []
        for out in outs:  # OpenAI's order: prompt by prompt, n choices each
            for c in out:
                text, reason, used = choice(c)
                counts.append(used)
                choices.append({"index": len(choices), "text": text, "finish_reason": reason, "logprobs": None})
        return reply("cmpl", "text_completion", choices, usage(ids, counts))

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
