"""GRPO with step-level advantages from a PRM (``prm_reward.mode: step``): process supervision as in DeepSeekMath.

TRL's ``GRPOTrainer`` takes one reward per completion and computes one advantage per completion (TRL issue #3090
declined step advantages), so this is a subclass of our own: ``ProcessGRPOTrainer`` overrides
``_generate_and_score_completions``, lets TRL generate, score and normalise as usual, then replaces the batch's
``advantages`` (one per completion) by a ``[completions, tokens]`` tensor, which TRL 1.16's ``_compute_loss`` reads
per token as it is (it unsqueezes only a 1-D advantage). Nothing else of TRL's loss changes.

**Advantages** (``process_advantages``, a pure function with hand-computed tests):

- DeepSeekMath (Shao et al. 2024, arXiv 2402.03300) §4.1.3, "Process Supervision RL with GRPO": the PRM scores each
  step of each of a prompt's G completions; every step reward is normalised over all steps of the group's
  completions, ``r~ = (r - mean(R)) / std(R)``; a token's advantage is the sum of the normalised rewards of the steps
  ending at or after it, ``A_t = sum_{index(j) >= t} r~_j`` (``credit: sum``);
- PURE (Cheng et al. 2025, arXiv 2504.15275): summed future step rewards let the policy collect reward by adding
  steps and training collapsed; min-form credit assignment takes a token's return as the minimum of the future step
  rewards instead, ``A_t = min_{index(j) >= t} r~_j`` (``credit: min``), here on the same normalised rewards
  (normalising is increasing, so this is PURE's min-form return of the raw scores, normalised by the group's steps);
- ``std`` follows ``scale_rewards`` as TRL's own advantage does: the group's (``group``), the whole batch's steps'
  (``batch``), or none (``none``: the mean is subtracted only), with TRL's unbiased std and its ``1e-4``.

A step's end (``step_end_tokens``) is the completion token holding the step's last character; the last step ends
at the completion's last token (its EOS included), so every token is credited; a ``(no answer)`` step (the PRM's
``no_answer_step``) ends there too. The token advantage is then ``A_outcome + prm_reward.weight * A_process``:
``A_outcome`` is TRL's group-normalised advantage of the grader's terms (``rewards.correctness``,
``rewards.format``; 0 when both weights are 0: the PRM alone, as in DeepSeekMath), the same at every token.

Groups are the ``num_generations`` consecutive completions of one prompt, all in one process: step mode refuses a
run on several processes, where a group's completions may be split between them.
"""

from __future__ import annotations

from functools import cache

from posttrainlab.errors import BadInput
from posttrainlab.train.prm_reward import PRM_REWARD_CREDITS

SCALINGS = ("group", "batch", "none")


def _std(x, dim=None):
    """Unbiased std of the non-NaN values (TRL's ``nanstd``); 0 where fewer than 2 values."""
    import torch

    mean = torch.nanmean(x, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True)
    var = torch.nansum((x - mean) ** 2, dim=dim, keepdim=True) / (count - 1).clamp(min=1)
    return torch.where(count > 1, var.sqrt(), torch.zeros_like(var))


def process_advantages(step_rewards, step_ends, mask, group: int, credit: str = "sum", scale: str = "group",
                       eps: float = 1e-4):  # fmt: skip
    """Per-token advantages ``[B, T]`` from step rewards (module docstring).

    ``step_rewards``: ``[B, S]`` floats; ``step_ends``: ``[B, S]`` token indices, ``-1`` where a completion has fewer
    than ``S`` steps; ``mask``: ``[B, T]``, 1 on completion tokens; ``group``: completions per prompt (consecutive
    rows; ``B`` a multiple of it). A token after its completion's last step end gets 0, and so does every masked one.
    """
    import torch

    if credit not in PRM_REWARD_CREDITS:
        raise ValueError(f"credit {credit!r}: choose one of {', '.join(PRM_REWARD_CREDITS)}")
    if scale not in SCALINGS:
        raise ValueError(f"scale {scale!r}: choose one of {', '.join(SCALINGS)}")
    b, s = step_rewards.shape
    if b % group or step_ends.shape != step_rewards.shape or mask.size(0) != b:
        raise ValueError(f"{b} completions, groups of {group}; step_ends {tuple(step_ends.shape)}, mask "
                         f"{tuple(mask.shape)}")  # fmt: skip
    valid = step_ends >= 0
    r = torch.where(valid, step_rewards.float(), torch.full_like(step_rewards, float("nan"), dtype=torch.float))
    grouped = r.reshape(b // group, group * s)
    centred = grouped - torch.nanmean(grouped, dim=1, keepdim=True)
    if scale == "group":
        centred = centred / (_std(grouped, dim=1) + eps)
    elif scale == "batch":
        centred = centred / (_std(r) + eps)
    norm = torch.nan_to_num(centred.reshape(b, s), nan=0.0)
    positions = torch.arange(mask.size(1), device=step_ends.device)
    later = valid[:, None, :] & (step_ends[:, None, :] >= positions[None, :, None])  # [B, T, S]: step j ends at/after t
    if credit == "sum":
        adv = torch.where(later, norm[:, None, :], torch.zeros((), dtype=norm.dtype)).sum(-1)
    else:
        least = torch.where(later, norm[:, None, :], torch.full((), float("inf"), dtype=norm.dtype)).amin(-1)
        adv = torch.where(later.any(-1), least, torch.zeros((), dtype=norm.dtype))
    return adv * mask.to(adv.dtype)


def line_ends(text: str) -> list[int]:
    """The character index just past each non-empty line's last non-blank character (``split_steps``' lines).

    >>> line_ends("2 + 3 = 5\\n\\nAnswer: 5 \\n")
    [9, 20]
    """
    ends, offset = [], 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            ends.append(offset + len(line.rstrip()))
        offset += len(line)
    return ends


def step_end_tokens(tokenizer, ids: list[int], text: str, n_steps: int) -> list[int]:
    """The token index each of ``n_steps`` steps ends at (module docstring): the first token whose decoded prefix
    reaches the line's last character, for each line of ``text`` (the decoded ``ids``); the last step, and any step
    past the lines (a ``(no answer)`` step, or the one 0-scored step of an empty completion), at the last token."""
    last = max(len(ids) - 1, 0)

    def first_reaching(end: int) -> int:
        lo, hi = 0, last
        while lo < hi:  # the decoded prefix only grows with more tokens: bisect
            mid = (lo + hi) // 2
            if len(tokenizer.decode(ids[: mid + 1], skip_special_tokens=True)) >= end:
                hi = mid
            else:
                lo = mid + 1
        return lo

    ends = [first_reaching(e) for e in line_ends(text)][:n_steps]
    ends += [last] * (n_steps - len(ends))
    if ends:
        ends[-1] = last
    return ends


def padded_steps(batch, tokenizer):
    """``(step_rewards [B, S], step_ends [B, S])`` of a batch of ``train.prm_reward.StepRewards`` (``-1``: no step)."""
    import torch

    ends = [step_end_tokens(tokenizer, x.ids, x.text, len(x.rewards)) for x in batch]
    s = max(len(x.rewards) for x in batch)
    rewards = torch.zeros(len(batch), s)
    where = torch.full((len(batch), s), -1, dtype=torch.long)
    for i, (x, e) in enumerate(zip(batch, ends, strict=True)):
        rewards[i, : len(x.rewards)] = torch.tensor(x.rewards, dtype=torch.float)
        where[i, : len(e)] = torch.tensor(e, dtype=torch.long)
    return rewards, where


@cache
def trainer_class():
    """``ProcessGRPOTrainer``, defined on first use (TRL is imported only then; as ``progress._callback_class``)."""
    from trl import GRPOTrainer

    class ProcessGRPOTrainer(GRPOTrainer):
        """``GRPOTrainer`` whose advantages are per token: TRL's outcome advantage plus ``process_weight`` times the
        step-level process advantage of ``process_reward``'s last batch (module docstring)."""

        def __init__(self, *args, process_reward, process_weight: float = 1.0, credit: str = "sum", **kwargs):
            super().__init__(*args, **kwargs)
            if self.accelerator.num_processes > 1:
                raise BadInput("prm_reward.mode=step runs in one process (a group's completions must be together); "
                               "use mode=sequence to train on several")  # fmt: skip
            self.process_reward, self.process_weight, self.credit = process_reward, process_weight, credit

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            group = self.num_generations if mode == "train" else self.num_generations_eval
            batch = self.process_reward.take()
            mask = out["completion_mask"]
            if len(batch) != mask.size(0):
                raise RuntimeError(f"prm_reward: {len(batch)} scored completions for a batch of {mask.size(0)}")
            rewards, ends = padded_steps(batch, self.processing_class)
            process = process_advantages(rewards, ends.clamp(max=mask.size(1) - 1), mask.cpu(), group, self.credit,
                                         self.scale_rewards).to(mask.device)  # fmt: skip
            self._metrics[mode]["process_advantage/abs_mean"].append(
                float((process.abs() * mask).sum() / mask.sum().clamp(min=1))
            )
            out["advantages"] = out["advantages"].unsqueeze(1) + self.process_weight * process
            return out

    return ProcessGRPOTrainer


__all__ = ["line_ends", "padded_steps", "process_advantages", "step_end_tokens", "trainer_class"]
