"""The one client of OpenAI-compatible endpoints (vLLM, SGLang, ``posttrain serve``, a hosted API).

The sampling backend (``generation.openai_backend``) and the judge client (``runners.judge_client``)
both send their requests through :class:`Endpoint`, which wraps the official ``openai`` client:

- **Network faults are the library's to retry**: connection errors, timeouts and HTTP
  408/409/429/5xx are retried by ``openai`` itself, ``max_retries`` times, with its exponential
  backoff and jitter, honouring a server's ``Retry-After`` (up to two minutes); ``timeout_s``
  bounds each try. Nothing here loops.
- **One error**: when the client gives up, or at once for any other status, the fault is one
  :class:`~posttrainlab.errors.EndpointError` with a one-line message naming the endpoint (a 404 asks
  whether the model name is the served one); ``transient`` says whether it was of the retried kind,
  ``retries`` how many retries the client spent (read from the ``x-stainless-retry-count`` header
  ``openai`` puts on each try).
- **Retries are counted**: :meth:`Endpoint.create` returns the reply with the retries spent on it
  (``retries_taken`` of the raw response), so run files can record them.
- **A 200 whose body is no completion** (empty, not JSON) is :class:`MalformedReply`, not retried
  by the library: the judge treats it as an invalid answer and asks again, the sampler stops.

Written by hand only for the project's messages and counts; the retrying is ``openai``'s.
"""

from __future__ import annotations

import json
from typing import Any

from posttrainlab.errors import EndpointError, one_line

#: The HTTP statuses ``openai`` retries (request timeout, conflict, rate limit; and every 5xx).
RETRY_STATUSES = frozenset({408, 409, 429})
#: ``openai``'s own default; the harnesses pass their ``http_retries``.
DEFAULT_MAX_RETRIES = 2


class MalformedReply(EndpointError):
    """HTTP 200 whose body is not a completion; ``what`` says what came instead ("an empty body")."""

    def __init__(self, message: str, what: str, retries: int = 0):
        super().__init__(message, transient=False, retries=retries)
        self.what = what


def is_transient(status: int) -> bool:
    """Whether an HTTP status is a fault worth retrying (the statuses ``openai`` retries).

    >>> is_transient(429), is_transient(503), is_transient(404)
    (True, True, False)
    """
    return status in RETRY_STATUSES or status >= 500


def _retries_spent(error: Any) -> int:
    """How many retries ``openai`` spent before raising ``error`` (0 when it cannot tell)."""
    request = getattr(error, "request", None)
    try:
        return int(request.headers.get("x-stainless-retry-count", 0)) if request is not None else 0
    except (TypeError, ValueError):
        return 0


class Endpoint:
    """One served model behind an OpenAI-compatible URL (module docstring).

    ``client``: an ``openai.OpenAI`` (or a look-alike) to use instead of building one.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout_s: float = 600.0,
        max_retries: int = DEFAULT_MAX_RETRIES,
        client: Any = None,
    ):
        import openai

        self.base_url, self.model, self.timeout_s, self.max_retries = base_url, model, timeout_s, max_retries
        self._openai = openai
        self.client = client or openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries
        )

    def create(self, kind: str, **fields: Any) -> tuple[Any, int]:
        """One request to ``/chat/completions`` (``kind="chat"``) or ``/completions``: ``(reply, retries spent)``.

        Raises :class:`~posttrainlab.errors.EndpointError` once the client has given up, and
        :class:`MalformedReply` for a 200 whose body is not a completion.
        """
        openai = self._openai
        api = self.client.chat.completions if kind == "chat" else self.client.completions
        try:
            raw = api.with_raw_response.create(model=self.model, **fields)
        except openai.APITimeoutError as e:
            message = f"{self.base_url}: no reply within {self.timeout_s:g} s"
            raise EndpointError(message, True, _retries_spent(e)) from None
        except openai.APIConnectionError as e:
            raise EndpointError(f"{self.base_url}: cannot connect ({one_line(e)})", True, _retries_spent(e)) from None
        except openai.APIStatusError as e:
            code = e.status_code
            hint = f" (is {self.model!r} the served model name? see {self.base_url}/models)" if code == 404 else ""
            message = f"{self.base_url}: HTTP {code}: {one_line(e, 160)}{hint}"
            raise EndpointError(message, is_transient(code), _retries_spent(e)) from None
        retries = getattr(raw, "retries_taken", 0)
        try:
            return raw.parse(), retries
        except (openai.APIResponseValidationError, ValueError) as e:
            empty = isinstance(e, json.JSONDecodeError) and not e.doc.strip()
            kind_name = "chat completion" if kind == "chat" else "completion"
            what = "an empty body" if empty else f"a body that is not a {kind_name} ({one_line(e)})"
            raise MalformedReply(f"{self.base_url}: HTTP 200 with {what}", what, retries) from None


__all__ = ["DEFAULT_MAX_RETRIES", "Endpoint", "EndpointError", "MalformedReply", "RETRY_STATUSES", "is_transient"]
