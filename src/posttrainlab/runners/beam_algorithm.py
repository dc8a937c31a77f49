"""The search of ``posttrain eval beam-search``: PRM-guided step-level beam search (``runners.beam_search`` runs it).

The PRM chooses after every step, not only at the end as in best-of-N. The algorithm is HuggingFace
search-and-learn's ``beam_search`` (github.com/huggingface/search-and-learn, ``src/sal/search/beam_search.py``;
Beeching, Tunstall & Rush 2024, "Scaling test-time compute with open models", after Snell et al. 2024), on
arith-v1's steps, one line each:

1. A problem starts from one empty beam, which proposes ``beams x proposals`` first steps; every later
   round each **active** beam proposes ``proposals`` continuations of ONE step, sampled at ``temperature``
   after the prompt and the beam's text until a newline (the step separator), an eos or the step's token
   limit. With every beam alive a round samples ``beams x proposals`` steps, as many as best-of-N with
   N = ``beams x proposals`` does per line, so the defaults (4 x 4) spend about best-of-N's N = 16 tokens.
2. The PRM scores every candidate (its beam's steps plus the new one; steps = the non-empty lines,
   question = the prompt's problem text, as in ``eval.best_of_n``), all steps in one pass
   (``prm_eval.score_items``); a candidate's score aggregates its step scores, ``last`` (search-and-learn's
   default) or ``min`` (best-of-N's ``prm_min``), ``best_of_n.aggregate``. A finished candidate without an
   answer line also gets ``no_answer_step`` scored after its lines when the PRM was trained with it.
3. A candidate is **finished** (:func:`finish_reason`) when its new step is an answer line (one the arith
   grader reads as an answer attempt), ended in eos, is empty (nothing before the newline: no step added),
   ran out of the step's tokens, when its beam has generated ``max_new_tokens`` or more, or in round
   ``max_steps``.
4. Of a problem's candidates the best ``beams - finished so far`` survive (highest score, ties to the lowest
   candidate index: parent rank, then proposal; :func:`select_survivors`); finished survivors are kept
   aside, the others are the next round's active beams, best first. With ``distinct`` (default) a candidate
   that repeats an earlier candidate's text and finished state in the same round is dropped before the
   choice (search-and-learn's ``filter_duplicates``), so the beams do not collapse onto one prefix.
5. A problem is done when ``beams`` beams are finished or none is active. Its answer is the finished beam
   with the highest score, ties to the one finished first (:func:`pick`).

The knobs (``beams``, ``proposals``, ``max_steps``, ``max_new_tokens``, ``max_step_tokens``, ``aggregation``,
``distinct``, ``seed``) are ``runners.settings.BeamSettings``'s, the class the runner takes too.

Unlike search-and-learn, which keeps every finished candidate and always ``n / beam_width`` active ones,
finished beams here count against the width, so the work per problem shrinks as beams finish.

**Tokens.** Every proposal's generated tokens count (pruned ones too, the newline or eos token that ended
a step included): what the search paid, comparable with best-of-N's (``runners.beam_search.best_of_n_tokens``).

**Seeds.** The request of the beam of rank k in round r of problem ``id`` samples with
``derive_seed(seed, id, r, k)``, so what a beam proposes does not depend on the batch it is drawn in.

The search runs all problems' rounds together: one sampling call and one scoring call per round, over
every active beam of every problem. Written by hand: the finishing and tie rules must be exact and
documented; the sampler (``TransformersBackend.sample_ids`` on ``shared_prefix.encode_request``'s ids: the
prompt as the chat template renders it, then the prefix by the BPE boundary rule) is the project's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from posttrainlab.errors import BadInput
from posttrainlab.eval.best_of_n import aggregate, argmax_first
from posttrainlab.generation.sampling import derive_seed
from posttrainlab.generation.shared_prefix import PrefixRequest
from posttrainlab.runners.settings import BeamSettings

#: How a proposed step ended: at the step separator, at an eos token, or out of tokens.
STEP_ENDS = ("newline", "eos", "length")
#: Why a beam finished, in the order :func:`finish_reason` tests them.
FINISH_REASONS = ("answer", "eos", "empty", "length", "max_tokens", "max_steps")
STEP_SEPARATOR = "\n"


@dataclass(frozen=True)
class Step:
    """One proposed step: its text (no separator), the tokens generated for it, how it ended (``STEP_ENDS``)."""

    text: str
    tokens: int
    end: str = "newline"


@dataclass(frozen=True)
class Beam:
    """A partial (or finished) solution: its steps, their PRM scores, its score and the tokens on its path."""

    steps: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    score: float = 0.0
    tokens: int = 0
    finished: str | None = None

    @property
    def response(self) -> str:
        return STEP_SEPARATOR.join(self.steps)

    @property
    def prefix(self) -> str:
        """The text the next step continues: the steps, each followed by the separator."""
        return "".join(s + STEP_SEPARATOR for s in self.steps)


@dataclass
class Search:
    """One problem's search state: active and finished beams, tokens generated, rounds run, candidates seen."""

    id: str
    prompt: Any
    question: str
    active: list[Beam] = field(default_factory=lambda: [Beam()])
    finished: list[Beam] = field(default_factory=list)
    tokens: int = 0
    rounds: int = 0
    candidates: int = 0

    def done(self, beams: int) -> bool:
        return len(self.finished) >= beams or not self.active


class StepProposer(Protocol):
    """Samples ``n`` one-step continuations of each request's prefix, at most ``max_new_tokens`` tokens each."""

    def propose(self, requests: Sequence[PrefixRequest], n: int, max_new_tokens: int) -> list[list[Step]]: ...


def is_answer_line(text: str) -> bool:
    """Whether the arith grader reads ``text`` as an answer attempt (any ``Answer:`` line, well-formed or not).

    >>> is_answer_line("Answer: 115"), is_answer_line("answer: 12.5"), is_answer_line("375 - 260 = 115")
    (True, True, False)
    """
    from posttrainlab.grading.arith import ArithGrader

    return ArithGrader().grade(text, 0).outcome != "missing_answer"


def finish_reason(step: Step, tokens: int, round_: int, settings: BeamSettings) -> str | None:
    """Why a candidate ending in ``step`` (its beam ``tokens`` long, proposed in round ``round_``) is finished.

    ``None`` when it stays active. The reasons are tested in ``FINISH_REASONS`` order.

    >>> s = BeamSettings(max_steps=3, max_new_tokens=40)
    >>> [finish_reason(Step(t, 5, e), 10, 0, s) for t, e in [("Answer: 7", "newline"), ("1 + 2 = 3", "eos")]]
    ['answer', 'eos']
    >>> finish_reason(Step("1 + 2 = 3", 5), 40, 0, s), finish_reason(Step("1 + 2 = 3", 5), 10, 2, s)
    ('max_tokens', 'max_steps')
    >>> finish_reason(Step("1 + 2 = 3", 5), 10, 1, s) is None
    True
    """
    if is_answer_line(step.text):
        return "answer"
    if step.end == "eos":
        return "eos"
    if not step.text.strip():
        return "empty"
    if step.end == "length":
        return "length"
    if tokens >= settings.max_new_tokens:
        return "max_tokens"
    if round_ >= settings.max_steps - 1:
        return "max_steps"
    return None


def select_survivors(candidates: Sequence[Beam], keep: int) -> list[int]:
    """Indices of the ``keep`` best candidates by score, best first, ties to the lowest index.

    >>> select_survivors([Beam(score=0.2), Beam(score=0.9), Beam(score=0.2), Beam(score=0.9)], 3)
    [1, 3, 0]
    """
    return sorted(range(len(candidates)), key=lambda j: (-candidates[j].score, j))[: max(keep, 0)]


def distinct_candidates(candidates: Sequence[Beam]) -> list[Beam]:
    """The candidates without repeats of an earlier one's text and finished state (first one kept).

    >>> [b.tokens for b in distinct_candidates([Beam(("a",), tokens=1), Beam(("a",), tokens=2), Beam(("b",))])]
    [1, 0]
    """
    seen: set[tuple[str, bool]] = set()
    out = []
    for b in candidates:
        key = (b.response, b.finished is not None)
        if key not in seen:
            seen.add(key)
            out.append(b)
    return out


def pick(search: Search) -> int:
    """Index of the answer among ``search.finished``: the highest score, ties to the beam finished first."""
    return argmax_first([b.score for b in search.finished])


def _expand(search: Search, parent: Beam, steps: Sequence[Step], round_: int, settings: BeamSettings) -> list[Beam]:
    """The candidates ``parent`` makes with its proposed ``steps``; their tokens are added to the problem's."""
    out = []
    for step in steps:
        search.tokens += step.tokens
        tokens = parent.tokens + step.tokens
        why = finish_reason(step, tokens, round_, settings)
        added = (step.text,) if step.text.strip() else ()  # an empty step adds nothing to the solution
        out.append(Beam(parent.steps + added, tokens=tokens, finished=why))
    return out


def scored_steps(beam: Beam, no_answer_step: str = "") -> list[str]:
    """The steps the PRM scores: the beam's lines, and ``no_answer_step`` after a finished one without an answer."""
    from posttrainlab.data.arith.prm_labels import with_no_answer_step
    from posttrainlab.data.arith.steps import split_steps

    steps = split_steps(beam.response)
    return with_no_answer_step(steps, no_answer_step) if beam.finished else steps


def search_round(
    searches: Sequence[Search],
    round_: int,
    settings: BeamSettings,
    proposer: StepProposer,
    score: Callable[[list[tuple[str, list[str]]]], list[list[float]]],
    no_answer_step: str = "",
) -> None:
    """One round over every problem not done yet: propose, score, choose (module docstring, steps 1-4)."""
    live = [s for s in searches if not s.done(settings.beams)]
    if not live:
        return
    owners = [(s, k) for s in live for k in range(len(s.active))]
    seed = settings.seed
    requests = [PrefixRequest(s.prompt, s.active[k].prefix, derive_seed(seed, s.id, round_, k)) for s, k in owners]
    n = settings.beams * settings.proposals if round_ == 0 else settings.proposals
    room = max(settings.max_new_tokens - s.active[k].tokens for s, k in owners)
    proposed = proposer.propose(requests, n, min(settings.max_step_tokens, room))
    if len(proposed) != len(requests):
        raise BadInput(f"the step sampler returned {len(proposed)} rows for {len(requests)} beams")
    pools: dict[int, list[Beam]] = {id(s): [] for s in live}
    for (s, k), steps in zip(owners, proposed, strict=True):
        if len(steps) != n:
            raise BadInput(f"the step sampler returned {len(steps)} steps for a beam of {s.id}, not {n}")
        pools[id(s)] += _expand(s, s.active[k], steps, round_, settings)
    if settings.distinct:
        pools = {key: distinct_candidates(pool) for key, pool in pools.items()}
    order = [(s, j) for s in live for j in range(len(pools[id(s)]))]
    flat = score([(s.question, scored_steps(pools[id(s)][j], no_answer_step)) for s, j in order])
    for (s, j), scores in zip(order, flat, strict=True):
        pool = pools[id(s)]
        pool[j] = replace(pool[j], scores=tuple(scores), score=aggregate(scores, settings.aggregation))
    for s in live:
        pool = pools[id(s)]
        survivors = [pool[j] for j in select_survivors(pool, settings.beams - len(s.finished))]
        s.finished += [b for b in survivors if b.finished is not None]
        s.active = [b for b in survivors if b.finished is None]
        s.rounds += 1
        s.candidates += len(pool)


def search(
    searches: Sequence[Search],
    settings: BeamSettings,
    proposer: StepProposer,
    score: Callable[[list[tuple[str, list[str]]]], list[list[float]]],
    *,
    no_answer_step: str = "",
    on_round: Callable[[int, int], None] | None = None,
) -> Sequence[Search]:
    """Run rounds until every problem is done (at most ``max_steps``); ``on_round(round, problems left)``.

    ``no_answer_step``: the PRM's explicit missing-answer step (its ``prm_config.json``; ``""``: none), scored
    after the lines of a finished beam without an answer line."""
    settings.check()
    for round_ in range(settings.max_steps):
        if all(s.done(settings.beams) for s in searches):
            break
        search_round(searches, round_, settings, proposer, score, no_answer_step)
        if on_round is not None:
            on_round(round_, sum(not s.done(settings.beams) for s in searches))
    return searches


class BackendProposer:
    """Steps from a ``TransformersBackend``: ``sample_ids`` on ``encode_request``'s ids, stopping at a newline.

    ``tokens`` of a step is every token generated for it, the newline or eos token included; ``end`` is
    ``eos`` when an eos token ended it, ``newline`` at the separator, ``length`` when its tokens ran out.
    """

    def __init__(self, backend, *, temperature: float, top_p: float = 1.0, progress: bool = False):
        self.backend, self.temperature, self.top_p, self.progress = backend, temperature, top_p, progress
        self.tokenizer = backend.tokenizer

    def propose(self, requests: Sequence[PrefixRequest], n: int, max_new_tokens: int) -> list[list[Step]]:
        from posttrainlab.generation.shared_prefix import encode_request
        from posttrainlab.progress import progress_bar

        ids = [encode_request(self.tokenizer, r) for r in requests]
        with progress_bar(self.progress, transient=True) as bar:
            task = bar.add_task(f"sampling {len(ids)} beams x {n} steps", total=len(ids))
            samples = self.backend.sample_ids(
                ids, [r.seed for r in requests], n=n, temperature=self.temperature, top_p=self.top_p,
                max_new_tokens=max_new_tokens, stop=[STEP_SEPARATOR], on_batch=lambda k: bar.advance(task, k),
            )  # fmt: skip
        return [[Step(s.text, len(s.tokens), _end(s)) for s in row] for row in samples]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens), for counting best-of-N's samples."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _end(sample) -> str:
    if sample.stop_token is not None:
        return "eos"
    return "newline" if sample.finish_reason == "stop" else "length"


__all__ = [
    "FINISH_REASONS",
    "STEP_ENDS",
    "BackendProposer",
    "Beam",
    "Search",
    "Step",
    "StepProposer",
    "distinct_candidates",
    "finish_reason",
    "is_answer_line",
    "pick",
    "scored_steps",
    "search",
    "search_round",
    "select_survivors",
]
