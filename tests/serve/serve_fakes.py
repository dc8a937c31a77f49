"""Test doubles for ``SamplingBackend``: an echoing backend and a counting wrapper.

``EchoBackend`` answers each prompt with text that names the prompt and the sampling arguments, so a
test can see which request got which answer and what the backend was asked; it records every call.
``Counting`` wraps any backend and records the prompts of each ``generate`` call.
"""

from __future__ import annotations

import threading
import time

from posttrainlab.errors import BadInput
from posttrainlab.generation import truncate_at_stop


def prompt_text(prompt) -> str:
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


class EchoBackend:
    """``"<prompt text>|t=<temperature>|s=<seed>|<k>"`` for the k-th of n completions (cut at ``stop``).

    ``delay``: seconds each call sleeps; ``gate``: an event each call waits for (a backend that is busy
    until the test says so); ``fail``: an exception each call raises.
    """

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None, fail: Exception | None = None):
        self.delay, self.gate, self.fail = delay, gate, fail
        self.calls: list[dict] = []
        self.started = threading.Event()
        self._lock = threading.Lock()

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_new_tokens=64, seed=0, stop=None):
        with self._lock:
            self.calls.append(
                {"prompts": list(prompts), "n": n, "temperature": temperature, "top_p": top_p,
                 "max_new_tokens": max_new_tokens, "seed": seed, "stop": stop}
            )  # fmt: skip
        self.started.set()
        if self.gate is not None:
            self.gate.wait(30)
        if self.delay:
            time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        if n < 1:
            raise BadInput(f"n={n}: the number of completions per prompt must be at least 1")
        return [
            [truncate_at_stop(f"{prompt_text(p)}|t={temperature:g}|s={seed}|{k}", stop) for k in range(n)]
            for p in prompts
        ]


class Counting:
    """Any backend, with the prompts of each ``generate`` call recorded in ``calls``."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[list] = []
        self._lock = threading.Lock()

    def generate(self, prompts, **kwargs):
        with self._lock:
            self.calls.append(list(prompts))
        return self.inner.generate(prompts, **kwargs)


class IdEchoBackend(EchoBackend):
    """An ``EchoBackend`` that also samples token-id prompts (``sample_ids``), one seed per prompt.

    Each sample's text names its prompt ids and seed; its tokens are the prompt's ids; every call is
    recorded in ``id_calls``.
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self.id_calls: list[dict] = []

    def sample_ids(self, prompts, seeds, *, n=1, **options):
        from posttrainlab.generation.shared_prefix import Sample

        with self._lock:
            self.id_calls.append({"prompts": [list(p) for p in prompts], "seeds": list(seeds), "n": n, **options})
        return [
            [Sample(f"{list(p)}|s={s}|{k}", tuple(p), "length") for k in range(n)]
            for p, s in zip(prompts, seeds, strict=True)
        ]
