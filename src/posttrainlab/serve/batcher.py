"""Server-side batching: requests that arrive close together share one backend call.

Hand-written rather than borrowed from vLLM or TGI because their schedulers drive their own engines;
here the engine is any ``SamplingBackend``, whose only lever is "a list of prompts per call" (with a
seed per prompt, for a backend with ``sample_ids``). A judge
run sends 32 requests at once; answered one ``generate`` each, a CPU model would run 32 prefill and
decode loops one after another, where one batched call shares every forward pass between them.

How it works, and why:

- **One worker task owns the backend.** It takes the first queued job, then collects more for up to
  ``wait_ms`` (default 10 ms: small against a generation, long enough for a burst of concurrent
  requests to arrive), stopping early once ``max_batch_size`` prompts are in hand. A job that would
  overflow the batch waits for the next one; a single job larger than the limit runs alone, whole.
- **Two kinds of backend call.** A job with token ids (the HTTP layer encodes prompts when the
  backend has a tokenizer and ``sample_ids``: the transformers backend) goes to
  ``backend.sample_ids(ids, seeds, ...)``, which draws every prompt from a generator of its own
  (``generation.shared_prefix``) and returns :class:`~posttrainlab.generation.shared_prefix.Sample`
  (token ids, finish reason). Any other job goes to ``backend.generate(prompts, ...)``, text only.
- **Jobs are grouped by what one call must share**, and each group is one call:

  - greedy (``temperature == 0``): by ``(max_tokens, stop, min_tokens, stop_token_ids, ignore_eos)``.
    ``n``, ``top_p``, ``top_k``, ``min_p`` and ``seed`` do not change a greedy completion, so the call
    asks for ``n=1`` and each job's ``n`` copies are made here;
  - sampled, by token ids: by every sampling parameter but ``seed``. Each prompt brings its seed
    (the request's, or one drawn from the batcher's own generator when it has none), so a request
    with a seed gets the same samples in a batch of 12 as alone (what a caller who sets ``seed``
    asks for), and a client that always sends a seed is still batched;
  - sampled, text only: without a ``seed`` as above under one seed drawn for the call; **with** a
    ``seed``: alone, because ``generate`` seeds a whole call, so a row's samples would depend on
    which other rows share it.

- **The call runs in one worker thread** (``run_in_executor``), so the event loop keeps accepting and
  answering requests (``/v1/models``, new jobs for the next batch) while the model works. One
  thread, because two calls at once do not make a model faster and most backends are not thread-safe.
- **Results are routed by position**: a group's prompts are concatenated job by job, and the
  backend's prompt-ordered output is cut back into the same slices. A backend error fails every job
  of its group (the HTTP layer turns ``BadInput`` into a 400) and leaves the other groups alone.
- **A job whose caller is gone is dropped** (:meth:`Batcher.submit` gives a :class:`Ticket` whose
  ``cancel()`` the HTTP layer calls when the client disconnects; cancelling the task awaiting
  :meth:`Batcher.generate` does the same): still waiting, it never reaches a call; in the call that is
  running, its rows end at the next decode step when the backend is the transformers backend
  (``serve.decode``), and the call returns as soon as no row is left. Another backend's call cannot be
  stopped: it runs to its end and the job's answer is thrown away.
- **Tokens as they are drawn**: a job submitted with a ``listener`` gets, on the event loop, each
  step's ``(prompt, sample, token, ended)`` for its rows (``serve.decode``'s hook; a greedy row fans
  out to the job's ``n`` samples), before its future resolves. That is how a stream sends tokens as
  they are generated. A backend other than the transformers backend reports nothing: its answers come
  whole, with the future.

Other work on the model (``serve.logprobs``' scoring pass) goes through :meth:`Batcher.run`, into the
same worker thread, so it never runs beside a generation call.

Counters (``calls``, ``batches``, ``prompts``) say what the batching did; tests and ``bench/bench_serve.py``
read them.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from posttrainlab.generation import Prompt, SamplingBackend
from posttrainlab.generation.shared_prefix import Sample
from posttrainlab.serve.decode import Drawn, stepper_for

#: What a job gets per completion: a ``Sample`` from ``sample_ids``, the text alone from ``generate``.
Completion = Sample | str


#: ``SamplingParams`` fields that ``SamplingBackend.generate`` has no argument for (vLLM's).
EXTRA_FIELDS = ("top_k", "min_p", "min_tokens", "stop_token_ids", "ignore_eos")


@dataclass(frozen=True)
class SamplingParams:
    """What a request asks of the backend; ``seed=None`` means any seed will do; ``top_k=0``: off."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: tuple[str, ...] = ()
    top_k: int = 0
    min_p: float = 0.0
    min_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    def beyond_generate(self) -> list[str]:
        """The fields of :data:`EXTRA_FIELDS` set to something other than their defaults."""
        return [f for f in EXTRA_FIELDS if getattr(self, f) != getattr(_DEFAULT, f)]

    def sampler_kwargs(self) -> dict[str, Any]:
        """The arguments of ``sample_ids`` (all but ``n`` and ``seed``)."""
        return {
            "temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k, "min_p": self.min_p,
            "max_new_tokens": self.max_tokens, "min_tokens": self.min_tokens, "stop": list(self.stop) or None,
            "stop_token_ids": list(self.stop_token_ids), "ignore_eos": self.ignore_eos,
        }  # fmt: skip


_DEFAULT = SamplingParams()


def group_key(params: SamplingParams, job_id: int, by_ids: bool = False) -> tuple:
    """Jobs with equal keys can share one backend call (module docstring).

    >>> group_key(SamplingParams(n=3, temperature=0.0, seed=7, max_tokens=8, top_k=5), 1)
    ('greedy', False, 8, (), 0, (), False)
    >>> group_key(SamplingParams(temperature=0.7, seed=7), 1), group_key(SamplingParams(temperature=0.7), 1)[:3]
    (('seeded', 1), ('sampled', False, 1))
    >>> seeded, fresh = SamplingParams(temperature=0.7, seed=7), SamplingParams(temperature=0.7)
    >>> group_key(seeded, 1, by_ids=True) == group_key(fresh, 2, by_ids=True)
    True
    """
    p = params
    ends = (p.max_tokens, p.stop, p.min_tokens, p.stop_token_ids, p.ignore_eos)
    if p.temperature == 0:
        return ("greedy", by_ids, *ends)
    if p.seed is not None and not by_ids:
        return ("seeded", job_id)
    return ("sampled", by_ids, p.n, p.temperature, p.top_p, p.top_k, p.min_p, *ends)


@dataclass
class _Job:
    id: int
    prompts: list[Prompt]
    params: SamplingParams
    future: asyncio.Future = field(repr=False)
    ids: list[list[int]] | None = None  # the prompts as token ids: a ``sample_ids`` job
    listener: Callable[[Drawn], None] | None = field(default=None, repr=False)  # tokens as drawn (on the loop)
    gone: bool = False  # the caller gave up: dropped from its batch, its rows ended (read by the worker thread)

    @property
    def key(self) -> tuple:
        return group_key(self.params, self.id, self.ids is not None)


class Ticket:
    """A submitted job: ``future`` resolves to its completions; ``cancel()`` drops it (module docstring)."""

    def __init__(self, job: _Job):
        self._job = job
        self.future = job.future

    def cancel(self) -> None:
        """Drop the job: from the queue, from its batch, and its rows from the running call at the next step."""
        self._job.gone = True
        if not self.future.done():
            self.future.cancel()

    @property
    def gone(self) -> bool:
        return self._job.gone


class Batcher:
    """Collects concurrent jobs and runs them as few backend calls as their parameters allow.

    ``await batcher.generate(prompts, params, ids)`` returns ``params.n`` completions for each prompt, in
    prompt order, as the backend would for that job alone: ``Sample`` objects when ``ids`` (the
    prompts as token ids) are given, for a backend with ``sample_ids``; texts otherwise. The worker
    starts on first use, on the running event loop; ``await close()`` stops it (a later ``generate``
    starts it again).
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
        self.calls = 0  # backend calls made (generate or sample_ids)
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
        self._stepper = stepper_for(backend)  # sample_ids with the step hooks (serve.decode), or None

    @property
    def streams(self) -> bool:
        """Whether token-id jobs are decoded step by step (tokens reported as drawn, gone jobs ended)."""
        return self._stepper is not None

    def submit(
        self,
        prompts: list[Prompt],
        params: SamplingParams,
        ids: list[list[int]] | None = None,
        listener: Callable[[Drawn], None] | None = None,
    ) -> Ticket:
        """Queue a job (``params.n`` completions per prompt); ``listener``: its tokens as drawn (module docstring)."""
        if ids is not None and len(ids) != len(prompts):
            raise ValueError(f"{len(ids)} token-id prompts for {len(prompts)} prompts")
        loop = asyncio.get_running_loop()
        if self._task is None or self._loop is not loop or self._task.done():
            self._start(loop)
        job = _Job(next(self._ids), list(prompts), params, loop.create_future(), ids, listener)
        assert self._queue is not None
        self._queue.put_nowait(job)
        return Ticket(job)

    async def generate(
        self, prompts: list[Prompt], params: SamplingParams, ids: list[list[int]] | None = None
    ) -> list[list[Completion]]:
        """``params.n`` completions per prompt, once the job's batch has run; cancelled, the job is dropped."""
        ticket = self.submit(prompts, params, ids)
        try:
            return await ticket.future
        except asyncio.CancelledError:
            ticket.cancel()
            raise

    async def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` in the worker thread that runs the backend calls (between them, never beside one)."""
        return await asyncio.get_running_loop().run_in_executor(self._worker(), fn)

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generate")
        return self._executor

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._queue, self._held = loop, asyncio.Queue(), None
        self._worker()
        self._task = loop.create_task(self._run(), name="posttrain-serve-batcher")

    async def close(self) -> None:
        """Stop the worker; jobs still waiting are cancelled. The executor thread finishes its call."""
        task, self._task = self._task, None
        running = list(self._running)  # the call's ``finally`` empties the list as the task is cancelled
        for job in running:  # a step-by-step call stops at its next step
            job.gone = True
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

    def _generate_call(self, key: tuple, live: list[_Job]) -> tuple[Any, int]:
        """``(the backend call, n per prompt)`` for one group."""
        params = live[0].params
        if live[0].ids is not None:
            n = 1 if key[0] == "greedy" else params.n
            ids, seeds, owners = [], [], []
            for job in live:  # a request's seed for each of its prompts (vLLM's rule), else a fresh one
                ids += job.ids
                seeds += [self._seed(job.params) for _ in job.ids]
                owners += [(job, p) for p in range(len(job.ids))]
            if self._stepper is None:
                return partial(self.backend.sample_ids, ids, seeds, n=n, **params.sampler_kwargs()), n
            hooks = _StepRouter(owners, key[0] == "greedy", asyncio.get_running_loop())
            listen = hooks.on_step if any(job.listener for job in live) else None
            return partial(
                self._stepper, ids, seeds, gone=hooks.gone, on_step=listen, n=n, **params.sampler_kwargs()
            ), n
        prompts = [p for job in live for p in job.prompts]
        common = {"max_new_tokens": params.max_tokens, "stop": list(params.stop) or None}
        if key[0] == "greedy":
            kwargs = {"n": 1, "temperature": 0.0, "top_p": 1.0, "seed": 0, **common}
        else:
            kwargs = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p, **common}
            kwargs["seed"] = self._seed(params)
        return partial(self.backend.generate, prompts, **kwargs), kwargs["n"]

    def _seed(self, params: SamplingParams) -> int:
        if params.temperature == 0:
            return 0
        return params.seed if params.seed is not None else self._rng.randrange(2**31)

    async def _call(self, key: tuple, members: list[_Job]) -> None:
        live = [job for job in members if not job.future.done()]  # a request already given up on is skipped
        if not live:
            return
        n_prompts = sum(len(job.prompts) for job in live)
        call, n = self._generate_call(key, live)
        self.calls += 1
        self.prompts += n_prompts
        loop = asyncio.get_running_loop()
        self._running = live
        try:
            out = await loop.run_in_executor(self._executor, call)
            if len(out) != n_prompts or any(len(o) != n for o in out):
                got = [len(o) for o in out]
                raise RuntimeError(f"the backend returned completion counts {got} for {n_prompts} prompts x n={n}")
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


class _StepRouter:
    """``serve.decode``'s hooks for one call: its prompts back to their jobs (run in the worker thread)."""

    def __init__(self, owners: list[tuple[_Job, int]], greedy: bool, loop: asyncio.AbstractEventLoop):
        self.owners, self.greedy, self.loop = owners, greedy, loop

    def gone(self, prompt: int) -> bool:
        return self.owners[prompt][0].gone

    def on_step(self, drawn: Drawn) -> None:
        per_job: dict[int, tuple[_Job, Drawn]] = {}
        for prompt, sample, token, ended in drawn:
            job, local = self.owners[prompt]
            if job.listener is None or job.gone:
                continue
            mine = per_job.setdefault(job.id, (job, []))[1]
            copies = range(job.params.n) if self.greedy else (sample,)  # a greedy row is all n samples
            mine += [(local, j, token, ended) for j in copies]
        for job, mine in per_job.values():
            try:
                self.loop.call_soon_threadsafe(job.listener, mine)
            except RuntimeError:  # the loop has closed: nobody is listening
                return
