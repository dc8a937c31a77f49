"""``generation.sampling.sample_answers``: k answers per record's prompt from one ``generate`` call, count checked."""

from __future__ import annotations

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.generation.prompts import as_messages
from posttrainlab.generation.sampling import sample_answers


class Recorder:
    """Answers ``"<prompt text> #j"`` for sample j, or ``short`` fewer when told to, and keeps every call."""

    def __init__(self, short: int = 0):
        self.calls, self.short = [], short

    def generate(self, prompts, *, n=1, **sampling):
        self.calls.append((prompts, n, sampling))
        return [[f"{p[-1]['content']} #{j}" for j in range(n - self.short)] for p in prompts]


def test_one_call_k_answers_each_prompt_as_a_chat():
    backend = Recorder()
    records = [{"prompt": "What is 2 + 3?"}, {"prompt": [{"role": "user", "content": "Q"}]}]
    got = sample_answers(backend, records, 2, "sampling", temperature=1.0, seed=7)
    assert got == [["What is 2 + 3? #0", "What is 2 + 3? #1"], ["Q #0", "Q #1"]]
    chats = [as_messages("What is 2 + 3?"), records[1]["prompt"]]
    assert backend.calls == [(chats, 2, {"temperature": 1.0, "seed": 7})]


def test_a_backend_that_returns_fewer_answers_is_refused():
    with pytest.raises(BadInput, match=r"^the sampling backend returned 1 lists for 1 prompts, not 3 completions"):
        sample_answers(Recorder(short=1), [{"prompt": "x"}], 3, "sampling")
