"""GRPO with a PRM reward, without training: the step-level advantages (DeepSeekMath's sum, PURE's min) against
numbers worked out by hand, where each step ends in tokens, the sequence reward's reductions and bounds, the exact
sample metrics every run logs, the recipe's checks and the reward weights TRL gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from posttrainlab.config import load_config
from posttrainlab.errors import BadInput
from posttrainlab.train.recipes import GRPORecipe

ROOT = Path(__file__).resolve().parents[2]
PRM_RECIPE = ROOT / "configs/arith/grpo-prm.yaml"


def tensors(rewards, ends, mask):
    import torch

    return torch.tensor(rewards, dtype=torch.float), torch.tensor(ends), torch.tensor(mask)


# One group of 2 completions. A: 2 steps, rewards 1.0 and 1.0, ending at tokens 1 and 4 (5 tokens). B: 3 steps,
# rewards 0.0, 0.0, 0.5, ending at tokens 0, 2 and 3 (4 tokens, the 5th is padding).
# The group's 5 step rewards: mean 2.5 / 5 = 0.5; squared deviations 4 x 0.25 + 0 = 1.0, unbiased variance
# 1.0 / 4 = 0.25, std 0.5. Normalised: A [1, 1], B [-1, -1, 0].
GROUP = ([[1.0, 1.0, 0.0], [0.0, 0.0, 0.5]], [[1, 4, -1], [0, 2, 3]], [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
# sum form (DeepSeekMath): a token's advantage = the sum of the normalised rewards of the steps ending at or after it
#   A: tokens 0-1 see steps 1 and 2: 1 + 1 = 2; tokens 2-4 see step 2: 1
#   B: token 0 sees all three: -1 - 1 + 0 = -2; tokens 1-2 see steps 2 and 3: -1; token 3 sees step 3: 0; token 4 pad
SUM = [[2.0, 2.0, 1.0, 1.0, 1.0], [-2.0, -1.0, -1.0, 0.0, 0.0]]
# min form (PURE): the minimum instead of the sum
#   A: min(1, 1) = 1 everywhere; B: token 0 min(-1, -1, 0) = -1, tokens 1-2 min(-1, 0) = -1, token 3: 0
MIN = [[1.0, 1.0, 1.0, 1.0, 1.0], [-1.0, -1.0, -1.0, 0.0, 0.0]]


@pytest.mark.parametrize("credit, expected", [("sum", SUM), ("min", MIN)])
def test_step_advantages_match_the_hand_numbers(credit, expected):
    from posttrainlab.train.grpo_process import process_advantages

    got = process_advantages(*tensors(*GROUP), group=2, credit=credit, eps=0.0)
    assert got.tolist() == expected
    # TRL's 1e-4 in the std's denominator: 0.5 / (0.5 + 1e-4) of each normalised reward
    near = process_advantages(*tensors(*GROUP), group=2, credit=credit)
    assert near.flatten().tolist() == pytest.approx([x * 0.5 / 0.5001 for row in expected for x in row], abs=1e-6)


def test_groups_are_normalised_apart_and_scale_none_only_centres():
    import torch

    from posttrainlab.train.grpo_process import process_advantages

    rewards, ends, mask = tensors(*GROUP)
    shifted = torch.cat([rewards, rewards + 10.0])  # a second group, every reward 10 higher: the same advantages
    got = process_advantages(shifted, torch.cat([ends, ends]), torch.cat([mask, mask]), group=2, eps=0.0)
    assert got.tolist() == SUM + SUM
    # scale none: (r - 0.5) only: A [0.5, 0.5], B [-0.5, -0.5, 0]; the sum form is half the hand numbers above
    centred = process_advantages(rewards, ends, mask, group=2, scale="none")
    assert centred.tolist() == [[x / 2 for x in row] for row in SUM]
    # one group of 2 completions of one step each: 2 rewards, std > 0; a token after its row's last step end gets 0
    one = process_advantages(torch.tensor([[1.0], [0.0]]), torch.tensor([[1], [2]]), torch.ones(2, 4, dtype=torch.long),
                             group=2, scale="none")  # fmt: skip
    assert one.tolist() == [[0.5, 0.5, 0.0, 0.0], [-0.5, -0.5, -0.5, 0.0]]


def test_a_lone_step_gives_zero_advantage_not_nan():
    import torch

    from posttrainlab.train.grpo_process import process_advantages

    got = process_advantages(torch.tensor([[0.7], [0.0]]), torch.tensor([[2], [-1]]), torch.ones(2, 3), group=2)
    assert got.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="credit"):
        process_advantages(*tensors(*GROUP), group=2, credit="mean")
    with pytest.raises(ValueError, match="groups of 3"):
        process_advantages(*tensors(*GROUP), group=3)


def test_each_step_ends_at_the_token_holding_its_last_character(tiny_policy):
    from transformers import AutoTokenizer

    from posttrainlab.train.grpo_process import line_ends, step_end_tokens

    tok = AutoTokenizer.from_pretrained(tiny_policy)
    text = "2 + 3 = 5\n5 * 4 = 20\nAnswer: 20"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert tok.decode(ids, skip_special_tokens=True) == text
    ends = step_end_tokens(tok, ids, text, 3)
    for end, char_end in zip(ends[:2], line_ends(text)[:2], strict=True):
        assert len(tok.decode(ids[: end + 1], skip_special_tokens=True)) >= char_end
        assert len(tok.decode(ids[:end], skip_special_tokens=True)) < char_end
    assert tok.decode(ids[: ends[0] + 1]).endswith("= 5") and tok.decode(ids[: ends[1] + 1]).endswith("= 20")
    assert ends[2] == len(ids) - 1  # the last step ends at the last token, the EOS
    # no answer line: the PRM's "(no answer)" step is the last and ends at the EOS; the last line at its own end
    cut = "2 + 3 = 5\n5 * 4 = 20"
    cut_ids = tok(cut, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    first, second, marker = step_end_tokens(tok, cut_ids, cut, 3)
    assert tok.decode(cut_ids[: second + 1]).endswith("= 20") and second < marker == len(cut_ids) - 1
    assert step_end_tokens(tok, [tok.eos_token_id], "", 1) == [0]  # an empty completion: one step, its last token


QUESTION = "What is 351 - 148 + 56?"  # 351 - 148 = 203, 203 + 56 = 259
RIGHT = "351 - 148 = 203\n203 + 56 = 259\nAnswer: 259"
WRONG = "351 - 148 = 203\n203 + 56 = 260\nAnswer: 260"
SCORES = {RIGHT: [0.9, 0.5, 0.8], WRONG: [0.9, 0.7, 0.6]}


class FakePRM:
    """Scores each solution with ``SCORES`` (by its lines)."""

    spec = None

    def score_batch(self, items, batch_size=8):
        by_steps = {tuple(t.splitlines()): s for t, s in SCORES.items()}
        return [list(by_steps[tuple(steps)]) for _, steps in items]


def prm_reward(**settings):
    from posttrainlab.train.prm_reward import PRMReward, PRMRewardConfig

    return PRMReward(PRMRewardConfig(path="fake", **settings), scorer=FakePRM())


def call(reward, texts, logged=None):
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    prompts = [[{"role": "user", "content": f"Solve it.\n\n{QUESTION}"}]] * len(texts)
    log = None if logged is None else (lambda k, v: logged.setdefault(k, v))
    return reward(prompts=prompts, completions=completions, answer=[259] * len(texts), log_metric=log)


@pytest.mark.parametrize(
    "settings, expected",
    [
        # right [0.9, 0.5, 0.8], wrong [0.9, 0.7, 0.6]
        ({"aggregation": "min"}, [0.5, 0.6]),
        ({"aggregation": "last"}, [0.8, 0.6]),
        ({"aggregation": "product"}, [0.36, 0.378]),  # 0.9 * 0.5 * 0.8; 0.9 * 0.7 * 0.6
        ({"aggregation": "last", "clip": 0.7}, [0.7, 0.6]),  # capped at 0.7
        ({"aggregation": "product", "clip": 0.37}, [0.36, 0.37]),
        ({"aggregation": "min", "outcome_gated": True}, [0.5, 0.0]),  # the wrong answer's PRM reward is 0
        ({"aggregation": "last", "clip": 0.7, "outcome_gated": True}, [0.7, 0.0]),
    ],
)
def test_the_sequence_reward_reduces_and_bounds_the_step_scores(settings, expected):
    assert call(prm_reward(**settings), [RIGHT, WRONG]) == pytest.approx(expected)


def test_the_prm_reward_logs_the_raw_proxy_and_keeps_step_rewards_for_step_mode():
    logged: dict = {}
    reward = prm_reward(mode="step", clip=0.85, outcome_gated=True)
    assert call(reward, [RIGHT, WRONG, ""], logged) == pytest.approx([0.5, 0.0, 0.0])
    # the proxy is the raw score, before clip and gate: min 0.5, 0.6 and 0 for the empty completion
    assert logged["prm/score"] == pytest.approx((0.5 + 0.6 + 0.0) / 3)
    assert logged["prm/step_score"] == pytest.approx((0.9 + 0.5 + 0.8 + 0.9 + 0.7 + 0.6) / 6)
    assert logged["prm/unscorable"] == 0.0
    right, wrong, empty = reward.take()
    assert right.rewards == pytest.approx([0.85, 0.5, 0.8]) and right.text == RIGHT  # capped at 0.85
    assert wrong.rewards == [0.0, 0.0, 0.0]  # gated: the answer is wrong
    assert empty.rewards == [0.0]  # no line: one step scored 0
    with pytest.raises(RuntimeError, match="no scored batch"):
        reward.take()


def test_the_exact_sample_metrics_match_the_hand_counts():
    from posttrainlab.train.rewards import correctness_reward

    texts = [
        RIGHT,  # right, labels [1, 1, 1]
        "351 - 148 = 204\n204 + 56 = 260\nAnswer: 259",  # right answer through wrong steps: [0, 0, 1]
        WRONG,  # [1, 0, 0]
        "",  # no line: one wrong step
    ]
    logged: dict = {}
    assert call(correctness_reward, texts, logged) == [1.0, 1.0, 0.0, 0.0]
    assert logged["exact/accuracy"] == 0.5
    assert logged["exact/any_wrong_step"] == 0.75  # 3 of 4
    assert logged["exact/wrong_step_rate"] == 0.5  # (0 + 2 + 2 + 1) of (3 + 3 + 3 + 1)
    assert logged["exact/trace_error"] == 0.5  # of the 2 right answers, 1 has a wrong step
    no_right: dict = {}
    call(correctness_reward, [WRONG], no_right)
    assert "exact/trace_error" not in no_right and no_right["exact/any_wrong_step"] == 1.0


def test_reward_weights_get_the_prm_only_when_it_is_a_sequence_reward():
    from posttrainlab.train.grpo import config_class, grpo_kwargs

    def weights(*overrides):
        return config_class()(**grpo_kwargs(load_config(GRPORecipe, PRM_RECIPE, list(overrides)))).reward_weights

    assert weights("prm_reward.mode=sequence", "prm_reward.weight=0.5") == [1.0, 0.0, 0.5]
    assert weights() == [1.0, 0.0, 0.0]  # step: TRL's sum only logs it; its advantages are added per token
    assert weights("prm_reward.path=null") == [1.0, 0.0]
    assert GRPORecipe().prm_reward.path is None  # off by default: every other recipe trains what it trained


@pytest.mark.parametrize(
    "bad, message",
    [
        ("prm_reward.mode=token", "prm_reward.mode='token': choose one of sequence, step"),
        ("prm_reward.aggregation=mean", "prm_reward.aggregation='mean': choose one of min, last, product"),
        ("prm_reward.credit=max", "prm_reward.credit='max': choose one of sum, min"),
        ("prm_reward.clip=0", "prm_reward.clip=0.0: must be a finite number greater than 0"),
        ("prm_reward.weight=-1", "prm_reward.weight=-1.0: must be >= 0"),
        ("loss_type=vespo", "prm_reward.mode=step: loss_type=vespo weighs whole sequences"),
        ("rewards.correctness=0", "no reward to learn from"),  # with prm_reward.weight=0 below
    ],
)
def test_bad_prm_reward_settings_are_one_line(bad, message):
    extra = ["prm_reward.weight=0"] if bad.startswith("rewards.") else []
    with pytest.raises(BadInput) as e:
        load_config(GRPORecipe, PRM_RECIPE, [bad, *extra])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_prm_alone_is_a_reward_to_learn_from():
    recipe = load_config(GRPORecipe, PRM_RECIPE, ["rewards.correctness=0", "rewards.format=0"])
    assert recipe.prm_reward.weight == 1.0
    with pytest.raises(BadInput, match="no reward to learn from"):
        load_config(GRPORecipe, PRM_RECIPE, ["rewards.correctness=0", "prm_reward.path=null"])


def test_the_baseline_verifier_is_refused_as_a_second_policy():
    from posttrainlab.train.prm_reward import PRMReward, PRMRewardConfig

    with pytest.raises(BadInput, match="second policy"):
        PRMReward(PRMRewardConfig(path="baseline:runs/sft"))
