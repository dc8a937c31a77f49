"""The batcher on its own (no HTTP): grouping, limits, routing, seeds, errors."""

from __future__ import annotations

import asyncio

import pytest
from serve_fakes import EchoBackend, IdEchoBackend

from posttrainlab.errors import BadInput
from posttrainlab.serve.batcher import Batcher, SamplingParams

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def run_jobs(batcher: Batcher, jobs: list[tuple[list, SamplingParams]]) -> list:
    """Submit all jobs at once; each job's result, or its exception."""

    async def main():
        try:
            return await asyncio.gather(*(batcher.generate(p, params) for p, params in jobs), return_exceptions=True)
        finally:
            await batcher.close()

    return asyncio.run(main())


def test_concurrent_greedy_jobs_share_one_call_and_get_their_own_answers():
    backend = EchoBackend()
    jobs = [([f"q{i}"], SamplingParams(n=1 + i % 3, temperature=0.0, seed=i, max_tokens=8)) for i in range(8)]
    results = run_jobs(Batcher(backend, max_batch_size=32, wait_ms=50), jobs)
    assert len(backend.calls) == 1
    call = backend.calls[0]
    assert call["prompts"] == [f"q{i}" for i in range(8)]
    assert (call["n"], call["temperature"], call["seed"], call["max_new_tokens"]) == (1, 0.0, 0, 8)
    # greedy: n, seed and top_p do not change the text, so the call asks for n=1 and each job gets n copies
    assert results == [[[f"q{i}|t=0|s=0|0"] * (1 + i % 3)] for i in range(8)]


def test_max_batch_size_limits_prompts_per_call():
    backend = EchoBackend()
    jobs = [([f"q{i}"], GREEDY) for i in range(8)]
    results = run_jobs(Batcher(backend, max_batch_size=3, wait_ms=50), jobs)
    assert [len(c["prompts"]) for c in backend.calls] == [3, 3, 2]
    assert results == [[[f"q{i}|t=0|s=0|0"]] for i in range(8)]
    single = EchoBackend()
    run_jobs(Batcher(single, max_batch_size=1, wait_ms=50), jobs)
    assert len(single.calls) == 8


def test_a_job_larger_than_the_limit_runs_whole():
    backend = EchoBackend()
    results = run_jobs(Batcher(backend, max_batch_size=2, wait_ms=10), [(["a", "b", "c"], GREEDY), (["d"], GREEDY)])
    assert [c["prompts"] for c in backend.calls] == [["a", "b", "c"], ["d"]]
    assert results[0] == [["a|t=0|s=0|0"], ["b|t=0|s=0|0"], ["c|t=0|s=0|0"]]


def test_one_call_per_group_of_equal_parameters():
    backend = EchoBackend()
    sampled = SamplingParams(n=2, temperature=0.7, top_p=0.9, max_tokens=8)
    jobs = [
        (["g8-a"], GREEDY),
        (["g16"], SamplingParams(temperature=0.0, max_tokens=16)),
        (["s-a"], sampled),
        (["g8-b"], GREEDY),
        (["s-b"], sampled),
        (["stop"], SamplingParams(temperature=0.0, max_tokens=8, stop=("|",))),
    ]
    results = run_jobs(Batcher(backend, max_batch_size=32, wait_ms=50, seed=1), jobs)
    assert [c["prompts"] for c in backend.calls] == [["g8-a", "g8-b"], ["g16"], ["s-a", "s-b"], ["stop"]]
    s_call = backend.calls[2]
    assert (s_call["n"], s_call["temperature"], s_call["top_p"]) == (2, 0.7, 0.9)
    assert results[2] == [[f"s-a|t=0.7|s={s_call['seed']}|0", f"s-a|t=0.7|s={s_call['seed']}|1"]]
    assert results[5] == [["stop"]] and backend.calls[3]["stop"] == ["|"]


def test_seeded_sampling_runs_alone_with_its_seed_on_a_text_only_backend():
    """``generate`` seeds a whole call, so with a text-only backend a seeded job cannot share one."""
    backend = EchoBackend()
    jobs = [(["x"], SamplingParams(temperature=1.0, seed=5)), (["y"], SamplingParams(temperature=1.0, seed=5))]
    results = run_jobs(Batcher(backend, wait_ms=50), jobs)
    assert [c["prompts"] for c in backend.calls] == [["x"], ["y"]]
    assert [c["seed"] for c in backend.calls] == [5, 5]
    assert results == [[["x|t=1|s=5|0"]], [["y|t=1|s=5|0"]]]


def test_a_backend_error_fails_its_group_only():
    class Picky(EchoBackend):
        def generate(self, prompts, **kw):
            if kw["max_new_tokens"] == 99:
                raise BadInput("max_new_tokens=99: no")
            return super().generate(prompts, **kw)

    backend = Picky()
    jobs = [(["a"], SamplingParams(temperature=0.0, max_tokens=99)), (["b"], GREEDY)]
    results = run_jobs(Batcher(backend, wait_ms=50), jobs)
    assert isinstance(results[0], BadInput) and results[1] == [["b|t=0|s=0|0"]]


def test_a_backend_returning_the_wrong_shape_is_an_error():
    class Short(EchoBackend):
        def generate(self, prompts, **kw):
            return super().generate(prompts, **kw)[:-1]

    results = run_jobs(Batcher(Short(), wait_ms=50), [(["a"], GREEDY), (["b"], GREEDY)])
    assert all(isinstance(r, RuntimeError) and "for 2 prompts x n=1" in str(r) for r in results)


def test_close_cancels_waiting_jobs():
    import threading

    gate = threading.Event()
    backend = EchoBackend(gate=gate)
    batcher = Batcher(backend, max_batch_size=1, wait_ms=0)

    async def main():
        first = asyncio.ensure_future(batcher.generate(["a"], GREEDY))
        second = asyncio.ensure_future(batcher.generate(["b"], GREEDY))
        while not backend.started.is_set():
            await asyncio.sleep(0.01)
        await batcher.close()
        gate.set()
        return await asyncio.gather(first, second, return_exceptions=True)

    results = asyncio.run(main())
    assert all(isinstance(r, asyncio.CancelledError) for r in results)


@pytest.mark.parametrize("kwargs", [{"max_batch_size": 0}, {"wait_ms": -1}])
def test_bad_limits(kwargs):
    with pytest.raises(ValueError):
        Batcher(EchoBackend(), **kwargs)


def test_a_closed_batcher_starts_again_on_a_new_loop():
    backend = EchoBackend()
    batcher = Batcher(backend, wait_ms=0)
    assert run_jobs(batcher, [(["a"], GREEDY)]) == [[["a|t=0|s=0|0"]]]
    assert run_jobs(batcher, [(["b"], GREEDY)]) == [[["b|t=0|s=0|0"]]]  # run_jobs closed it; a new asyncio.run
    assert batcher.calls == 2


def test_seeded_jobs_with_token_ids_share_one_call_each_prompt_with_its_seed():
    backend = IdEchoBackend()
    sampled = SamplingParams(n=2, temperature=0.8, top_k=5, max_tokens=8)
    jobs = [
        (["a"], [[1, 2]], SamplingParams(n=2, temperature=0.8, top_k=5, max_tokens=8, seed=11)),
        (["b", "c"], [[3], [4]], SamplingParams(n=2, temperature=0.8, top_k=5, max_tokens=8, seed=12)),
        (["d"], [[5]], sampled),  # no seed: one is drawn for it
        (["e"], [[6]], SamplingParams(n=3, temperature=0.0, max_tokens=8, top_k=5)),  # greedy: a call of its own
    ]
    batcher = Batcher(backend, max_batch_size=32, wait_ms=50, seed=1)

    async def main():
        try:
            return await asyncio.gather(*(batcher.generate(p, params, ids) for p, ids, params in jobs))
        finally:
            await batcher.close()

    results = asyncio.run(main())
    assert backend.calls == [] and len(backend.id_calls) == 2  # generate was never called
    seeded, greedy = backend.id_calls
    assert seeded["prompts"] == [[1, 2], [3], [4], [5]] and seeded["seeds"][:3] == [11, 12, 12]
    assert (seeded["n"], seeded["temperature"], seeded["top_k"], seeded["max_new_tokens"]) == (2, 0.8, 5, 8)
    assert [s.text for s in results[0][0]] == ["[1, 2]|s=11|0", "[1, 2]|s=11|1"]
    assert [[s.text for s in row] for row in results[1]] == [["[3]|s=12|0", "[3]|s=12|1"], ["[4]|s=12|0", "[4]|s=12|1"]]
    drawn = seeded["seeds"][3]
    assert [s.text for s in results[2][0]] == [f"[5]|s={drawn}|0", f"[5]|s={drawn}|1"]
    assert (greedy["n"], greedy["temperature"], greedy["seeds"]) == (1, 0.0, [0])
    assert [s.text for s in results[3][0]] == ["[6]|s=0|0"] * 3  # one greedy row, copied n times


def test_a_cancelled_job_never_reaches_the_backend():
    import threading

    gate = threading.Event()
    backend = EchoBackend(gate=gate)
    batcher = Batcher(backend, max_batch_size=1, wait_ms=0)

    async def main():
        first = asyncio.ensure_future(batcher.generate(["a"], GREEDY))
        second = asyncio.ensure_future(batcher.generate(["b"], GREEDY))  # waits: the batch holds one prompt
        while not backend.started.is_set():
            await asyncio.sleep(0.01)
        second.cancel()  # its client is gone
        gate.set()
        try:
            return await asyncio.gather(first, second, return_exceptions=True)
        finally:
            await batcher.close()

    results = asyncio.run(main())
    assert results[0] == [["a|t=0|s=0|0"]] and isinstance(results[1], asyncio.CancelledError)
    assert [c["prompts"] for c in backend.calls] == [["a"]]


def test_a_cancelled_job_leaves_its_running_call_and_the_other_gets_its_answer(tiny_backend):
    """The transformers backend is decoded step by step (``serve.decode``): a gone job's rows stop at once."""
    params = SamplingParams(temperature=0.0, max_tokens=60, ignore_eos=True)
    ids = [tiny_backend.tokenizer(t, add_special_tokens=False)["input_ids"] for t in ("a long answer", "another")]
    (alone,) = tiny_backend.sample_ids([ids[1]], [0], **params.sampler_kwargs())
    batcher = Batcher(tiny_backend, wait_ms=50)
    stats = tiny_backend.stats

    async def main():
        before = stats.decode_tokens
        drawn: list = []
        ticket = batcher.submit(["a long answer"], params, [ids[0]], listener=drawn.extend)
        other = asyncio.ensure_future(batcher.generate(["another"], params, [ids[1]]))
        while len(drawn) < 5:
            await asyncio.sleep(0.001)
        ticket.cancel()
        try:
            return await other, stats.decode_tokens - before, drawn
        finally:
            await batcher.close()

    (other,), rows_decoded, drawn = asyncio.run(main())
    assert batcher.calls == 1 and other[0].tokens == alone[0].tokens  # one call; the other's answer as alone
    assert all(p == 0 and s == 0 for p, s, _, _ in drawn) and len(drawn) < 30
    assert rows_decoded < 2 * 59 - 20  # the gone row left the batch: not decoded to the end
