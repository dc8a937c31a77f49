"""What ``posttrain serve`` takes in a request, and what it refuses: every field is used or named in a 400.

Hand-written because the policy is this server's own (docs/design.md, "Reliability conventions": a field
that would change the output is refused, never dropped). Each top-level field of a request is in
exactly one of these sets:

- **implemented** (the pydantic models below): ``model``, ``messages`` / ``prompt``, ``n``, ``temperature``,
  ``top_p``, ``max_tokens`` (``max_completion_tokens`` for chat), ``seed``, ``stop``, ``stream`` and
  ``stream_options.include_usage`` (``serve.streaming``), ``best_of == n``, and vLLM's ``top_k``, ``min_p``,
  ``min_tokens``, ``stop_token_ids``, ``ignore_eos``; for chat also ``logprobs`` / ``top_logprobs``,
  ``add_generation_prompt`` and ``continue_final_message`` (``apply_chat_template``'s meaning;
  ``continue_final_message: true`` alone implies ``add_generation_prompt: false``, both true is a 400);
  for completions ``logprobs: k`` (an int: ``true`` is not ``1`` here, and is a 400), ``echo``, ``max_tokens:
  0`` with ``echo``, and ``prompt`` as a string, a list of strings, a list of token ids or a list of such
  lists (:func:`completion_prompts`). A backend that only generates text (``SamplingBackend.generate``:
  the program judge, test doubles) has no argument for vLLM's fields or the rendering options, and no
  log-probabilities or token ids: set to anything but their defaults they are a 400 there, not dropped
  (:func:`beyond_generate`; the app refuses the others).
- **no effect** (:data:`NO_EFFECT`): fields that cannot change the output (``user``, ``metadata``, ...):
  accepted and ignored.
- **neutral only** (:data:`NEUTRAL`): fields this server does not implement, accepted only with the
  value that asks for nothing (``presence_penalty: 0``, ``response_format: text``, ``echo: false`` on chat).
- **anything else**, known to OpenAI or vLLM or not (``guided_json``, ``logit_bias``, ``chat_template``...):
  400 naming the field. A field sent as ``null`` counts as not sent.

Messages take ``role`` (``system``, ``user`` or ``assistant``: :data:`ROLES`) and ``content`` (a string or
text parts); another role (``bogus``; OpenAI's ``developer`` and ``tool``, which a chat template may render
as it likes) or another key (``name``, ``tool_calls``) would change the rendering: a 400 too. Errors are
:class:`ApiError`, OpenAI-shaped (``{"error": {"message", "type", "param", "code"}}``), the message
starting with the field's name.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from posttrainlab.errors import BadInput, PosttrainError, one_line
from posttrainlab.serve.batcher import SamplingParams
from posttrainlab.serve.logprobs import MAX_LOGPROBS

#: The largest ``n`` one request may ask for.
MAX_N = 128

#: The message roles a chat may use (every chat template renders them).
ROLES = ("system", "user", "assistant")

#: Fields that cannot change the output: accepted and ignored.
NO_EFFECT = frozenset({"user", "metadata", "store", "service_tier", "parallel_tool_calls", "request_id"})

#: Fields this server does not implement, with the values that mean "not asked for".
NEUTRAL: dict[str, tuple] = {
    "prompt_logprobs": (),
    "echo": (False,),
    "suffix": ("",),
    "tools": ([],),
    "functions": ([],),
    "tool_choice": ("none", "auto"),
    "function_call": ("none", "auto"),
    "presence_penalty": (0,),
    "frequency_penalty": (0,),
    "repetition_penalty": (1,),
    "logit_bias": ({},),
    "response_format": ({"type": "text"},),
    "skip_special_tokens": (True,),
    "spaces_between_special_tokens": (True,),
    "include_stop_str_in_output": (False,),
    "use_beam_search": (False,),
}


# ---- the request bodies --------------------------------------------------------------------------


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")  # vLLM's continuous_usage_stats is not implemented: a 400

    include_usage: bool | None = None


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    n: int | None = Field(None, ge=1, le=MAX_N)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=-(2**63), le=2**64 - 1)  # what a torch.Generator takes
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    best_of: int | None = None
    top_k: int | None = None
    min_p: float | None = None
    min_tokens: int | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Request):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)


class CompletionRequest(_Request):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(None, ge=0)  # 0 only with echo: the prompt scored, nothing generated
    logprobs: bool | int | None = None  # bool first, so that ``true`` stays a bool and is refused
    echo: bool | None = None


# ---- errors --------------------------------------------------------------------------------------


class ApiError(Exception):
    """An HTTP error with an OpenAI-style body."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return error_body(self.status, self.message, type=self.type, param=self.param, code=self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


def error_body(status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code if code is not None else status}}


def error_response(status: int, message: str, *, type: str = "invalid_request_error", param=None, code=None):
    return JSONResponse(error_body(status, message, type=type, param=param, code=code), status_code=status)


def backend_failure(e: Exception) -> ApiError:
    """The reply to a failed backend call: 400 for ``BadInput`` (its arguments), else 500 (logged)."""
    if isinstance(e, BadInput):
        return ApiError(400, str(e))
    if isinstance(e, PosttrainError):
        return ApiError(500, f"the backend failed: {e}", type="server_error")
    logging.getLogger("posttrainlab.serve").error("backend call failed", exc_info=e)
    return ApiError(500, f"the backend failed: {one_line(e)}", type="server_error")


def validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
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


# ---- checks --------------------------------------------------------------------------------------


def _same(value: Any, neutral: Any) -> bool:
    """``value == neutral``, but a bool equals only a bool (``0`` is not ``False``)."""
    if isinstance(value, bool) or isinstance(neutral, bool):
        return type(value) is type(neutral) and value == neutral
    return value == neutral


def check_request(req: _Request, model_name: str) -> None:
    """404 for another model; 400 for ``best_of != n``, a stray ``stream_options`` and any field outside the policy."""
    if req.model != model_name:
        raise ApiError(
            404,
            f"The model `{req.model}` does not exist: this server serves `{model_name}` (see GET /v1/models)",
            param="model",
            code="model_not_found",
        )
    if req.stream_options is not None and not req.stream:
        raise ApiError(400, "stream_options: only allowed with stream=true", param="stream_options")
    n = req.n or 1
    if req.best_of is not None and req.best_of != n:
        raise ApiError(400, f"best_of={req.best_of}: not supported (only best_of == n)", param="best_of")
    for name, value in (req.model_extra or {}).items():
        if value is None or name in NO_EFFECT:
            continue
        if name in NEUTRAL and any(_same(value, v) for v in NEUTRAL[name]):
            continue
        why = "not supported by posttrain serve"
        if name in NEUTRAL:
            raise ApiError(400, f"{name}: {why} (only {' or '.join(map(repr, NEUTRAL[name])) or 'null'})", param=name)
        raise ApiError(400, f"{name}: {why} (it would change the output, so it is refused, not ignored)", param=name)


def chat_top_logprobs(req: ChatRequest) -> int | None:
    """How many top log-probabilities each chat token gets (0: the token's own only); None: not asked for."""
    if not req.logprobs:
        if req.top_logprobs:
            raise ApiError(400, "top_logprobs: needs logprobs=true", param="top_logprobs")
        return None
    return req.top_logprobs or 0


def completion_top_logprobs(req: CompletionRequest) -> int | None:
    """Completions' ``logprobs: k`` (0..MAX_LOGPROBS); None: not asked for (``null`` or ``false``)."""
    k = req.logprobs
    if k is None or k is False:
        return None
    if k is True or not 0 <= k <= MAX_LOGPROBS:
        raise ApiError(
            400, f"logprobs: {k!r}: give how many top log-probabilities to return, 0..{MAX_LOGPROBS}", param="logprobs"
        )
    return k


def completion_prompts(req: CompletionRequest, vocab_size: int | None = None) -> list[str | list[int]]:
    """The prompts, each a string or a list of token ids; 400 for an empty one or an id outside the vocabulary."""
    p = req.prompt
    prompts: list = [p] if isinstance(p, str) or (p and isinstance(p[0], int)) else list(p)
    if not prompts:
        raise ApiError(400, "prompt: give a string, a list of strings or token ids, not an empty list", param="prompt")
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, list):
            if not prompt:
                raise ApiError(400, f"prompt.{i}: an empty list of token ids", param="prompt")
            bad = [t for t in prompt if t < 0 or (vocab_size is not None and t >= vocab_size)]
            if bad:
                top = f"0..{vocab_size - 1}" if vocab_size is not None else ">= 0"
                raise ApiError(400, f"prompt.{i}: {bad[0]} is not a token id of this model ({top})", param="prompt")
    return prompts


def chat_messages(req: ChatRequest) -> list[dict[str, str]]:
    """The messages as the backend takes them: ``{"role", "content"}`` with text content."""
    out = []
    for i, m in enumerate(req.messages):
        if m.role not in ROLES:
            raise ApiError(
                400,
                f"messages.{i}.role: {m.role!r} is not supported by posttrain serve (only {', '.join(ROLES)})",
                param="messages",
            )
        for key, value in (m.model_extra or {}).items():
            if value is not None:
                raise ApiError(
                    400,
                    f"messages.{i}.{key}: not supported by posttrain serve (only role and content)",
                    param="messages",
                )
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
        out.append({"role": m.role, "content": content})
    return out


def chat_options(req: ChatRequest) -> dict[str, bool]:
    """``add_generation_prompt`` and ``continue_final_message`` as the chat template takes them."""
    cont = bool(req.continue_final_message)
    if cont and req.add_generation_prompt:
        raise ApiError(
            400,
            "continue_final_message: cannot be true with add_generation_prompt=true (continue the final message, "
            "or open a new assistant turn, not both)",
            param="continue_final_message",
        )
    add = not cont if req.add_generation_prompt is None else req.add_generation_prompt
    return {"add_generation_prompt": add, "continue_final_message": cont}


def _stop(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return tuple(s for s in ([stop] if isinstance(stop, str) else stop) if s)


def sampling_params(req: _Request, max_tokens: int, vocab_size: int | None = None) -> SamplingParams:
    """The request's sampling parameters (OpenAI's defaults), range-checked as the sampler checks them."""
    from posttrainlab.generation.shared_prefix import check_options

    top_k = req.top_k if req.top_k is not None else 0
    params = SamplingParams(
        n=req.n or 1,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        max_tokens=max_tokens,
        seed=req.seed,
        stop=_stop(req.stop),
        top_k=0 if top_k == -1 else top_k,
        min_p=req.min_p or 0.0,
        min_tokens=req.min_tokens or 0,
        stop_token_ids=tuple(req.stop_token_ids or ()),
        ignore_eos=bool(req.ignore_eos),
    )
    try:
        check_options(
            top_k=top_k, min_p=params.min_p, min_tokens=params.min_tokens, max_new_tokens=max_tokens,
            stop_token_ids=params.stop_token_ids, vocab_size=vocab_size,
        )  # fmt: skip
    except BadInput as e:
        raise ApiError(400, str(e), param=str(e).split("=")[0].split(":")[0]) from None
    return params


def beyond_generate(params: SamplingParams, options: dict[str, bool] | None = None) -> list[str]:
    """The fields set to non-defaults that ``SamplingBackend.generate`` has no argument for."""
    names = params.beyond_generate()
    if options and (not options["add_generation_prompt"] or options["continue_final_message"]):
        names += [k for k, v in options.items() if v != (k == "add_generation_prompt")]
    return names


__all__ = [
    "ApiError",
    "ChatRequest",
    "CompletionRequest",
    "MAX_N",
    "NEUTRAL",
    "NO_EFFECT",
    "ROLES",
    "StreamOptions",
    "backend_failure",
    "beyond_generate",
    "chat_messages",
    "chat_options",
    "chat_top_logprobs",
    "check_request",
    "completion_prompts",
    "completion_top_logprobs",
    "error_body",
    "error_response",
    "sampling_params",
    "validation_message",
]
