"""``--ray R``: a policy sampled on R Ray replicas, behind the ``SamplingBackend`` interface (``eval best-of-n``).

``RayBackend(model, replicas=R)`` is a ``SamplingBackend`` and a ``PrefixSampler``, so a verb that samples through
a backend (best-of-N's ``runners.best_of_n.run``) runs unchanged over Ray. How a call is spread:

- **transformers** (CPU, or one GPU per replica): the driver renders and tokenizes every request as the backend
  would (``generation.shared_prefix.encode_request``) and cuts them into the backend's own prefill batches
  (``prompts.length_sorted_batches``, ``batch_size`` each: the batches one process would run). Each batch is one
  row of a Ray Data dataset; ``map_batches`` hands rows to a pool of R actors (``ActorPoolStrategy``), each of
  which built the ``TransformersBackend`` once and samples its row with ``sample_continuations``. Every request
  carries its own seed (``generate``: ``derive_seed(seed, i)`` for prompt ``i``, as ``TransformersBackend.generate``
  gives it), and a batch is sampled exactly as one process samples it, so the texts do not depend on R, and they
  equal the single-process backend's at the same thread count (tests/generation/test_ray_backend.py) wherever that
  backend takes the same shared-prefix path: sampled calls with ``n`` > 1, as best-of-N's (a single sample, or
  greedy decoding, goes through ``model.generate`` there, and the replicas' shared-prefix sampler draws other
  tokens for the same seed).
- **vllm** (GPUs): one ray.data.llm row per continuation, through ``generation.ray_llm.RayLLMSampler``, as
  ``label mc --backend vllm --ray R`` does.

Replicas get ``threads`` CPUs each (default 1: one torch thread); without ``address`` a local Ray instance with
R x that many CPUs is started for each call and stopped after it (``cluster``), with ``address`` (``auto``, or
``HEAD:6379``) the call runs on that cluster. Written by hand: the unit of work (a prefill batch), the seeds and
the reassembly are ours; Ray Data only schedules the batches on the replicas.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt
from posttrainlab.generation.sampling import check_sampling
from posttrainlab.generation.shared_prefix import PrefixRequest, prompt_requests

MISSING = "ray is not installed: pip install 'posttrainlab[ray]' (make setup installs it), or leave out --ray"
#: the backends a replica can run
RAY_BACKENDS = ("transformers", "vllm")


def check_ray(replicas: int | None, address: str | None = None) -> None:
    """``BadInput`` for ``--ray R`` below 1, or ``--ray-address`` without ``--ray`` (every verb that takes them)."""
    if replicas is not None and replicas < 1:
        raise BadInput(f"--ray {replicas}: need at least one replica")
    if address is not None and replicas is None:
        raise BadInput("--ray-address needs --ray R (the number of replicas to run on that cluster)")


def import_ray():
    """The ``ray`` module with Ray Data, or ``BadInput`` in one line when the ``ray`` extra is not installed."""
    try:
        import ray
        import ray.data  # noqa: F401  (ray[data]: pandas, pyarrow; a bare `pip install ray` lacks them)
    except ImportError:
        raise BadInput(MISSING) from None
    return ray


@contextmanager
def cluster(*, cpus: int | None = None, address: str | None = None):
    """Ray, connected: the session already running in this process, the cluster at ``address`` (``auto``:
    the one ``ray start --head`` started on this machine), or a new local instance with ``cpus`` CPUs, which is
    shut down on the way out. Ray Data's own progress bars and logs are turned off (the caller has its bar)."""
    ray = import_ray()
    started = not ray.is_initialized()
    if started:
        quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
        if address is not None:
            ray.init(address=address, **quiet)
        else:
            ray.init(num_cpus=cpus, include_dashboard=False, **quiet)
    data = ray.data.DataContext.get_current()
    data.enable_progress_bars = False
    data.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "progress bars disabled"
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def pool_rows(items: list[dict[str, Any]], replica: type, *, replicas: int, cpus: int, blocks: int) -> Iterator:
    """The rows of ``items`` (split into ``blocks`` Ray Data blocks), each mapped alone by ``replica`` on a pool of
    ``replicas`` actors with ``cpus`` CPUs each, in the order they finish. Closing the iterator ends the execution
    and its actors. Needs Ray connected (``cluster``)."""
    import ray
    from ray.data import ActorPoolStrategy

    ds = ray.data.from_items(items, override_num_blocks=blocks).map_batches(
        replica,
        batch_size=1,
        batch_format="numpy",
        compute=ActorPoolStrategy(size=replicas),
        num_cpus=cpus,
    )
    return iter(ds.iter_rows())


class SampleReplica:
    """One replica: the policy's ``TransformersBackend``, built once; samples one batch of requests per row.

    A row's ``batch`` is the pickled ``(requests, sampling)``; its ``texts`` the pickled continuations.
    """

    settings: dict[str, Any]  # set on the subclass ``replica_class`` makes (Ray pickles the class by value)

    def __init__(self):
        from posttrainlab.generation.transformers_backend import TransformersBackend
        from posttrainlab.threads import configure_threads

        s = self.settings
        configure_threads(s["threads"] or 1)  # before the backend imports torch
        self.backend = TransformersBackend.from_pretrained(
            s["model"], batch_size=s["batch_size"], progress=False, dtype=s["dtype"],
            trust_remote_code=s["trust_remote_code"],
        )  # fmt: skip

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        out = []
        for blob in batch["batch"]:
            requests, sampling = pickle.loads(blob)
            out.append(pickle.dumps(self.backend.sample_continuations(requests, **sampling)))
        return {"index": batch["index"], "texts": np.array(out, dtype=object)}


def replica_class(settings: dict[str, Any]) -> type:
    """``SampleReplica`` with ``settings`` on the class (a name the module lacks, so Ray pickles it by value)."""
    return type("RaySampleReplica", (SampleReplica,), {"settings": settings})


class RayBackend:
    """A ``SamplingBackend`` and ``PrefixSampler`` whose samples are drawn on R Ray replicas (module docstring)."""

    name = "ray"

    def __init__(
        self,
        model: str,
        *,
        replicas: int,
        backend: str = "transformers",
        address: str | None = None,
        threads: int | None = None,
        batch_size: int = 32,
        dtype: str = "float32",
        trust_remote_code: bool = False,
        progress: bool = True,
    ):
        check_ray(replicas, address)
        if backend not in RAY_BACKENDS:
            raise BadInput(f"--ray runs the {' or '.join(RAY_BACKENDS)} backend on its replicas, not {backend}")
        if batch_size < 1:
            raise BadInput(f"--batch-size {batch_size}: must be at least 1")
        import_ray()  # one line now, before anything is read, where the extra is missing
        self.model, self.replicas, self.backend, self.address = str(model), replicas, backend, address
        self.threads, self.batch_size, self.dtype = threads, batch_size, dtype
        self.trust_remote_code, self.progress = trust_remote_code, progress
        self._tokenizer = None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=self.trust_remote_code)
        return self._tokenizer

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
        """``n`` completions for each prompt, in prompt order; prompt ``i`` seeded ``derive_seed(seed, i)``."""
        return self.sample_continuations(
            prompt_requests(prompts, seed),
            n=n,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            stop=stop,
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
        """``n`` continuations of each request's prefix, each request with its own seed, on the replicas."""
        check_sampling(n, temperature, top_p, max_new_tokens)
        if not requests:
            return []
        sampling = {"n": n, "temperature": temperature, "top_p": top_p, "max_new_tokens": max_new_tokens, "stop": stop}
        if self.backend == "vllm":
            from posttrainlab.generation.ray_llm import RayLLMSampler

            with cluster(address=self.address):
                sampler = RayLLMSampler.build(
                    self.model, replicas=self.replicas, dtype=self.dtype, threads=self.threads,
                    batch_size=self.batch_size, trust_remote_code=self.trust_remote_code,
                )  # fmt: skip
                return sampler.sample_continuations(requests, **sampling)
        return self._on_replicas(list(requests), sampling)

    def batches(self, requests: Sequence[PrefixRequest]) -> list[list[int]]:
        """The request indices of each prefill batch, as one ``TransformersBackend`` would batch them."""
        from posttrainlab.generation.prompts import length_sorted_batches
        from posttrainlab.generation.shared_prefix import encode_request

        lengths = [len(encode_request(self.tokenizer, r)) for r in requests]
        return length_sorted_batches(lengths, self.batch_size)

    def _on_replicas(self, requests: list[PrefixRequest], sampling: dict[str, Any]) -> list[list[str]]:
        from posttrainlab.progress import progress_bar

        batches = self.batches(requests)
        items = [{"index": k, "batch": pickle.dumps(([requests[i] for i in b], sampling))}
                 for k, b in enumerate(batches)]  # fmt: skip
        settings = {"model": self.model, "threads": self.threads, "batch_size": self.batch_size, "dtype": self.dtype,
                    "trust_remote_code": self.trust_remote_code}  # fmt: skip
        results: list[list[str] | None] = [None] * len(requests)
        cpus = self.threads or 1
        with cluster(cpus=self.replicas * cpus, address=self.address):
            rows = pool_rows(items, replica_class(settings), replicas=self.replicas, cpus=cpus, blocks=len(items))
            with progress_bar(self.progress) as bar:
                task = bar.add_task(f"sampling on {self.replicas} Ray replica(s)", total=len(requests))
                for row in rows:
                    batch = batches[int(row["index"])]
                    for i, texts in zip(batch, pickle.loads(row["texts"]), strict=True):
                        results[i] = texts
                    bar.advance(task, len(batch))
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(f"the Ray replicas returned {len(requests) - len(missing)} of {len(requests)} prompts")
        return results  # type: ignore[return-value]


__all__ = [
    "MISSING",
    "RAY_BACKENDS",
    "RayBackend",
    "SampleReplica",
    "check_ray",
    "cluster",
    "import_ray",
    "pool_rows",
    "replica_class",
]
