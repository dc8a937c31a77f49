"""``label mc --backend openai`` through ``posttrain serve``: a prefix is continued, not restarted.

The MC labeller's OpenAI backend (``make_backend(..., backend="openai")``, what ``label mc --backend
openai`` builds) sends a prefix as a final assistant message with ``continue_final_message``. Served by
``posttrain serve`` over the tiny model (its ChatML chat template, ``models.tokenizer``), the served
continuations must equal the local transformers backend's continuations of the same prefix: greedy,
and sampled with the same per-request seeds (both run the same seeded shared-prefix sampler).
"""

from __future__ import annotations

import pytest

from posttrainlab.generation.factory import make_backend
from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed
from posttrainlab.serve.app import ServerThread, create_app

QUESTION = [{"role": "user", "content": "What is 6 * 3 + 4?"}]
WRONG = "6 * 3 = 17\n"  # a known-wrong first step
REQUESTS = [
    PrefixRequest(QUESTION, WRONG, derive_seed(0, "p1", 0, 0)),
    PrefixRequest(QUESTION, WRONG + "17 + 4 = 21\n", derive_seed(0, "p1", 0, 1)),
    PrefixRequest(QUESTION, "", derive_seed(0, "p1", "root")),
]


@pytest.fixture(scope="module")
def remote(tiny_backend):
    with ServerThread(create_app(tiny_backend, "tiny", batch_wait_ms=5)) as server:
        yield make_backend("tiny", backend="openai", base_url=server.url, batch_size=4)


def test_served_greedy_continuations_equal_the_local_ones(remote, tiny_backend):
    kw = dict(n=2, temperature=0.0, max_new_tokens=12)
    served = remote.sample_continuations(REQUESTS, **kw)
    local = tiny_backend.sample_continuations(REQUESTS, **kw)
    assert served == local
    restarted = tiny_backend.generate([QUESTION], max_new_tokens=12)[0][0]  # a new assistant turn
    assert served[0][0] != restarted and served[1][0] != restarted


def test_served_sampled_continuations_equal_the_local_ones_seed_for_seed(remote, tiny_backend):
    kw = dict(n=3, temperature=1.0, max_new_tokens=12)
    served = remote.sample_continuations(REQUESTS, **kw)
    assert served == tiny_backend.sample_continuations(REQUESTS, **kw)
    assert len(set(served[0])) > 1  # three different samples of one prefix
