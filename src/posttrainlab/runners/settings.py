"""The settings of every evaluation run, one typed class per runner, each default written once here.

The CLI verb builds one from its flags (each flag's default read from the class), the quickstart holds or builds
the same class in its config (``quickstart.config``: its ``eval`` section is a ``PolicyEvalSettings``, its
``process.beam`` a ``BeamSettings``), and the Python API takes it as the runner's ``settings`` argument:

- ``PolicyEvalSettings``: ``runners.policy.evaluate_policy`` (``posttrain eval policy``);
- ``PRMEvalSettings``: ``runners.prm_eval.run`` (``posttrain eval prm``);
- ``BestOfNSettings``: ``runners.best_of_n.run`` (``posttrain eval best-of-n``);
- ``BeamSettings``: ``runners.beam_search.run`` (``posttrain eval beam-search``) and the search itself
  (``runners.beam_algorithm.search``);
- ``JudgeSettings``: ``runners.judge.run_judge`` (``posttrain eval judge``).

A runner's inputs and outputs (the model, the data, the output folder) are its arguments, not settings; so are
what replaces a loaded model in tests (``backend``, ``scorer``) and the progress bar. Each class's ``check()``
refuses a value no run can use with ``BadInput`` naming it, before any model loads; ``config.check_settings`` runs
it on a quickstart config as it is loaded. Every class is a plain dataclass of YAML-typed fields (OmegaConf's
structured configs), torch-free, so the CLI imports it before torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from posttrainlab.errors import BadInput, at_least_one, finite
from posttrainlab.eval.aggregation import AGGREGATIONS
from posttrainlab.eval.step_metrics import DEFAULT_SWEEP, DEFAULT_THRESHOLD
from posttrainlab.generation.sampling import check_sampling
from posttrainlab.runners.judge_client import RetryPolicy

#: Aggregations a beam's score may use (``eval.aggregation.aggregate``).
BEAM_AGGREGATIONS = ("last", "min")
DEFAULT_MODEL_URL = "http://localhost:7010/v1"
OnInvalid = Literal["abort", "record"]


@dataclass
class PolicyEvalSettings:
    """A policy on arith-v1: greedy answers, ``samples`` more per problem, preference pairs (``runners.policy``)."""

    split: str | None = None  # None: the split the data path names (DIR:SPLIT), else test
    limit: int | None = None  # the first N problems (and preference pairs); None: all
    batch_size: int = 32  # prompts per generate call / pairs per forward pass
    max_new_tokens: int = 64
    k: int = 1  # pass@k from the samples (k > 1)
    samples: int = 0  # K > 1: K samples per problem beside the greedy answer (pass@1, maj@K); 0: k of them
    temperature: float = 0.0  # of the answer; 0 is greedy
    sample_temperature: float | None = None  # of the samples; None: temperature, 1.0 when that is 0
    top_p: float = 1.0
    seed: int = 0
    preference_split: str | None = "preference_test"  # the pairs to rank; None: no preference accuracy
    beta: float = 0.1  # DPO's beta of the implicit reward (with a reference model)
    grader: str = "arith"
    trust_remote_code: bool = False
    dtype: str = "float32"

    @property
    def n_samples(self) -> int:
        """Samples per problem: ``samples``, else ``k`` (more than 1: pass@1 and maj@K are measured)."""
        return self.samples or self.k

    def check(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise BadInput(f"limit={self.limit}: must be at least 1")
        at_least_one(batch_size=self.batch_size, max_new_tokens=self.max_new_tokens)  # 0 was refused only at the stage
        finite("temperature", self.temperature)  # nan passed every comparison below (issue #42)
        finite("top_p", self.top_p)
        finite("sample_temperature", self.sample_temperature)
        if self.k < 1 or self.samples < 0 or self.n_samples < self.k:
            raise BadInput(f"k={self.k}, samples={self.samples}: need 1 <= k <= samples (samples 0: k)")
        if self.sample_temperature is not None and not self.sample_temperature > 0:
            raise BadInput(
                f"sample_temperature={self.sample_temperature}: must be > 0 (k samples, not k equal answers)"
            )
        if self.beta <= 0:
            raise BadInput(f"beta={self.beta}: must be > 0")


@dataclass
class PRMEvalSettings:
    """A PRM on step-labelled solutions (``runners.prm_eval``)."""

    threshold: float = DEFAULT_THRESHOLD  # a step is predicted wrong when its score is below
    batch_size: int = 16  # solutions per PRM forward pass
    format: str | None = None  # the rows' step-level format; None: told from the first row
    limit: int | None = None  # the first N rows; None: all
    sweep: list[float] = field(default_factory=lambda: list(DEFAULT_SWEEP))  # first-error F1's thresholds
    dtype: str = "float32"
    device: str | None = None  # None: CUDA when available

    def check(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise BadInput(f"threshold={self.threshold}: must be in [0, 1]")
        at_least_one(limit=self.limit, batch_size=self.batch_size)


@dataclass
class BestOfNSettings:
    """n samples of a policy per problem, one picked by a PRM or a vote (``runners.best_of_n``)."""

    n: int = 16  # samples per problem, drawn once
    ns: list[int] | None = None  # the n' to report; None: the powers of 2 up to n, and n
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 48
    seed: int = 0
    limit: int | None = None  # the first N problems; None: all
    split: str | None = None  # None: the split the data path names, else test
    batch_size: int = 32  # prompts per generate call
    prm_batch_size: int = 16  # solutions per PRM forward pass
    vote_aggregation: str = "min"  # the step-score aggregation weighting the PRM vote
    dtype: str = "float32"
    device: str | None = None  # the PRM's; None: CUDA when available

    def check(self) -> None:
        from posttrainlab.eval.best_of_n import parse_ns

        if self.n < 1:
            raise BadInput(f"n={self.n}: need at least one sample per problem")
        parse_ns(self.ns, self.n)
        if self.temperature <= 0:
            raise BadInput(f"temperature={self.temperature}: best-of-n needs temperature > 0 (greedy gives n equal "
                           "samples)")  # fmt: skip
        check_sampling(self.n, self.temperature, self.top_p, self.max_new_tokens)
        if self.vote_aggregation not in AGGREGATIONS:
            raise BadInput(f"vote aggregation {self.vote_aggregation!r}: choose one of {', '.join(AGGREGATIONS)}")
        at_least_one(limit=self.limit)


@dataclass
class BeamSettings:
    """PRM-guided step-level beam search (``runners.beam_search``; the search's rules: ``runners.beam_algorithm``).

    The defaults (4 beams x 4 proposals, 48 tokens per solution) spend about best-of-N's N = 16 tokens.
    """

    beams: int = 4  # B beams kept per problem (finished ones count)
    proposals: int = 4  # M one-step continuations each active beam proposes (B x M = 16: best-of-16's budget)
    max_steps: int = 8  # rounds at most; a beam is finished after the last
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 48  # a beam that has generated this many tokens is finished (best-of-N's limit)
    max_step_tokens: int = 48  # the longest step
    aggregation: str = "last"  # a beam's score: its last step's (search-and-learn) or its lowest step's ("min")
    distinct: bool = True  # drop a candidate that repeats another of its round
    seed: int = 0
    limit: int | None = None  # the first N problems; None: all
    split: str | None = None  # None: the split the data path names, else test
    batch_size: int = 32  # beams per prefill
    prm_batch_size: int = 16  # solutions per PRM forward pass
    dtype: str = "float32"
    device: str | None = None  # the PRM's; None: CUDA when available

    def check(self) -> None:
        at_least_one(beams=self.beams, proposals=self.proposals, max_steps=self.max_steps,
                      max_new_tokens=self.max_new_tokens, max_step_tokens=self.max_step_tokens)  # fmt: skip
        if self.aggregation not in BEAM_AGGREGATIONS:
            raise BadInput(f"aggregation {self.aggregation!r}: choose one of {', '.join(BEAM_AGGREGATIONS)}")
        if self.temperature <= 0:
            raise BadInput(f"temperature={self.temperature}: beam search needs temperature > 0 (greedy proposes one "
                           "step)")  # fmt: skip
        check_sampling(self.proposals, self.temperature, self.top_p, self.max_step_tokens)
        at_least_one(limit=self.limit, prm_batch_size=self.prm_batch_size)


@dataclass(frozen=True)
class JudgeSettings:
    """One judge run (``runners.judge``). Field names follow the card's script flags."""

    data_file: str
    model_name: str
    model_url: str = DEFAULT_MODEL_URL
    api_key: str = "EMPTY"  # what a local vLLM server expects
    num_threads: int = 32  # the card's example
    max_tokens: int = 8000  # the card's default generation limit
    max_samples: int | None = None  # the first N rows only: a smoke run
    output_dir: Path = Path("test_result")
    on_invalid: OnInvalid = "abort"
    timeout_s: float = 600.0  # per request; long answers at 8,000 tokens take minutes
    run_tag: str | None = None  # tells repeated runs apart (the card averages 10)
    retry_failed: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def check(self) -> None:
        """``BadInput`` for a value no run can use."""
        at_least_one(True, num_threads=self.num_threads, max_tokens=self.max_tokens, max_samples=self.max_samples)
        if self.on_invalid not in ("abort", "record"):
            raise BadInput(f"--on-invalid {self.on_invalid!r}: choose abort or record")
        finite("--timeout", self.timeout_s, positive=True)  # nan passed `<= 0` and left an empty --out (issue #42)
        if not self.model_name:
            raise BadInput("--model-name is empty: give the name the server serves")


__all__ = [
    "BEAM_AGGREGATIONS",
    "DEFAULT_MODEL_URL",
    "BeamSettings",
    "BestOfNSettings",
    "JudgeSettings",
    "OnInvalid",
    "PRMEvalSettings",
    "PolicyEvalSettings",
]
