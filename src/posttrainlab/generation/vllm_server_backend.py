"""The ``vllm-server`` sampling backend: a ``vllm serve`` the lab runs (``generation.vllm_server``), sent token ids.

Why token ids: the prompt is rendered and tokenized here, by the lab's own ``generation.prompts`` (chat template,
``encode_prompt``; a prefix by ``shared_prefix.encode_request``'s BPE boundary rule), and sent to
``/v1/completions`` as a list of ids, so vLLM sees exactly the tokens the transformers backend sees. The reply's
``token_ids`` (``return_token_ids``) are decoded here by the same tokenizer (``sampling.make_sample``: stop token
dropped, cut at a stop string), so texts are what the transformers backend would write for the same tokens.

- **Stopping as the lab does**: ``ignore_eos`` with ``stop_token_ids`` = the lab's end tokens (the tokenizer's
  eos and any the model's ``generation_config.json`` names, as ``TransformersBackend.eos_ids``), so a row ends on
  exactly the tokens it ends on in the other backends; ``stop`` strings are vLLM's and are cut again here.
- **Per request**: ``n``, ``temperature``, ``top_p``, ``max_tokens``, ``seed`` (vLLM gives sample ``j`` of a
  request the seed ``seed + j``), ``stop``; ``temperature == 0`` asks for one greedy sample and repeats it.
  ``generate`` gives prompt ``i`` the seed ``derive_seed(seed, i)``, ``sample_continuations`` each request its own,
  so a request's samples do not depend on what else is in flight.
- **Concurrency**: ``batch_size`` requests at a time (threads); vLLM batches what is in flight. Results come back
  in request order. HTTP faults are ``generation.endpoint.Endpoint``'s (the ``openai`` client retries).
- **Three interfaces**: ``generate`` (``SamplingBackend``), ``sample_continuations`` (``PrefixSampler``, Monte-Carlo
  labelling) and ``sample_ids`` (token-id prompts returning ``Sample``: beam search's ``BackendProposer``).
- **The server starts at the first request** (a verb whose samples are reused starts none); ``close()`` lets go
  of it (``vllm_server.release``: its last user stops it), and the backend is a context manager too. ``model``
  loads the policy in transformers on first use, for what is scored rather than sampled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt
from posttrainlab.generation.prompts import encode_prompt
from posttrainlab.generation.sampling import Sample, SampleSettings, derive_seed, make_sample
from posttrainlab.generation.shared_prefix import PrefixRequest, encode_request
from posttrainlab.generation.vllm_server import ServerOptions, VLLMServer, acquire, find_python, release


def load_tokenizer(model: str, trust_remote_code: bool = False):
    """``(tokenizer, end token ids)`` of a model folder, as ``TransformersBackend`` reads them (no weights)."""
    from transformers import AutoTokenizer, GenerationConfig

    from posttrainlab.models.loading import check_folder, is_local, prepare_tokenizer

    if is_local(str(model)):
        check_folder(str(model))
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(str(model), trust_remote_code=trust_remote_code))
    ends = [tokenizer.eos_token_id]
    try:
        extra = GenerationConfig.from_pretrained(str(model)).eos_token_id
    except OSError:  # no generation_config.json
        extra = None
    ends += extra if isinstance(extra, (list, tuple)) else [extra]
    return tokenizer, sorted({i for i in ends if i is not None})


class VLLMServerBackend:
    """A ``SamplingBackend``, ``PrefixSampler`` and token-id sampler over a lab-run ``vllm serve`` (module docstring).

    ``server``: a running :class:`~posttrainlab.generation.vllm_server.VLLMServer` to use (the caller keeps it).
    Else the server for ``options`` (``ServerOptions(model)`` when None) is acquired at the first request, not
    before (a verb whose samples are reused starts none), and released by ``close``; a later request acquires it
    again. A missing vLLM venv is refused at construction, in one line.
    """

    name = "vllm-server"

    def __init__(
        self,
        model: str,
        *,
        batch_size: int = 32,
        options: ServerOptions | None = None,
        server: VLLMServer | None = None,
        progress: bool = True,
        timeout_s: float = 600.0,
    ):
        if batch_size < 1:
            raise BadInput(f"batch_size={batch_size}: must be at least 1")
        self.options = options or ServerOptions(str(model))
        self.options.check()
        if server is None:
            find_python(self.options.python)  # `make vllm` not run: said now, not after the data is read
        self.tokenizer, self.end_ids = load_tokenizer(str(model), self.options.trust_remote_code)
        self.batch_size, self.progress, self.timeout_s = batch_size, progress, timeout_s
        self.model_path = str(model)
        self._given, self._server, self._endpoint, self._model = server, server, None, None
        self._lock = threading.Lock()

    @property
    def model(self):
        """The policy in transformers, loaded on first use in the server's dtype: for what is scored, not sampled
        (``eval policy``'s preference pairs, by ``runners.policy.sequence_logprobs``)."""
        if self._model is None:
            from posttrainlab.models.loading import load_causal_lm

            self._model, _ = load_causal_lm(self.model_path, trust_remote_code=self.options.trust_remote_code,
                                            dtype=self.options.dtype)  # fmt: skip
        return self._model

    @property
    def endpoint(self):
        """The server's ``/v1`` endpoint (``generation.endpoint.Endpoint``), starting the server if need be."""
        from posttrainlab.generation.endpoint import Endpoint

        with self._lock:
            if self._server is None:
                self._server = acquire(self.options)
            if self._endpoint is None:
                server = self._server
                self._endpoint = Endpoint(server.url, server.served_name, timeout_s=self.timeout_s, max_retries=2)
            return self._endpoint

    def close(self) -> None:
        """Let go of an acquired server (its last user stops it); the next request acquires one again."""
        with self._lock:
            if self._given is None and self._server is not None:
                release(self._server)
            self._server, self._endpoint = self._given, None

    def __enter__(self) -> VLLMServerBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- one request -----------------------------------------------------------------------------

    def _request(self, ids: list[int], seed: int, opts: SampleSettings) -> list[Sample]:
        stops = set(opts.stop_tokens())
        body = {
            "top_k": opts.top_k if opts.top_k > 0 else -1, "min_p": opts.min_p, "min_tokens": opts.min_tokens,
            "ignore_eos": True, "stop_token_ids": sorted(stops), "return_token_ids": True, "skip_special_tokens": True,
        }  # fmt: skip
        rows = opts.rows_per_prompt
        fields: dict[str, Any] = dict(
            prompt=ids, n=rows, temperature=opts.temperature, top_p=1.0 if opts.greedy else opts.top_p,
            max_tokens=opts.max_new_tokens, seed=seed, extra_body=body,
        )  # fmt: skip
        if opts.stop:
            fields["stop"] = list(opts.stop)
        if opts.logprobs:
            fields["logprobs"] = 0
        endpoint = self.endpoint
        reply, _ = endpoint.create("completions", **fields)
        samples = [self._sample(c, opts, stops) for c in sorted(reply.choices, key=lambda c: c.index)]
        if len(samples) != rows:
            raise BadInput(f"{endpoint.base_url}: asked for {rows} completions, got {len(samples)}")
        return samples * opts.n if opts.greedy else samples

    def _sample(self, choice, opts: SampleSettings, stops: set[int]) -> Sample:
        tokens = list(getattr(choice, "token_ids", None) or (choice.model_extra or {}).get("token_ids") or [])
        reason = getattr(choice, "stop_reason", None)
        if isinstance(reason, int) and (not tokens or tokens[-1] != reason):
            tokens.append(reason)  # the stop token that ended the row, where the reply left it out
        logprobs = None
        if opts.logprobs and choice.logprobs is not None:
            logprobs = list(choice.logprobs.token_logprobs or [])
        return make_sample(self.tokenizer, tokens, logprobs, opts.stop, opts.min_tokens, stops)

    def _run(self, prompts: list[list[int]], seeds: Sequence[int], opts: SampleSettings, on_done=None):
        if len(prompts) != len(seeds):
            raise BadInput(f"{len(prompts)} prompts but {len(seeds)} seeds")

        def one(i: int) -> list[Sample]:
            got = self._request(prompts[i], seeds[i], opts)
            if on_done is not None:
                on_done(1)
            return got

        if not prompts:
            return []
        self.endpoint  # noqa: B018 -- start the server here, once, not in the first of the threads
        with ThreadPoolExecutor(max_workers=min(self.batch_size, len(prompts))) as pool:
            futures = [pool.submit(one, i) for i in range(len(prompts))]
            try:
                return [f.result() for f in futures]
            finally:
                for f in futures:
                    f.cancel()

    # ---- the interfaces --------------------------------------------------------------------------

    def sample_ids(
        self,
        prompts: Sequence[Sequence[int]],
        seeds: Sequence[int],
        *,
        on_batch: Callable[[int], None] | None = None,
        **options,
    ) -> list[list[Sample]]:
        """``n`` samples per token-id prompt, prompt ``i`` seeded ``seeds[i]``: ``TransformersBackend.sample_ids``'s
        arguments (``options``: ``sampling.SampleSettings``' sampling fields) and result; ``on_batch(k)`` after each
        ``k`` finished prompts."""
        opts = SampleSettings(**options, eos_ids=tuple(self.end_ids))
        opts.check()
        return self._run([list(p) for p in prompts], seeds, opts, on_batch)

    def _texts(self, ids: list[list[int]], seeds: list[int], sampling: dict, label: str) -> list[list[str]]:
        from posttrainlab.progress import progress_bar

        with progress_bar(self.progress) as bar:
            task = bar.add_task(label, total=len(ids))
            rows = self.sample_ids(ids, seeds, **sampling, on_batch=lambda k: bar.advance(task, k))
        return [[s.text for s in row] for row in rows]

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
        sampling = dict(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
        ids = [encode_prompt(self.tokenizer, p) for p in prompts]
        return self._texts(ids, [derive_seed(seed, i) for i in range(len(prompts))], sampling, "generating")

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
        """``n`` continuations of each request's prefix; vLLM's prefix cache shares the prefix's KV blocks."""
        sampling = dict(n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
        ids = [encode_request(self.tokenizer, r) for r in requests]
        return self._texts(ids, [r.seed for r in requests], sampling, "continuing")


__all__ = ["VLLMServerBackend", "load_tokenizer"]
