"""The transformers backend's ``sample_ids`` with the decode loop's hooks: tokens as drawn, gone requests ended.

``posttrain serve`` needs two things from the generation loop that a call returning whole answers cannot
give: each token as it is drawn (so a stream sends it at once, not after the whole answer), and a way to
end the rows of a request whose client has disconnected (so an abandoned ``max_tokens: 400`` does not
keep the next request waiting; vLLM and ``transformers serve`` abort such a request too). The sampler's
own loop (``generation.shared_prefix.sample_from_ids``) takes both as
:class:`~posttrainlab.generation.sampling.DecodeHooks`; :func:`sample_stepwise` is
``TransformersBackend.sample_ids`` with them:

- ``gone(p)``: asked before every decode step (and before each prefill batch) for every prompt still
  decoding; True ends that prompt's rows there (its samples come back with ``finish_reason: "abort"``,
  vLLM's word, and nobody reads them), and a prefill batch whose prompts are all gone is skipped.
- ``on_step(drawn)``: called after every step with ``(prompt, sample, token, ended)`` for each row that
  drew a token (``ended``: the token ended the row: an eos or stop token, a stop string, or
  ``max_tokens``).

Both run in the worker thread that runs the call (``serve.batcher``). Without them the answers are the
ones ``sample_ids`` gives (tests/serve/test_decode.py compares them token for token).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from posttrainlab.generation.sampling import DecodeHooks, Drawn, Sample


def stepper_for(backend) -> Callable | None:
    """``sample_ids`` with the hooks for ``backend`` when it is the transformers backend's; else None.

    Only a backend whose ``sample_ids`` is ``TransformersBackend.sample_ids`` itself (not a subclass that
    changes it, not a test double) takes the hooks; the others are called as they are.
    """
    from posttrainlab.generation.transformers_backend import TransformersBackend

    if getattr(type(backend), "sample_ids", None) is not TransformersBackend.sample_ids:
        return None
    return partial(sample_stepwise, backend)


def sample_stepwise(
    backend,
    prompts: Sequence[Sequence[int]],
    seeds: Sequence[int],
    *,
    gone: Callable[[int], bool] | None = None,
    on_step: Callable[[Drawn], None] | None = None,
    **options,
) -> list[list[Sample]]:
    """``backend.sample_ids(prompts, seeds, **options)``, reporting steps and ending gone prompts (module docstring)."""
    return backend.sample_ids(prompts, seeds, hooks=DecodeHooks(gone=gone, on_step=on_step), **options)


__all__ = ["Drawn", "sample_stepwise", "stepper_for"]
