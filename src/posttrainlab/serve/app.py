"""The OpenAI-compatible HTTP layer of ``posttrain serve``: FastAPI routes over any ``SamplingBackend``.

Hand-written, not vLLM's server, because vLLM's server needs vLLM's engine (a GPU); this one fronts
whatever ``generate`` it is given: the transformers backend on CPU, the arith program judge, a test
double. It speaks the subset of the OpenAI API (and of vLLM's extensions) that the judge harness, the
trainers' rollout clients, ``label mc --backend openai``, the openai client's streams and
lm-evaluation-harness's ``local-completions`` / ``local-chat-completions`` use, and says so when asked for more:

- ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``. Which request fields
  are implemented, accepted as having no effect, or refused with a 400 naming them is
  ``serve.requests``'s policy (nothing is dropped silently); among them vLLM's ``top_k``, ``min_p``,
  ``min_tokens``, ``stop_token_ids``, ``ignore_eos`` and, for chat, ``add_generation_prompt`` and
  ``continue_final_message`` (what the MC labeller's OpenAI backend sends to continue a prefix).
- **Prompts are encoded here** when the backend has a tokenizer: chats with the model's chat template
  and the request's rendering options (``transformers_backend.encode_prompt``), so the context check
  and ``usage.prompt_tokens`` count the very ids the model sees; a completions prompt given as token
  ids is used as it is. A backend with ``sample_ids`` (the transformers backend) is given those ids and
  answers with token ids, so ``usage.completion_tokens`` counts the tokens generated (an eos or stop
  token included) and ``finish_reason`` is the sampler's (``length`` when ``max_tokens`` ran out, else
  ``stop``). A backend that only generates text (the program judge, test doubles) gets the chat as
  messages, reports ``stop`` and no ``usage``, and refuses (400) the fields ``generate`` has no
  argument for, log-probabilities and token-id prompts.
- **Log-probabilities** (chat ``logprobs`` / ``top_logprobs``, completions ``logprobs: k``) and completions'
  ``echo`` (the prompt prepended, and with ``logprobs`` its tokens scored, ``max_tokens: 0`` allowed):
  ``serve.logprobs``, one scoring pass over prompt + generated ids, run in the batcher's worker thread.
- **Streams** (``stream: true``): ``serve.streaming``; with the transformers backend and no
  log-probabilities, tokens are sent as they are generated (the batcher reports every decode step);
  otherwise the answer is generated whole and sent as server-sent events, token by token.
- **A request whose client disconnects is dropped** (``serve.disconnect``): queued, it never reaches a
  call; generating, its rows end at the next decode step (the transformers backend), so an abandoned
  long answer does not keep the next request waiting. Nothing is sent to a client that has gone.
- **Errors are OpenAI-shaped** (``{"error": {"message", "type", "param", "code"}}``) so a client shows
  the reason: 400 for a malformed or unsupported request, or a prompt plus ``max_tokens`` beyond the
  model's context (vLLM's behaviour, which the judge harness documents); 401 for a missing or wrong
  key when the server has one; 404 for another model name; 500 when the backend fails. A stream
  starts once its first tokens are drawn, so an error before that (the request's checks, a backend that
  fails at once) is one of these same replies; a backend failure after it is an error event.
- **Concurrent requests are batched** by :class:`~posttrainlab.serve.batcher.Batcher`, whose calls
  run in a worker thread so this event loop keeps answering; sampled requests with a seed are batched
  too, each prompt drawing from its own generator.

``create_app`` builds the app; ``serve.server`` runs it (``bind``, ``run_server``, ``ServerThread``,
re-exported here, as is ``serve.tokens.TokenCounter``).
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from posttrainlab.errors import one_line
from posttrainlab.generation import Prompt, SamplingBackend
from posttrainlab.generation.shared_prefix import Sample
from posttrainlab.serve.batcher import Batcher, Completion, SamplingParams
from posttrainlab.serve.disconnect import ClientGone, JobEvents, result_unless_gone
from posttrainlab.serve.logprobs import TokenNames, chat_content, completion_logprobs, score
from posttrainlab.serve.requests import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    backend_failure,
    beyond_generate,
    chat_messages,
    chat_options,
    chat_top_logprobs,
    check_request,
    completion_prompts,
    completion_top_logprobs,
    error_response,
    sampling_params,
    validation_message,
)
from posttrainlab.serve.server import ServerThread, bind, is_loopback, run_server, url_of
from posttrainlab.serve.streaming import LiveStream, StreamedChoice, TextFeed, events, live_events, text_pieces
from posttrainlab.serve.tokens import TokenCounter, checked_max_tokens, usage

log = logging.getLogger("posttrainlab.serve")

#: ``max_tokens`` when a completions request gives none (OpenAI's documented default).
DEFAULT_COMPLETION_MAX_TOKENS = 16
#: ``max_tokens`` when a chat request gives none and the context length is unknown (else: the rest of it).
DEFAULT_CHAT_MAX_TOKENS = 256


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
    can_score = by_ids and getattr(backend, "model", None) is not None  # log-probabilities: serve.logprobs
    names = TokenNames(tokens.tokenizer) if tokens is not None else None
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

    @app.exception_handler(ClientGone)
    async def _gone(_request: Request, _exc: ClientGone) -> Response:
        log.info("a client disconnected before its answer was ready; its request was dropped")
        return Response(status_code=499)  # nginx's "client closed request": nobody reads it

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
        context = tokens.context_length if tokens is not None else None
        return checked_max_tokens(context, requested, ids, default, DEFAULT_CHAT_MAX_TOKENS)

    def refuse_beyond_backend(name: str, why: str = "generates text only") -> None:
        message = f"{name}: not supported by this server's backend ({type(backend).__name__} {why})"
        raise ApiError(400, message, param=name)

    def params_for(req, max_tokens: int, options: dict[str, bool] | None = None) -> SamplingParams:
        params = sampling_params(req, max_tokens, tokens.vocab_size if tokens is not None else None)
        unsupported = [] if by_ids else beyond_generate(params, options)
        if unsupported:
            refuse_beyond_backend(unsupported[0])
        return params

    async def generate(request: Request, prompts: list[Prompt], params: SamplingParams, ids: list[list[int]] | None):
        """The job's completions; ``ClientGone`` (the job dropped) when the client disconnects first."""
        ticket = batcher.submit(prompts, params, ids if by_ids else None)
        try:
            return await result_unless_gone(request, ticket)
        except ClientGone:
            raise
        except Exception as e:
            raise backend_failure(e) from None

    async def scored(sequences: list[list[int]], starts: list[int], k: int):
        """``serve.logprobs.score`` in the batcher's worker thread (never beside a generation call)."""
        assert tokens is not None
        pad_id = tokens.tokenizer.pad_token_id if tokens.tokenizer.pad_token_id is not None else 0
        try:
            return await batcher.run(partial(score, backend.model, pad_id, sequences, starts, k))  # type: ignore[attr-defined]
        except Exception as e:
            log.exception("scoring failed")
            raise ApiError(500, f"the backend failed to score the tokens: {one_line(e)}", type="server_error") from None

    def choice(c: Completion) -> tuple[str, str, int | None]:
        """``(text, finish_reason, completion tokens or None)``: exact from a ``Sample``; text only otherwise."""
        if isinstance(c, str):
            return c, "stop", None
        return c.text, c.finish_reason, len(c.tokens)

    def pieces(c: Completion) -> list[tuple[str, int]]:
        """The streamed pieces of a completion: token by token from a ``Sample``, whole from text."""
        if isinstance(c, str):
            return [(c, 0)] if c else []
        assert tokens is not None
        return text_pieces(tokens.tokenizer, c.text_tokens, c.text)

    def envelope(id_prefix: str, kind: str) -> dict[str, Any]:
        created = int(time.time())
        return {"id": f"{id_prefix}-{uuid.uuid4().hex}", "object": kind, "created": created, "model": model_name}

    def reply(id_prefix: str, kind: str, choices: list[dict], used: dict[str, int] | None) -> JSONResponse:
        """An OpenAI response body: id, object, created, model, choices and, when counted, usage."""
        body = {**envelope(id_prefix, kind), "choices": choices}
        if used is not None:
            body["usage"] = used
        return JSONResponse(body)

    def sse(chunks) -> StreamingResponse:
        return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    def stream(req, id_prefix: str, kind: str, choices: list[StreamedChoice], used) -> StreamingResponse:
        """A whole answer streamed (log-probabilities, or a backend that returns whole answers)."""
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return sse(
            events(
                envelope(id_prefix, kind),
                choices,
                chat=kind.startswith("chat"),
                usage=used,
                include_usage=include_usage,
            )
        )

    def streams_live(req, k: int | None, ids) -> bool:
        """Whether a stream sends tokens as they are generated (``serve.streaming``)."""
        return bool(req.stream) and k is None and ids is not None and by_ids and batcher.streams

    async def live(request: Request, req, prompts: list[Prompt], params: SamplingParams, ids, heads=None):
        """A stream of tokens as they are generated; ``heads``: completions' echoed prompts (``serve.streaming``)."""
        chat, n = isinstance(req, ChatRequest), params.n
        job = JobEvents(batcher, request, prompts, params, ids)
        try:
            first = await job.first()  # a stream starts with its first tokens: an error before them is a JSON reply
        except ClientGone:
            raise
        except Exception as e:
            raise backend_failure(e) from None

        def finish():
            answers = [choice(c) for row in job.result() for c in row]
            return [(i, a[0], a[1]) for i, a in enumerate(answers)], usage(ids, [a[2] for a in answers])

        assert tokens is not None
        feeds = {
            (p, j): (p * n + j, TextFeed(tokens.tokenizer, params.stop)) for p in range(len(prompts)) for j in range(n)
        }
        live_stream = LiveStream(
            envelope("chatcmpl" if chat else "cmpl", "chat.completion.chunk" if chat else "text_completion"),
            chat,
            bool(req.stream_options and req.stream_options.include_usage),
            feeds,
            finish,
            lambda e: backend_failure(e).body(),
            [(p * n + j, heads[p]) for p in range(len(prompts)) for j in range(n)] if heads else [],
        )

        async def chunks():
            try:
                async for chunk in live_events(live_stream, first, job.next):
                    yield chunk
            finally:
                job.close()

        return sse(chunks())

    @router.post("/chat/completions")
    async def chat_completions(req: ChatRequest, request: Request):
        check_request(req, model_name)
        messages, options = chat_messages(req), chat_options(req)
        k = chat_top_logprobs(req)
        if k is not None and not can_score:
            refuse_beyond_backend("logprobs", "has no model to score tokens with")
        ids = [tokens.encode(messages, **options)] if tokens is not None else None
        requested = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        max_tokens = max_tokens_for(requested, ids, None)
        params = params_for(req, max_tokens, options)
        if streams_live(req, k, ids):
            return await live(request, req, [messages], params, ids)
        (out,) = await generate(request, [messages], params, ids)
        entries: list[list[dict] | None] = [None] * len(out)
        if k is not None:
            assert ids is not None and names is not None
            rows = await scored([ids[0] + list(c.text_tokens) for c in out], [len(ids[0])] * len(out), k)
            entries = [chat_content(names, row) for row in rows]
        answers = [choice(c) for c in out]
        used = usage(ids, [a[2] for a in answers])
        if req.stream:
            both = enumerate(zip(out, answers, entries, strict=True))
            streamed = [StreamedChoice(i, pieces(c), a[1], e) for i, (c, a, e) in both]
            return stream(req, "chatcmpl", "chat.completion.chunk", streamed, used)
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "finish_reason": reason,
                "logprobs": None if e is None else {"content": e},
            }
            for i, ((text, reason, _), e) in enumerate(zip(answers, entries, strict=True))
        ]
        return reply("chatcmpl", "chat.completion", choices, used)

    @router.post("/completions")
    async def completions(req: CompletionRequest, request: Request):
        check_request(req, model_name)
        k, echo = completion_top_logprobs(req), bool(req.echo)
        prompts = completion_prompts(req, tokens.vocab_size if tokens is not None else None)
        if not by_ids and any(isinstance(p, list) for p in prompts):
            refuse_beyond_backend("prompt", "does not take token ids")
        if k is not None and not can_score:
            refuse_beyond_backend("logprobs", "has no model to score tokens with")
        if req.max_tokens == 0 and not echo:
            raise ApiError(400, "max_tokens: 0 is only allowed with echo=true (the prompt scored)", param="max_tokens")
        ids = [p if isinstance(p, list) else tokens.encode(p) for p in prompts] if tokens is not None else None
        empty = [i for i, x in enumerate(ids or []) if not x]
        if empty:  # the model needs a token to condition on (vLLM's 400 too)
            raise ApiError(400, f"prompt.{empty[0]}: empty: no token to condition on", param="prompt")
        texts = [p if isinstance(p, str) else tokens.decode(p) for p in prompts]  # type: ignore[union-attr]
        max_tokens = max_tokens_for(req.max_tokens, ids, DEFAULT_COMPLETION_MAX_TOKENS)
        params = params_for(req, max_tokens)
        if max_tokens == 0:  # nothing to generate: every choice is the empty completion
            outs: list[list[Completion]] = [[Sample("", (), "length")] * params.n for _ in prompts]
        elif streams_live(req, k, ids):
            return await live(request, req, list(texts), params, ids, texts if echo else None)
        else:
            outs = await generate(request, list(texts), params, ids)
        flat = [(i, c) for i, out in enumerate(outs) for c in out]  # OpenAI's order: prompt by prompt, n each
        logprobs: list[dict | None] = [None] * len(flat)
        if k is not None:
            assert ids is not None and names is not None
            sequences = [ids[i] + list(c.tokens) for i, c in flat]
            rows = await scored(sequences, [0 if echo else len(ids[i]) for i, _ in flat], k)
            offsets = [0 if echo else len(texts[i]) for i, _ in flat]
            logprobs = [completion_logprobs(names, row, off) for row, off in zip(rows, offsets, strict=True)]
        answers = [choice(c) for _, c in flat]
        used = usage(ids, [a[2] for a in answers])
        if req.stream:
            streamed = []
            for j, ((i, c), a, lp) in enumerate(zip(flat, answers, logprobs, strict=True)):
                head = [(texts[i], len(ids[i]) if ids is not None else 0)] if echo else []
                streamed.append(StreamedChoice(j, head + pieces(c), a[1], lp))
            return stream(req, "cmpl", "text_completion", streamed, used)
        choices = [
            {"index": j, "text": (texts[i] if echo else "") + text, "finish_reason": reason, "logprobs": lp}
            for j, ((i, _), (text, reason, _), lp) in enumerate(zip(flat, answers, logprobs, strict=True))
        ]
        return reply("cmpl", "text_completion", choices, used)

    app.include_router(router)
    return app


__all__ = [
    "DEFAULT_CHAT_MAX_TOKENS",
    "DEFAULT_COMPLETION_MAX_TOKENS",
    "ServerThread",
    "TokenCounter",
    "bind",
    "create_app",
    "is_loopback",
    "run_server",
    "url_of",
]
