"""A trained PRM as GRPO's reward (``GRPORecipe.prm_reward``; docs/policy-lab.md "GRPO with a process reward").

    posttrain train grpo --config configs/arith/grpo-prm.yaml model=runs/sft prm_reward.path=runs/prm

The PRM is loaded once, in the training process, beside the policy (``runners.prm_eval.load_scorer``; never a second
copy of the policy, so the ``baseline:`` verifier is refused), and scores each generation batch's completions in
batches of ``batch_size`` (``score_items``: repeated completions of one prompt are scored once). A completion's steps
are its non-empty lines (``data.arith.steps.split_steps``), with the PRM's ``no_answer_step`` appended as best-of-N
does (``with_no_answer_step``); the question is the prompt's last paragraph (``prm_data.question_of``).

- ``mode: sequence``: the reward is ``aggregation`` (``min``, ``last``, ``product``; ``eval.aggregation``) of the
  step scores, one float per completion, weighted by ``weight`` beside the grader's terms in TRL's own sum
  (``reward_weights``). A completion without a step scores 0.
- ``mode: step``: the same function runs with weight 0 (its mean is logged), and keeps each completion's bounded
  step rewards and token ids for ``ProcessGRPOTrainer`` (``train.grpo_process.trainer_class``), which turns them
  into per-token advantages. A completion without a step gets one step scored 0, ending at its last token.

**Bounded rewards** (``bounded``), the fix Gao et al. 2024 (arXiv 2410.15115) propose for a PRM reward the policy
learns to hack: ``clip: c`` caps the reward (the aggregate, or each step's score) at ``c``, so the PRM scores lie in
[0, c]. Their "Clip" form is ``min(r - c, 0)``: the same capped reward less the constant ``c``, which GRPO's group
normalisation removes, so both give the same advantages here. ``outcome_gated`` makes the PRM reward 0 when the
final answer is wrong (the grader decides): the PRM can then rank right answers but never pay for a wrong one.

**Reward hacking, measured**: every call logs ``prm/score`` (the mean ``aggregation`` of the raw step scores, before
clip and gate: the proxy) and ``prm/step_score`` (the mean over all steps) through TRL's ``log_metric``;
``train.reward_log`` writes them beside the exact accuracy and step errors (``train.rewards.correctness_reward``).
On arith-v1 it also logs where the PRM is blind (``blind_spot_metrics``): its mean score of each completion's first
exactly wrong step (``prm/wrong_step_score``) and the share of those it accepts, scored above 0.5
(``prm/false_accept``). A policy that learns the PRM's blind spot raises them: its mean score can fall with its
accuracy while more and more of its errors pass the PRM (docs/process-vs-outcome.md: lines with a miscopied operand
passed a result-head PRM).

A completion the PRM cannot read (a step holding its separator, say) gets 0 for each step and is counted in
``prm/unscorable`` rather than stopping the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from posttrainlab.errors import BadInput, finite

#: how a PRM reward enters GRPO, how step scores reduce to one (sequence), how later steps credit a token (step)
PRM_REWARD_MODES = ("sequence", "step")
PRM_REWARD_AGGREGATIONS = ("min", "last", "product")
PRM_REWARD_CREDITS = ("sum", "min")


@dataclass
class PRMRewardConfig:
    """A trained PRM as a GRPO reward (module docstring); off while ``path`` is null.

    ``sequence``: ``aggregation`` of the step scores, times ``weight``, added to the grader's terms
    (``rewards.correctness``, ``rewards.format``; set them to 0 for the PRM alone). ``step`` (DeepSeekMath §4.1.3):
    each step's score normalised over all steps of its group; a token's advantage the sum (``credit: sum``) or PURE's
    minimum (``credit: min``) of the normalised scores of the steps ending at or after it, times ``weight``, added to
    the grader's advantage (``train.grpo_process``). ``clip`` and ``outcome_gated`` bound the PRM reward.
    """

    path: str | None = None  # a PRM folder (posttrain train prm; any layout PRM.from_pretrained reads); null: off
    weight: float = 1.0
    mode: str = "sequence"  # sequence | step
    aggregation: str = "min"  # sequence mode: min | last | product of the step scores
    credit: str = "sum"  # step mode: sum (DeepSeekMath) | min (PURE) of the later steps' normalised rewards
    clip: float | None = None  # cap each PRM reward at this value, so it lies in [0, clip]; null: no cap
    outcome_gated: bool = False  # the PRM reward is 0 when the final answer is wrong
    batch_size: int = 16  # solutions per PRM forward pass
    dtype: str = "float32"  # the PRM's weights: float32 | bfloat16 | float16 | auto

    def check(self) -> None:
        """``BadInput`` naming the field for an unknown mode, aggregation or credit, a weight below 0, a clip not
        above 0, or a batch size below 1."""
        for name, known in (("mode", PRM_REWARD_MODES), ("aggregation", PRM_REWARD_AGGREGATIONS),
                            ("credit", PRM_REWARD_CREDITS)):  # fmt: skip
            if getattr(self, name) not in known:
                raise BadInput(f"{name}={getattr(self, name)!r}: choose one of {', '.join(known)}")
        finite("weight", self.weight)
        if self.weight < 0:
            raise BadInput(f"weight={self.weight}: must be >= 0")
        finite("clip", self.clip, positive=True)
        if self.batch_size < 1:
            raise BadInput(f"batch_size={self.batch_size}: must be at least 1")
        if self.path is not None and not self.path:
            raise BadInput("path: empty; name a PRM folder, or null for no PRM reward")


def bounded(reward: float, clip: float | None = None, right: bool | None = None) -> float:
    """A PRM reward capped at ``clip`` (when set) and 0 when ``right`` is ``False`` (outcome-gated; ``None``: no gate).

    >>> bounded(0.9), bounded(0.9, clip=0.5), bounded(0.3, clip=0.5), bounded(0.9, right=False), bounded(0.9, 0.5, True)
    (0.9, 0.5, 0.3, 0.0, 0.5)
    """
    if clip is not None:
        reward = min(reward, clip)
    return 0.0 if right is False else reward


def sequence_reward(scores: Sequence[float], aggregation: str, clip: float | None = None,
                    right: bool | None = None) -> float:  # fmt: skip
    """One completion's sequence reward: ``aggregation`` of its step scores (0 without steps), then ``bounded``.

    >>> [round(sequence_reward([0.9, 0.5, 0.8], a), 2) for a in PRM_REWARD_AGGREGATIONS]
    [0.5, 0.8, 0.36]
    """
    from posttrainlab.eval.aggregation import aggregate

    return bounded(aggregate(scores, aggregation), clip, right)


@dataclass
class StepRewards:
    """What step mode hands ``ProcessGRPOTrainer`` for one completion: bounded rewards, one per step (at least one),
    the completion's text and its token ids (where each step ends is found in them)."""

    rewards: list[float]
    text: str
    ids: list[int]


def load_prm_scorer(cfg: PRMRewardConfig):
    """The PRM of ``cfg.path`` (``runners.prm_eval.load_scorer``); ``BadInput`` for the ``baseline:`` verifier, which
    would be a second copy of a policy."""
    from posttrainlab.prm.baseline import is_baseline
    from posttrainlab.runners.prm_eval import load_scorer

    if is_baseline(cfg.path):
        raise BadInput(f"prm_reward.path={cfg.path}: the baseline verifier is a second policy; train a PRM "
                       "(posttrain train prm) and name its folder")  # fmt: skip
    return load_scorer(cfg.path, dtype=cfg.dtype)


def blind_spot_metrics(prompts: Sequence[Any], texts: Sequence[str], scores: Sequence[Sequence[float]]) -> dict:
    """The PRM's verdict where arith-v1's exact labels first say wrong (module docstring): ``prm/wrong_step_score``,
    the mean score of each completion's first wrong step (``data.arith.steps.first_error``), and ``prm/false_accept``,
    the share of them scored above 0.5; ``{}`` when a prompt is not an arith-v1 problem or no completion errs.

    >>> q = "What is 156 * 7?"
    >>> m = blind_spot_metrics([q] * 3, ["156 * 7 = 1092\\nAnswer: 1092", "156 * 8 = 1248\\nAnswer: 1248",
    ...                                  "156 * 7 = 1102\\nAnswer: 1102"], [[0.9, 0.9], [0.7, 0.6], [0.1, 0.1]])
    >>> round(m["prm/wrong_step_score"], 3), m["prm/false_accept"]
    (0.4, 0.5)
    """
    from posttrainlab.data.arith.steps import first_error, split_steps
    from posttrainlab.train.rewards import arith_problems

    problems = arith_problems(prompts)
    if problems is None:
        return {}
    first_wrong = []
    for problem, text, score in zip(problems, texts, scores, strict=True):
        i = first_error(problem, split_steps(text))
        if 0 <= i < len(score):
            first_wrong.append(score[i])
    if not first_wrong:
        return {}
    return {"prm/wrong_step_score": sum(first_wrong) / len(first_wrong),
            "prm/false_accept": sum(x > 0.5 for x in first_wrong) / len(first_wrong)}  # fmt: skip


class PRMReward:
    """TRL reward function (module docstring): ``__call__(prompts, completions, answer, completion_ids, ...)`` ->
    one float per completion. ``scorer`` (with ``score_batch``) replaces the PRM loaded from ``cfg.path``."""

    __name__ = "prm_reward"  # TRL's name for it: rewards/prm_reward/mean in the logs

    def __init__(self, cfg: PRMRewardConfig, scorer=None):
        self.cfg = cfg
        self.scorer = load_prm_scorer(cfg) if scorer is None else scorer
        self.marker = getattr(getattr(self.scorer, "spec", None), "no_answer_step", "") or ""
        self.last: list[StepRewards] | None = None  # step mode: the last batch, for ProcessGRPOTrainer

    def step_scores(self, prompts: Sequence[Any], texts: Sequence[str]) -> tuple[list[list[float]], int]:
        """``(scores, unscorable)``: each completion's step scores (``[]`` without steps) and how many could not be
        read (scored 0 at each step)."""
        from posttrainlab.data.arith.prm_data import question_of
        from posttrainlab.data.arith.prm_labels import with_no_answer_step
        from posttrainlab.data.arith.steps import split_steps
        from posttrainlab.runners.prm_eval import score_items
        from posttrainlab.train.rewards import text_of

        items = [(question_of(text_of(p)), with_no_answer_step(split_steps(t), self.marker))
                 for p, t in zip(prompts, texts, strict=True)]  # fmt: skip
        try:
            return score_items(self.scorer, items, self.cfg.batch_size, progress=False), 0
        except BadInput:  # one unreadable completion: score the others one by one
            scores, bad = [], 0
            for item in items:
                try:
                    scores.append(score_items(self.scorer, [item], 1, progress=False)[0])
                except BadInput:
                    scores.append([0.0] * len(item[1]))
                    bad += 1
            return scores, bad

    def __call__(self, prompts, completions, answer, completion_ids=None, log_metric=None, **_) -> list[float]:
        from posttrainlab.train.rewards import correct_answers, text_of

        cfg = self.cfg
        texts = [text_of(c) for c in completions]
        scores, bad = self.step_scores(prompts, texts)
        gate = correct_answers(texts, answer) if cfg.outcome_gated else [None] * len(texts)
        raw = [sequence_reward(s, cfg.aggregation) for s in scores]  # the proxy, before clip and gate
        if log_metric is not None:
            steps = [x for s in scores for x in s]
            log_metric("prm/score", sum(raw) / len(raw) if raw else math.nan)
            log_metric("prm/step_score", sum(steps) / len(steps) if steps else math.nan)
            log_metric("prm/unscorable", bad / len(texts) if texts else 0.0)
            for key, value in blind_spot_metrics(prompts, texts, scores).items():
                log_metric(key, value)
        if cfg.mode == "step":
            ids = completion_ids if completion_ids is not None else [[] for _ in texts]
            self.last = [StepRewards([bounded(x, cfg.clip, g) for x in s] or [0.0], t, list(i))
                         for s, g, t, i in zip(scores, gate, texts, ids, strict=True)]  # fmt: skip
        return [bounded(r, cfg.clip, g) for r, g in zip(raw, gate, strict=True)]

    def take(self) -> list[StepRewards]:
        """The last batch's step rewards (step mode), once; ``RuntimeError`` when no batch was scored since."""
        if self.last is None:
            raise RuntimeError("prm_reward: no scored batch to take (was the PRM reward among the reward functions?)")
        last, self.last = self.last, None
        return last


__all__ = [
    "PRM_REWARD_AGGREGATIONS",
    "PRM_REWARD_CREDITS",
    "PRM_REWARD_MODES",
    "PRMReward",
    "PRMRewardConfig",
    "StepRewards",
    "blind_spot_metrics",
    "bounded",
    "load_prm_scorer",
    "sequence_reward",
]
