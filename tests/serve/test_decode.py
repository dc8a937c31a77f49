"""``serve.decode``: the step-by-step ``sample_ids`` gives the sampler's answers, reports tokens, ends gone prompts."""

from __future__ import annotations

import pytest

from posttrainlab.serve.decode import sample_stepwise, stepper_for

PROMPTS = ["What is 12 + 30?", "7 * 8 =", "Name a colour.", "1 2 3 4 5 6 7 8 9 10 11 12"]


@pytest.fixture(scope="module")
def ids(tiny_backend):
    return [tiny_backend.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def test_only_the_transformers_backends_own_sample_ids_is_decoded_here(tiny_backend):
    from serve_fakes import IdEchoBackend

    from posttrainlab.generation.transformers_backend import TransformersBackend

    class Changed(TransformersBackend):
        def sample_ids(self, prompts, seeds, **options):
            return super().sample_ids(prompts, seeds, **options)

    assert stepper_for(tiny_backend) is not None
    assert stepper_for(IdEchoBackend()) is None
    assert stepper_for(Changed(tiny_backend.model, tiny_backend.tokenizer, progress=False)) is None


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.0, "max_new_tokens": 12},
        {"temperature": 0.0, "max_new_tokens": 12, "n": 3, "logprobs": True},
        {"temperature": 0.9, "max_new_tokens": 10, "n": 3, "top_p": 0.9, "top_k": 20, "logprobs": True},
        {"temperature": 1.0, "max_new_tokens": 10, "n": 2, "min_p": 0.05, "min_tokens": 4},
        {"temperature": 0.0, "max_new_tokens": 16, "stop": ["e", "o"], "min_tokens": 2},
        {"temperature": 0.7, "max_new_tokens": 12, "n": 2, "stop_token_ids": [32, 101], "ignore_eos": True},
    ],
)
def test_the_same_samples_as_sample_ids(tiny_backend, ids, options):
    seeds = [3, 5, 5, 11]
    drawn: list = []
    got = sample_stepwise(tiny_backend, ids, seeds, gone=lambda p: False, on_step=drawn.extend, **options)
    assert got == tiny_backend.sample_ids(ids, seeds, **options)
    # every generated token was reported once per row, in order, the last of each row marked as its end
    n = options.get("n", 1) if options["temperature"] else 1
    for p, row in enumerate(got):
        for j, sample in enumerate(row[:n]):
            mine = [(token, ended) for q, s, token, ended in drawn if (q, s) == (p, j)]
            assert [t for t, _ in mine] == list(sample.tokens)
            assert [e for _, e in mine] == [False] * (len(mine) - 1) + [True]


def test_a_gone_prompt_stops_at_the_next_step_and_the_others_are_unchanged(tiny_backend, ids):
    options = {"temperature": 0.0, "max_new_tokens": 40, "ignore_eos": True}
    steps: list[int] = []

    def on_step(drawn):
        steps.append(len(drawn))

    gone_after = 3
    gone = lambda p: p == 1 and len(steps) >= gone_after  # noqa: E731
    got = sample_stepwise(tiny_backend, ids, [0] * 4, gone=gone, on_step=on_step, **options)
    alone = tiny_backend.sample_ids(ids, [0] * 4, **options)
    assert [got[i] for i in (0, 2, 3)] == [alone[i] for i in (0, 2, 3)]
    assert got[1][0].finish_reason == "abort" and len(got[1][0].tokens) == gone_after
    assert steps[:gone_after] == [4] * gone_after and set(steps[gone_after:]) == {3}


def test_when_every_prompt_is_gone_the_call_ends(tiny_backend, ids):
    before = tiny_backend.stats.decode_steps
    got = sample_stepwise(
        tiny_backend, ids, [0] * 4, gone=lambda p: tiny_backend.stats.decode_steps - before >= 2,
        temperature=0.0, max_new_tokens=200, ignore_eos=True,
    )  # fmt: skip
    assert tiny_backend.stats.decode_steps - before == 2  # two tokens drawn, two forward passes after them
    assert all(row[0].finish_reason == "abort" and len(row[0].tokens) == 2 for row in got)
    prefills = tiny_backend.stats.prefills
    gone = sample_stepwise(tiny_backend, ids, [0] * 4, gone=lambda p: True, temperature=0.0, max_new_tokens=5, n=2)
    assert tiny_backend.stats.prefills == prefills  # gone before the prefill: nothing runs
    assert [[(s.tokens, s.finish_reason) for s in row] for row in gone] == [[((), "abort")] * 2] * 4
