"""The in-process vLLM sampling backend (optional): ``LLM.generate`` with automatic prefix caching.

vLLM is an optional install (``pip install vllm`` on a CUDA machine, in a venv whose pins allow both; on this
lab's CPU machines vLLM lives in its own venv and ``--backend vllm-server`` runs it, ``generation.vllm_server``);
without it, creating the backend raises ``BadInput`` with one line saying so, and nothing else in posttrainlab
needs it. A thin adapter,
written by hand because it only maps the ``SamplingBackend`` arguments onto vLLM's ``SamplingParams``
(``n``, ``temperature``, ``top_p``, ``max_tokens``, ``seed``, ``stop``, ``top_k=-1``):

- prompts are rendered with the model's chat template (``generation.prompts``, as the transformers
  backend does) and passed as token ids, so both backends see the same tokens;
- ``enable_prefix_caching=True``: the KV blocks of a prompt are computed once and shared, between the
  ``n`` samples of a request and between the prefixes of one trace (prefix ``i + 1`` extends prefix
  ``i``), which is what Monte-Carlo labelling needs (``sample_continuations``);
- each request carries its own seed (``generate``: ``derive_seed(seed, i)`` for prompt ``i``), so a
  request's samples do not depend on what else is in the batch; ``temperature == 0`` asks for one
  greedy sample and repeats it;
- memory: on a GPU vLLM's own ``gpu_memory_utilization`` (0.9 unless given); on vLLM's CPU platform, where that
  fraction would mean 90% of RAM, the KV cache is ``$VLLM_CPU_KVCACHE_SPACE`` GiB when the user set it, else
  ``kv_cache_memory_bytes`` as given, else ``DEFAULT_KV_CACHE_GIB``, and OpenMP threads are not pinned to cores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt, truncate_at_stop
from posttrainlab.generation.sampling import check_sampling, derive_seed
from posttrainlab.generation.shared_prefix import PrefixRequest, encode_request
from posttrainlab.generation.vllm_server import DEFAULT_KV_CACHE_GIB

MISSING = (
    "vllm is not installed here: `pip install vllm` on a machine with a CUDA GPU, or `make vllm` and "
    "--backend vllm-server, or use --backend transformers"
)


def on_cpu() -> bool:
    """Whether vLLM runs on its CPU platform (False where it cannot tell, as with a stand-in module)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def import_vllm():
    """The ``vllm`` module, or ``BadInput`` with a one-line reason when it is not installed."""
    try:
        import vllm
    except ImportError:
        raise BadInput(MISSING) from None
    return vllm


class VLLMBackend:
    """A ``SamplingBackend`` and ``PrefixSampler`` over ``vllm.LLM`` (module docstring)."""

    name = "vllm"

    def __init__(
        self,
        model: str,
        *,
        batch_size: int | None = None,
        trust_remote_code: bool = False,
        dtype: str = "auto",
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        llm: Any = None,
        **engine_kw: Any,
    ):
        self.vllm = import_vllm()
        if llm is None:
            kw = dict(
                model=str(model),
                trust_remote_code=trust_remote_code,
                dtype=dtype,
                tensor_parallel_size=tensor_parallel_size,
                enable_prefix_caching=True,
                **engine_kw,
            )
            if gpu_memory_utilization is not None:
                kw["gpu_memory_utilization"] = gpu_memory_utilization
            if on_cpu():
                os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
                if not os.environ.get("VLLM_CPU_KVCACHE_SPACE") and "kv_cache_memory_bytes" not in kw:
                    kw["kv_cache_memory_bytes"] = DEFAULT_KV_CACHE_GIB * 2**30
            if max_model_len is not None:
                kw["max_model_len"] = max_model_len
            if batch_size is not None:
                kw["max_num_seqs"] = max(batch_size, 1)
            llm = self.vllm.LLM(**kw)
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()

    def _ids(self, prompt: Prompt, prefix: str = "") -> list[int]:
        return encode_request(self.tokenizer, PrefixRequest(prompt, prefix))

    def _params(self, n: int, temperature: float, top_p: float, max_new_tokens: int, seed: int, stop):
        greedy = temperature == 0
        return self.vllm.SamplingParams(
            n=1 if greedy else n,
            temperature=temperature,
            top_p=1.0 if greedy else top_p,
            top_k=-1,
            max_tokens=max_new_tokens,
            seed=seed,
            stop=list(stop) if stop else None,
        )

    def _run(self, ids: list[list[int]], params: list, n: int, temperature: float, stop) -> list[list[str]]:
        prompts = [{"prompt_token_ids": p} for p in ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        results = []
        for out in outputs:
            texts = [truncate_at_stop(c.text, stop) for c in out.outputs]
            results.append(texts * n if temperature == 0 else texts)
        return results

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
        check_sampling(n, temperature, top_p, max_new_tokens)
        params = [
            self._params(n, temperature, top_p, max_new_tokens, derive_seed(seed, i), stop) for i in range(len(prompts))
        ]
        return self._run([self._ids(p) for p in prompts], params, n, temperature, stop)

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
        check_sampling(n, temperature, top_p, max_new_tokens)
        if not requests:
            return []
        params = [self._params(n, temperature, top_p, max_new_tokens, r.seed, stop) for r in requests]
        return self._run([self._ids(r.prompt, r.prefix) for r in requests], params, n, temperature, stop)


__all__ = ["MISSING", "VLLMBackend", "import_vllm", "on_cpu"]
