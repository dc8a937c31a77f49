"""The beam search itself (runners/beam_algorithm.py): survivors, ties, finishing rules, tokens and seeds, by hand.

A scripted proposer returns fixed steps for each prefix and a table scorer fixed step scores, so every
round's candidates, scores and survivors below are worked out by hand. The last test runs the real
step sampler on a tiny random model.
"""

from __future__ import annotations

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.generation.sampling import derive_seed
from posttrainlab.generation.shared_prefix import PrefixRequest
from posttrainlab.runners.beam_algorithm import (
    FINISH_REASONS,
    STEP_ENDS,
    BackendProposer,
    Beam,
    Search,
    Step,
    distinct_candidates,
    finish_reason,
    is_answer_line,
    pick,
    search,
    select_survivors,
)
from posttrainlab.runners.settings import BeamSettings


class Script:
    """Proposes ``steps[prefix]`` (a list of ``Step`` or text, 3 tokens each), the first ``n``; records each call."""

    def __init__(self, steps: dict[str, list]):
        self.steps = steps
        self.calls: list[tuple[list[PrefixRequest], int, int]] = []

    def propose(self, requests, n, max_new_tokens):
        self.calls.append((list(requests), n, max_new_tokens))
        out = []
        for r in requests:
            row = [s if isinstance(s, Step) else Step(s, 3) for s in self.steps[r.prefix]]
            assert len(row) >= n, (r.prefix, n)
            out.append(row[:n])
        return out


def table_scorer(table: dict[str, float]):
    """Each step's score is ``table[step]``, whatever comes before it."""

    def score(items):
        return [[table[s] for s in steps] for _, steps in items]

    return score


def one(prompt: str = "p") -> list[Search]:
    return [Search("q1", prompt, "question")]


def test_survivors_are_the_best_with_ties_to_the_lowest_index():
    beams = [Beam(score=s) for s in (0.5, 0.9, 0.5, 0.9, 0.1)]
    assert select_survivors(beams, 3) == [1, 3, 0]
    assert select_survivors(beams, 0) == [] and select_survivors(beams, 9) == [1, 3, 0, 2, 4]


def test_finish_rules():
    s = BeamSettings(max_steps=4, max_new_tokens=20)
    assert [is_answer_line(t) for t in ("Answer: 12", "answer: twelve", "**Answer:** 3", "12 + 3 = 15")] == [
        True, True, True, False,
    ]  # fmt: skip
    cases = [
        (Step("Answer: 5", 4, "eos"), 10, 0, "answer"),  # an answer line wins over how it ended
        (Step("3 + 4 = 7", 4, "eos"), 10, 0, "eos"),
        (Step("  ", 2), 10, 0, "empty"),
        (Step("3 + 4 = 7", 4, "length"), 10, 0, "length"),
        (Step("3 + 4 = 7", 4), 20, 0, "max_tokens"),  # 20 tokens generated on the beam: its budget is spent
        (Step("3 + 4 = 7", 4), 19, 3, "max_steps"),  # round 3 is the 4th and last
        (Step("3 + 4 = 7", 4), 19, 2, None),
    ]
    for step, tokens, round_, want in cases:
        assert finish_reason(step, tokens, round_, s) == want, step
    assert set(FINISH_REASONS) >= {w for *_, w in cases if w}


def test_distinct_keeps_the_first_of_each_text_and_finished_state():
    a, a_done = Beam(("a",), tokens=1), Beam(("a",), tokens=2, finished="eos")
    got = distinct_candidates([a, Beam(("a",), tokens=3), a_done, Beam(("b",)), Beam(("a",), finished="answer")])
    assert got == [a, a_done, Beam(("b",))]


def test_a_search_by_hand():
    """beams=2, proposals=2, max_steps=3, score = the last step's.

    round 0: the root proposes 2 x 2 = 4 steps: a1 .9, a2 .5, a3 .9, "Answer: 1" .7 -> keep 2: a1 (.9, index 0)
             and a3 (.9, index 2); the answer line is pruned although it would have finished.
    round 1: a1 -> b1 .4, "Answer: 2" .8; a3 -> "Answer: 3" .8, b2 .95. Candidates in order
             [a1 b1 .4, a1 A2 .8, a3 A3 .8, a3 b2 .95] -> keep 2: a3 b2 (.95), a1 A2 (.8, beats a3 A3 on index);
             a1 A2 is finished (answer), a3 b2 stays active.
    round 2 (last): a3 b2 -> "Answer: 4" .6, c .99 -> keep 2 - 1 = 1: c, finished at max_steps.
    Answer: the best-scored finished beam, a3 b2 c (.99). Tokens: 3 per step, 4 + 4 + 2 = 10 steps = 30.
    """
    script = Script({
        "": ["a1", "a2", "a3", "Answer: 1"],
        "a1\n": ["b1", "Answer: 2"],
        "a3\n": ["Answer: 3", "b2"],
        "a3\nb2\n": ["Answer: 4", "c"],
    })  # fmt: skip
    table = {"a1": 0.9, "a2": 0.5, "a3": 0.9, "Answer: 1": 0.7, "b1": 0.4, "Answer: 2": 0.8, "Answer: 3": 0.8,
             "b2": 0.95, "Answer: 4": 0.6, "c": 0.99}  # fmt: skip
    (s,) = search(one(), BeamSettings(beams=2, proposals=2, max_steps=3, seed=7), script, table_scorer(table))
    assert [(b.response, b.score, b.finished) for b in s.finished] == [
        ("a1\nAnswer: 2", 0.8, "answer"),
        ("a3\nb2\nc", 0.99, "max_steps"),
    ]
    assert s.finished[1].scores == (0.9, 0.95, 0.99) and s.active == []
    assert pick(s) == 1 and s.tokens == 30 and s.rounds == 3 and s.candidates == 4 + 4 + 2
    assert s.finished[0].tokens == 6 and s.finished[1].tokens == 9  # the tokens on each beam's own path
    # one call per round; n = beams x proposals for the root, then proposals; the step budget is what is left
    assert [(len(r), n, m) for r, n, m in script.calls] == [(1, 4, 48), (2, 2, 45), (1, 2, 42)]
    round1 = script.calls[1][0]
    assert [r.prefix for r in round1] == ["a1\n", "a3\n"] and round1[0].prompt == "p"
    assert [r.seed for r in round1] == [derive_seed(7, "q1", 1, 0), derive_seed(7, "q1", 1, 1)]


def test_min_aggregation_chooses_otherwise():
    """beams=2, proposals=1, 2 rounds: x .9 then x2 .5; y .4 then y2 .8.

    last: x x2 scores .5, y y2 .8 -> y y2.  min: x x2 min(.9, .5) = .5, y y2 min(.4, .8) = .4 -> x x2.
    """
    script = Script({"": ["x", "y"], "x\n": ["x2"], "y\n": ["y2"]})
    table = {"x": 0.9, "y": 0.4, "x2": 0.5, "y2": 0.8}
    for how, want in (("last", "y\ny2"), ("min", "x\nx2")):
        (s,) = search(one(), BeamSettings(2, 1, max_steps=2, aggregation=how), script, table_scorer(table))
        assert s.finished[pick(s)].response == want, how


def test_duplicates_are_dropped_unless_kept():
    """The root proposes a, a, b, c (scores .9, .9, .5, .4), beams=2, one round: distinct keeps a and b;
    with duplicates kept, both copies of a survive."""
    script = Script({"": ["a", "a", "b", "c"]})
    table = {"a": 0.9, "b": 0.5, "c": 0.4}
    (s,) = search(one(), BeamSettings(2, 2, max_steps=1), script, table_scorer(table))
    assert [b.response for b in s.finished] == ["a", "b"] and s.candidates == 3
    (s,) = search(one(), BeamSettings(2, 2, max_steps=1, distinct=False), script, table_scorer(table))
    assert [b.response for b in s.finished] == ["a", "a"] and s.tokens == 12


def test_eos_empty_length_and_the_token_budget():
    """beams=3, proposals=1, max_new_tokens=10. Root: an eos step, an empty line, a step out of tokens (all
    finished at once: 3 beams finished, done after one round)."""
    script = Script({"": [Step("1 + 1 = 2", 4, "eos"), Step("", 1), Step("1 + 1 = 3", 5, "length")]})
    table = {"1 + 1 = 2": 0.2, "1 + 1 = 3": 0.6}
    (s,) = search(one(), BeamSettings(3, 1, max_new_tokens=10), script, table_scorer(table))
    assert [(b.steps, b.finished, b.score) for b in s.finished] == [
        (("1 + 1 = 3",), "length", 0.6),
        (("1 + 1 = 2",), "eos", 0.2),
        ((), "empty", 0.0),  # no step: aggregates to 0.0, ranked last
    ]
    assert s.tokens == 10 and s.rounds == 1

    # budget: 6 tokens a step, max_new_tokens=10: the second step brings the beam to 12 >= 10, finished
    script = Script({"": [Step("s", 6)], "s\n": [Step("t", 6)]})
    (s,) = search(one(), BeamSettings(1, 1, max_new_tokens=10), script, table_scorer({"s": 0.5, "t": 0.5}))
    assert [(b.response, b.finished, b.tokens) for b in s.finished] == [("s\nt", "max_tokens", 12)]
    assert [m for _, _, m in script.calls] == [10, 4]  # the second step may use only what is left


def test_problems_share_each_round_and_stop_on_their_own():
    """Two problems in one call per round: p finishes in round 0, q runs two rounds."""
    steps = {"": ["Answer: 1"], "go\n": ["Answer: 2"]}

    class ByPrompt(Script):
        def propose(self, requests, n, max_new_tokens):
            self.calls.append((list(requests), n, max_new_tokens))
            return [[Step("go" if r.prompt == "q" and not r.prefix else steps[r.prefix][0], 3)] * n for r in requests]

    script = ByPrompt(steps)
    searches = [Search("p1", "p", "qp"), Search("q1", "q", "qq")]
    search(searches, BeamSettings(1, 1), script, table_scorer({"Answer: 1": 0.5, "Answer: 2": 0.5, "go": 0.5}))
    assert [len(r) for r, _, _ in script.calls] == [2, 1]
    assert [s.rounds for s in searches] == [1, 2] and [s.tokens for s in searches] == [3, 6]


def test_bad_settings():
    for bad in (BeamSettings(beams=0), BeamSettings(proposals=0), BeamSettings(max_steps=0),
                BeamSettings(aggregation="product")):  # fmt: skip
        with pytest.raises(BadInput):
            bad.check()


def test_the_step_sampler_on_a_tiny_model(tiny_model):
    """Real sampling: a step never holds the newline, its tokens are what the sampler generated, and the
    texts are the project's own prefix continuations (``sample_continuations``, stop at a newline)."""
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from tiny_models import one_torch_thread

    with one_torch_thread():
        backend = TransformersBackend.from_pretrained(tiny_model, progress=False)
        proposer = BackendProposer(backend, temperature=1.0)
        chat = [{"role": "user", "content": "What is 2 + 3?"}]
        requests = [PrefixRequest(chat, "", 11), PrefixRequest(chat, "2 + 3 = 5\n", 12)]
        rows = proposer.propose(requests, 3, 6)
        again = proposer.propose(requests, 3, 6)
        texts = backend.sample_continuations(requests, n=3, temperature=1.0, max_new_tokens=6, stop=["\n"])
    assert rows == again and [[s.text for s in row] for row in rows] == texts
    for step in (s for row in rows for s in row):
        assert "\n" not in step.text and step.end in STEP_ENDS and 1 <= step.tokens <= 6
        assert step.end != "length" or step.tokens == 6
    assert proposer.count_tokens("ab") == len(backend.tokenizer("ab", add_special_tokens=False)["input_ids"])
