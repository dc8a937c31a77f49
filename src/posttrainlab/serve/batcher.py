"""Server-side batching: requests that arrive close together share one ``backend.generate`` call.

Hand-written rather than borrowed from vLLM or TGI because their schedulers drive their own engines;
here the engine is any ``SamplingBackend``, whose only lever is "a list of prompts per call". A judge
run sends 32 requests at once; answered one ``generate`` each, a CPU model would run 32 prefill and
decode loops one after another, where one batched call shares every forward pass between them.

How it works, and why:

- **One worker task owns the backend.** It takes the first queued job, then collects more for up to
  ``wait_ms`` (default 10 ms: small against a generation, long enough for a burst of concurrent
  requests to arrive), stopping early once ``max_batch_size`` prompts are in hand. A job that would
  overflow the batch waits for the next one; a single job larger than the limit runs alone, whole.
- **Jobs are grouped by what one call must share**, and each group is one ``generate`` call:

  - greedy (``temperature == 0``): by ``(max_tokens, stop)``. ``n``, ``top_p`` and ``seed`` do not
    change a greedy completion, so the call asks for ``n=1`` and each job's ``n`` copies are made here;
  - sampled without a ``seed``: by ``(n, temperature, top_p, max_tokens, stop)``, under a seed drawn
    from the batcher's own generator;
  - sampled **with** a ``seed``: alone. A backend seeds a whole call, so a seeded row's samples
    depend on which other rows share its call; run alone, the same request with the same seed gives
    the same text however busy the server is (what a caller who sets ``seed`` asks for).

- **The call runs in one worker thread** (``run_in_executor``), so the event loop keeps accepting and
  answering requests (``/v1/models``, new jobs for the next batch) while the model works. One
  thread, because two calls at once do not make a model faster and most backends are not thread-safe.
- **Results are routed by position**: a group's prompts are concatenated job by job, and the
  backend's prompt-ordered output is cut back into the same slices. A backend error fails every job
  of its group (the HTTP layer turns ``BadInput`` into a 400) and leaves the other groups alone.

Counters (``calls``, ``batches``, ``prompts``) say what the batching did; tests and ``bench/bench_serve.py``
read them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from posttrainlab.generation import Prompt, SamplingBackend


@dataclass(frozen=True)
class SamplingParams:
    """What a request asks of the backend; ``seed=None`` means any seed will do."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: tuple[str, ...] = ()


def group_key(params: SamplingParams, job_id: int) -> tuple:
    """Jobs with equal keys can share one ``generate`` call (module docstring).

    >>> group_key(SamplingParams(n=3, temperature=0.0, seed=7, max_tokens=8), 1)
    ('greedy', 8, ())
    >>> group_key(SamplingParams(temperature=0.7, seed=7), 1)
    ('seeded', 1)
    >>> group_key(SamplingParams(n=2, temperature=0.7, top_p=0.9, stop=("\\n",)), 1)
    ('sampled', 2, 0.7, 0.9, 16, ('\\n',))
    """
    if params.temperature == 0:
        return ("greedy", params.max_tokens, params.stop)
    if params.seed is not None:
        return ("seeded", job_id)
    return ("sampled", params.n, params.temperature, params.top_p, params.max_tokens, params.stop)


@dataclass
class _Job:
    id: int
    prompts: list[Prompt]
    params: SamplingParams
    future: asyncio.Future = field(repr=False)

    @property
    def key(self) -> tuple:
        return group_key(self.params, self.id)


class Batcher:
    """Collects concurrent jobs and runs them as few ``backend.generate`` calls as their parameters allow.

    ``await batcher.generate(prompts, params)`` returns ``params.n`` completions for each prompt, in
    prompt order, as the backend would for that job alone. The worker starts on first use, on the
    running event loop; ``await close()`` stops it (a later ``generate`` starts it again).
    """

    def __init__(
        self,
        backend: SamplingBackend,
        *,
        max_batch_size: int = 32,
        wait_ms: float = 10.0,
        seed: int | None = None,
    ):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size={max_batch_size}: must be at least 1")
        if wait_ms < 0:
            raise ValueError(f"wait_ms={wait_ms}: must be >= 0")
        self.backend = backend
        self.max_batch_size = max_batch_size
        self.wait_s = wait_ms / 1000
        self.calls = 0  # backend.generate calls made
        self.batches = 0  # collection rounds (one or more calls each)
        self.prompts = 0  # prompts sent to the backend
        self._rng = random.Random(seed)
        self._ids = itertools.count()
        self._executor: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[_Job] | None = None
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held: _Job | None = None
        self._running: list[_Job] = []  # the jobs of the call in progress

    async def generate(self, prompts: list[Prompt], params: SamplingParams) -> list[list[str]]:
        """``params.n`` completions per prompt, once the job's batch has run."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._loop is not loop or self._task.done():
            self._start(loop)
        job = _Job(next(self._ids), list(prompts), params, loop.create_future())
        assert self._queue is not None
        self._queue.put_nowait(job)
        return await job.future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._queue, self._held = loop, asyncio.Queue(), None
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")
        self._task = loop.create_task(self._run(), name="posttrain-serve-batcher")

    async def close(self) -> None:
        """Stop the worker; jobs still waiting are cancelled. The executor thread finishes its call."""
        task, self._task = self._task, None
        running = list(self._running)  # the call's ``finally`` empties the list as the task is cancelled
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        pending = running + ([self._held] if self._held else []) + self._drain()
        for job in pending:
            job.future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _drain(self) -> list[_Job]:
        jobs = []
        while self._queue is not None and not self._queue.empty():
            jobs.append(self._queue.get_nowait())
        return jobs

    async def _next_job(self) -> _Job:
        if self._held is not None:
            job, self._held = self._held, None
            return job
        assert self._queue is not None
        return await self._queue.get()

    async def _collect(self) -> list[_Job]:
        """One batch: the first job, then whatever arrives within ``wait_s``, up to ``max_batch_size`` prompts."""
        loop = asyncio.get_running_loop()
        assert self._queue is not None
        jobs = [await self._next_job()]
        size = len(jobs[0].prompts)
        deadline = loop.time() + self.wait_s
        while size < self.max_batch_size:
            left = deadline - loop.time()
            try:
                job = self._queue.get_nowait() if left <= 0 else await asyncio.wait_for(self._queue.get(), left)
            except (asyncio.QueueEmpty, asyncio.TimeoutError):
                break
            if size + len(job.prompts) > self.max_batch_size:
                self._held = job  # first in the next batch
                break
            jobs.append(job)
            size += len(job.prompts)
        return jobs

    async def _run(self) -> None:
        while True:
            jobs = await self._collect()
            self.batches += 1
            groups: dict[tuple, list[_Job]] = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for key, members in groups.items():
                await self._call(key, members)

    def _call_kwargs(self, key: tuple, params: SamplingParams) -> dict[str, Any]:
        common = {"max_new_tokens": params.max_tokens, "stop": list(params.stop) or None}
        if key[0] == "greedy":
            return {"n": 1, "temperature": 0.0, "top_p": 1.0, "seed": 0, **common}
        seed = params.seed if params.seed is not None else self._rng.randrange(2**31)
        return {"n": params.n, "temperature": params.temperature, "top_p": params.top_p, "seed": seed, **common}

    async def _call(self, key: tuple, members: list[_Job]) -> None:
        live = [job for job in members if not job.future.done()]  # a request already given up on is skipped
        if not live:
            return
        prompts = [p for job in live for p in job.prompts]
        kwargs = self._call_kwargs(key, live[0].params)
        self.calls += 1
        self.prompts += len(prompts)
        loop = asyncio.get_running_loop()
        self._running = live
        try:
            out = await loop.run_in_executor(self._executor, partial(self.backend.generate, prompts, **kwargs))
            if len(out) != len(prompts) or any(len(o) != kwargs["n"] for o in out):
                got = [len(o) for o in out]
                want = f"{len(prompts)} prompts x n={kwargs['n']}"
                raise RuntimeError(f"the backend returned completion counts {got} for {want}")
        except Exception as e:  # every job of the group gets the error; the worker lives on
            for job in live:
                if not job.future.done():
                    job.future.set_exception(e)
            return
        finally:
            self._running = []
        start = 0
        for job in live:
            mine = [list(c) for c in out[start : start + len(job.prompts)]]
            start += len(job.prompts)
            if key[0] == "greedy":
                mine = [[c[0]] * job.params.n for c in mine]
            if not job.future.done():
                job.future.set_result(mine)
