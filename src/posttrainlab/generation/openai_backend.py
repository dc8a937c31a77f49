"""A sampling backend over any OpenAI-compatible endpoint (vLLM, SGLang, ``posttrain serve``, a hosted API).

Written as a thin adapter with its own retry loop (the official ``openai`` client with its retries
off, so every retry is counted and backs off the way the judge client does):

- **Which endpoint**: a plain-string prompt goes to ``/completions`` as it is (the interface says a
  string reaches the model unchanged). A chat goes to ``/chat/completions`` (``mode="chat"``, the
  default), or, with ``mode="completions"``, is rendered with a local tokenizer's chat template
  (``tokenizer=``, a folder or a loaded tokenizer; ``plain_chat`` without one) and sent to
  ``/completions``.
- **n**: one request per prompt asks for ``n`` choices. A server that returns fewer (some ignore
  ``n``) is asked again for the rest, with the seed moved on, until ``n`` arrive; ``temperature == 0``
  asks for one choice and repeats it, as the other backends do.
- **Continuing a prefix** (``sample_continuations``, Monte-Carlo labelling): in chat mode the prefix
  is sent as a final assistant message with ``continue_final_message: true,
  add_generation_prompt: false`` in the request body (vLLM's and SGLang's chat extension: the
  assistant turn is continued, not closed); in completions mode the rendered prompt plus the prefix
  is the prompt. The server's own prefix cache then shares the prefix between the ``n`` choices.
- **Faults**: connection errors, timeouts and HTTP 408/409/429/5xx are retried ``http_retries``
  times with exponential backoff (``backoff_s * 2**k``, at most ``backoff_max_s``, times a random
  0.5-1); then, or at once for any other status, :class:`EndpointError` (exit 1) with one line.
- **Seeds**: ``seed`` is sent with every request (servers that honour it repeat their samples);
  ``generate`` gives prompt ``i`` the seed ``derive_seed(seed, i)``, ``sample_continuations`` each
  request its own.
- Requests run ``max_workers`` at a time in threads; results come back in prompt order.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from posttrainlab.errors import BadInput, PosttrainError, one_line
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed

#: HTTP statuses worth retrying: request timeout, conflict, rate limit (and every 5xx).
RETRY_STATUSES = frozenset({408, 409, 429})
MODES = ("chat", "completions")


class EndpointError(PosttrainError):
    """The endpoint failed (after retries, for a transient fault); ``transient`` says whether it was worth retrying."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


class OpenAIBackend:
    """A ``SamplingBackend`` (and ``PrefixSampler``) over an OpenAI-compatible endpoint (module docstring)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        mode: str = "chat",
        tokenizer: Any = None,
        max_workers: int = 8,
        timeout_s: float = 600.0,
        http_retries: int = 4,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        client: Any = None,
    ):
        if mode not in MODES:
            raise BadInput(f"mode {mode!r}: choose one of {', '.join(MODES)}")
        if max_workers < 1:
            raise BadInput(f"max_workers={max_workers}: must be at least 1")
        if not base_url:
            raise BadInput("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        import openai

        self.base_url, self.model, self.mode = base_url, model, mode
        self.max_workers, self.timeout_s = max_workers, timeout_s
        self.http_retries, self.backoff_s, self.backoff_max_s = http_retries, backoff_s, backoff_max_s
        self.sleep = sleep
        self._tokenizer_source = tokenizer
        self._tokenizer = None if isinstance(tokenizer, str) else tokenizer
        self._openai = openai
        self._client = client or openai.OpenAI(
            base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout_s, max_retries=0
        )
        self.requests_sent = 0
        self.retries = 0

    # ---- rendering -------------------------------------------------------------------------------

    @property
    def tokenizer(self):
        """The local tokenizer whose chat template renders chats in completions mode (``None``: plain roles)."""
        if self._tokenizer is None and isinstance(self._tokenizer_source, str):
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_source)
        return self._tokenizer

    def _payload(self, prompt: Prompt, prefix: str) -> tuple[str, dict[str, Any]]:
        """``(endpoint, request fields)`` for one prompt continued after ``prefix``."""
        from posttrainlab.generation.shared_prefix import continuation_text

        if isinstance(prompt, str) or self.mode == "completions":
            return "completions", {"prompt": continuation_text(self.tokenizer, prompt, prefix)}
        if not prefix:
            return "chat", {"messages": list(prompt)}
        messages = [*prompt, {"role": "assistant", "content": prefix}]
        extra = {"continue_final_message": True, "add_generation_prompt": False}
        return "chat", {"messages": messages, "extra_body": extra}

    # ---- requests --------------------------------------------------------------------------------

    def _create(self, endpoint: str, fields: dict[str, Any]) -> list[str]:
        """One request with backoff on transient faults; the choices' texts in choice order."""
        openai = self._openai
        api = self._client.chat.completions if endpoint == "chat" else self._client.completions
        for retry in range(self.http_retries + 1):
            try:
                self.requests_sent += 1
                reply = api.create(model=self.model, **fields)
            except openai.APITimeoutError:
                error = EndpointError(f"{self.base_url}: no reply within {self.timeout_s:g} s", True)
            except openai.APIConnectionError as e:
                error = EndpointError(f"{self.base_url}: cannot connect ({one_line(e)})", True)
            except openai.APIStatusError as e:
                code = e.status_code
                hint = f" (is {self.model!r} the served model name?)" if code == 404 else ""
                error = EndpointError(
                    f"{self.base_url}: HTTP {code}: {one_line(e, 160)}{hint}", code in RETRY_STATUSES or code >= 500
                )
            except (openai.APIResponseValidationError, ValueError) as e:
                error = EndpointError(f"{self.base_url}: reply is not a {endpoint} completion ({one_line(e)})", True)
            else:
                choices = sorted(getattr(reply, "choices", None) or [], key=lambda c: c.index)
                if endpoint == "chat":
                    return [(c.message.content or "") for c in choices]
                return [(c.text or "") for c in choices]
            if not error.transient or retry == self.http_retries:
                tries = f" (after {retry + 1} tries)" if error.transient else ""
                raise EndpointError(f"{error}{tries}", error.transient) from None
            self.retries += 1
            self.sleep(min(self.backoff_max_s, self.backoff_s * 2**retry) * random.uniform(0.5, 1.0))
        raise AssertionError("unreachable")

    def _sample(
        self,
        prompt: Prompt,
        prefix: str,
        *,
        n: int,
        temperature: float,
        top_p: float,
        max_new_tokens: int,
        seed: int,
        stop: list[str] | None,
    ) -> list[str]:
        endpoint, fields = self._payload(prompt, prefix)
        want = 1 if temperature == 0 else n
        texts: list[str] = []
        for attempt in range(want):  # each request returns at least one choice, or we stop
            request = dict(
                fields,
                n=want - len(texts),
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_new_tokens,
                seed=derive_seed(seed, attempt) if attempt else seed,
            )
            if stop:
                request["stop"] = list(stop)
            got = self._create(endpoint, request)
            if not got:
                raise EndpointError(f"{self.base_url}: HTTP 200 with no choices")
            texts += got[: want - len(texts)]
            if len(texts) >= want:
                break
        texts = [truncate_at_stop(t, stop) for t in texts]
        return texts * n if temperature == 0 else texts

    def _run(self, jobs: list[Callable[[], list[str]]]) -> list[list[str]]:
        if self.max_workers == 1 or len(jobs) <= 1:
            return [job() for job in jobs]
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(jobs))) as pool:
            futures = [pool.submit(job) for job in jobs]
            try:
                return [f.result() for f in futures]
            finally:
                for f in futures:
                    f.cancel()

    # ---- the two interfaces ----------------------------------------------------------------------

    def generate(
        self,
        prompts: list[Prompt],
        *,
        n: int = 1,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        """``n`` completions for each prompt, in prompt order (see ``posttrainlab.generation``)."""
        from posttrainlab.generation.transformers_backend import check_sampling

        check_sampling(n, temperature, top_p, max_new_tokens)
        kw = dict(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
        return self._run(
            [lambda p=p, i=i: self._sample(p, "", seed=derive_seed(seed, i), **kw) for i, p in enumerate(prompts)]
        )

    def sample_continuations(
        self,
        requests: Sequence[PrefixRequest],
        *,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        stop: list[str] | None = None,
    ) -> list[list[str]]:
        """``n`` continuations of each request's prefix (module docstring: how the prefix is sent)."""
        from posttrainlab.generation.transformers_backend import check_sampling

        check_sampling(n, temperature, top_p, max_new_tokens)
        kw = dict(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
        return self._run([lambda r=r: self._sample(r.prompt, r.prefix, seed=r.seed, **kw) for r in requests])


__all__ = ["EndpointError", "OpenAIBackend", "RETRY_STATUSES"]
