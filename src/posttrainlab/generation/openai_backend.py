"""A sampling backend over any OpenAI-compatible endpoint (vLLM, SGLang, ``posttrain serve``, a hosted API).

Written as a thin adapter over :class:`~posttrainlab.generation.endpoint.Endpoint` (the official
``openai`` client, which retries network faults itself):

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
  times by the ``openai`` client (its backoff, honouring ``Retry-After``); then, or at once for any
  other status or a 200 whose body is no completion, :class:`EndpointError` (exit 1) with one line.
  ``retries`` counts the retries spent.
- **Seeds**: ``seed`` is sent with every request (servers that honour it repeat their samples);
  ``generate`` gives prompt ``i`` the seed ``derive_seed(seed, i)``, ``sample_continuations`` each
  request its own.
- Requests run ``max_workers`` at a time in threads; results come back in prompt order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from posttrainlab.errors import BadInput, EndpointError
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.endpoint import RETRY_STATUSES, Endpoint
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed

MODES = ("chat", "completions")


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
        client: Any = None,
    ):
        if mode not in MODES:
            raise BadInput(f"mode {mode!r}: choose one of {', '.join(MODES)}")
        if max_workers < 1:
            raise BadInput(f"max_workers={max_workers}: must be at least 1")
        if not base_url:
            raise BadInput("the openai backend needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        self.base_url, self.model, self.mode = base_url, model, mode
        self.max_workers, self.timeout_s, self.http_retries = max_workers, timeout_s, http_retries
        self._tokenizer_source = tokenizer
        self._tokenizer = None if isinstance(tokenizer, str) else tokenizer
        self.endpoint = Endpoint(
            base_url, model, api_key=api_key or "EMPTY", timeout_s=timeout_s, max_retries=http_retries, client=client
        )
        self._count = threading.Lock()
        self.requests_sent = 0  # HTTP requests sent, retries included
        self.retries = 0  # of those, the retries the client made after a transient fault

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
        """One request (the client retries network faults); the choices' texts in choice order."""
        try:
            reply, retries = self.endpoint.create(endpoint, **fields)
        except EndpointError as e:
            self._counted(e.retries)
            raise
        self._counted(retries)
        choices = sorted(getattr(reply, "choices", None) or [], key=lambda c: c.index)
        if endpoint == "chat":
            return [(c.message.content or "") for c in choices]
        return [(c.text or "") for c in choices]

    def _counted(self, retries: int) -> None:
        with self._count:  # requests run in threads
            self.requests_sent += 1 + retries
            self.retries += retries

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
