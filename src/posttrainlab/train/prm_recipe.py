"""The typed recipe of ``posttrain train prm``: a PRM's data, head, supervision and optimisation.

A YAML file under ``configs/prm/`` sets these fields and ``key=value`` arguments override them
(``posttrainlab.config.load_config``); an unknown key is a one-line error (exit 2), and so is a value
outside its choices (``PRMRecipe.check``). Each field's help text lives here, once; docs/prm.md says
what each choice does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from posttrainlab.data.formats.registry import FORMATS
from posttrainlab.errors import BadInput, finite
from posttrainlab.prm.spec import HEADS, INPUT_FORMATS
from posttrainlab.train.recipes import LoraSwitch, OptimConfig, at_least, check_run_settings

SUPERVISION = ("step", "span", "soft", "outcome", "outcome-last")
#: the supervisions that train an outcome reward model (ORM): every labelled step (or the last only) gets the
#: solution's final outcome (``prm.examples.outcome_labels``); ``prm_config.json`` then says ``"orm": true``
OUTCOME_SUPERVISION = ("outcome", "outcome-last")
#: the formats that hold whole solutions (an ORM's rows); span and ProcessBench rows are cut at the first error
OUTCOME_FORMATS = ("step", "math-shepherd")
MC_ROWS = ("grouped", "prefix", "messages")
MC_STEP_IDX = ("auto", "count", "last")


@dataclass
class PRMDataConfig:
    """Where the step-labelled rows come from."""

    path: str = "???"  # .jsonl / .json / .parquet, or hf://owner/name[/CONFIG]:SPLIT (required)
    format: str = "step"  # step | span | math-shepherd | mc-value | processbench (docs/formats.md)
    limit: int | None = None  # keep the first N rows of the file
    # mc-value only: grouped = one sequence per trace (id, sample_index), a target at each step's separator;
    # prefix = one sequence per prefix row in the same format (same loss, slower); messages = the card's own
    # judge-prompt rows, one sequence each, the target at the verdict position
    mc_rows: str = "grouped"
    # mc-value only: what step_idx means: count = steps in the prefix (0 = empty prefix); last = 0-based index of
    # the prefix's last step (posttrain label mc); auto = count when some row has step_idx == num_steps, else refused
    # (a file without such a row, e.g. after band filtering, may be either: set count or last)
    mc_step_idx: str = "auto"
    # mc-value only: also train on rows with value_source "inferred" (values --search binary concluded without
    # rolling out: copies of a later probe's V, 0 after its zero, 1 on a correct trace); false = measured V only
    mc_use_inferred: bool = False
    # held-out rows in the same format (a file or hf:// path, first eval_limit rows): their loss is logged as
    # eval_loss every eval_steps steps (null: at every save_steps) and drawn beside the training loss in the report
    eval_path: str | None = None
    eval_limit: int | None = 500
    eval_steps: int | None = None

    def check(self) -> None:
        """``BadInput`` for an empty path or a count below 1 (the choices are ``PRMRecipe.check``'s)."""
        if not self.path:
            raise BadInput("path: empty; name the step-labelled rows")
        for name in ("limit", "eval_limit", "eval_steps"):
            at_least(name, getattr(self, name), 1)


@dataclass
class PRMRecipe:
    """A process reward model on transformers.Trainer: one sequence per solution, a label per separator."""

    model: str = "base"  # a causal LM or encoder folder / Hub id, or a PRM to fine-tune; "base" = the tiny base
    output_dir: str = "runs/prm"
    dataset: PRMDataConfig = field(default_factory=PRMDataConfig)
    # token-cls (2-label token classification) | verdict (P(yes) vs P(no) from the LM head) | result (the LM's own
    # probability of each line's result, trained on the step labels: the baseline verifier, fine-tuned; prm.heads)
    head: str = "token-cls"
    # step (hard step labels) | span (<HAL> token labels too) | soft (MC values V) | outcome (an ORM: every step
    # labelled with the solution's final outcome, 1 = right answer) | outcome-last (an ORM: the last step only)
    supervision: str = "step"
    separator: str = "<extra_0>"  # after every step; added as a special token when the tokenizer lacks it
    chat_template: bool | None = None  # null: use the tokenizer's chat template when it has one
    system_prompt: str | None = None  # chat format only; null: Qwen2.5-Math-PRM's ("Please reason step by step...")
    # verdict head only: reward = P(yes_token) / (P(yes_token) + P(no_token)) after the separator; each must be
    # one token ("+"/"-" are, for byte-level and Qwen tokenizers). Not `yes:`/`no:` keys: YAML reads those as booleans
    yes_token: str = "+"
    no_token: str = "-"
    # qwen: Qwen2.5-Math-PRM's layout (system_prompt, question, steps + separator); policy: the policy's own prompt
    # (chat template over instruction + question) and lines, each read at its newline (no separator token added)
    input_format: str = "qwen"
    instruction: str | None = None  # policy format only: before the question; null = arith-v1's instruction
    # token-cls only: the new head's learning rate (null: optim.learning_rate for every weight), and how many
    # optimizer steps the backbone stays frozen (its learning rate 0) while the head warms up
    head_learning_rate: float | None = None
    freeze_backbone_steps: int = 0
    train_on_last_step_only: bool = False  # label only each sequence's last labelled step (and its span tokens)
    class_weights: list[float] = field(default_factory=lambda: [1.0, 1.0])  # [wrong, correct]
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(learning_rate=1e-4, batch_size=8))
    lora: LoraSwitch = field(default_factory=LoraSwitch)
    max_length: int = 1024  # tokens per sequence; a longer one is cut and the separators past the cut lose their labels
    # batch solutions of similar length together (transformers' group_by_length): on the main job's data random
    # batches were 1.41x the real tokens, grouped 1.02x (bench/bench_prm_length_grouping.py); false: random batches,
    # the recipe before 2026-12-07
    length_grouping: bool = True
    trust_remote_code: bool = False
    # transformers.TrainingArguments fields, as they are (train/recipes.py says how)
    trainer_args: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """``BadInput`` naming the field when a choice is unknown or two choices do not go together."""
        check_run_settings(self)
        choices = {
            "head": (self.head, HEADS),
            "supervision": (self.supervision, SUPERVISION),
            "dataset.format": (self.dataset.format, FORMATS),
            "dataset.mc_rows": (self.dataset.mc_rows, MC_ROWS),
            "dataset.mc_step_idx": (self.dataset.mc_step_idx, MC_STEP_IDX),
            "input_format": (self.input_format, INPUT_FORMATS),
        }
        for name, (value, allowed) in choices.items():
            if value not in allowed:
                raise BadInput(f"{name} {value!r}: choose one of {', '.join(allowed)}")
        if self.supervision in OUTCOME_SUPERVISION and self.dataset.format not in OUTCOME_FORMATS:
            raise BadInput(
                f"supervision {self.supervision} (an ORM) needs whole solutions: dataset.format "
                f"{' or '.join(OUTCOME_FORMATS)}, not {self.dataset.format}"
            )
        if self.supervision == "span" and self.dataset.format != "span":
            raise BadInput(f"supervision span needs dataset.format span (<HAL> annotations), not {self.dataset.format}")
        if len(self.class_weights) != 2 or not all(0 < w < float("inf") for w in self.class_weights):
            raise BadInput(f"class_weights {self.class_weights}: expected two finite positive numbers [wrong, correct]")
        if self.max_length < 2:
            raise BadInput(f"max_length {self.max_length}: must be at least 2")
        if not self.separator:
            raise BadInput("separator: must not be empty")
        finite("head_learning_rate", self.head_learning_rate)
        if self.head_learning_rate is not None and not self.head_learning_rate > 0:
            raise BadInput(f"head_learning_rate={self.head_learning_rate}: must be greater than 0 (or null)")
        if self.freeze_backbone_steps < 0:
            raise BadInput(f"freeze_backbone_steps={self.freeze_backbone_steps}: must be >= 0")
        if self.head != "token-cls" and (self.head_learning_rate is not None or self.freeze_backbone_steps):
            raise BadInput(
                f"head_learning_rate and freeze_backbone_steps need head token-cls (a {self.head} head is the LM)"
            )
        if self.head == "result" and self.supervision == "span":
            raise BadInput("head result reads one probability per step; supervision span labels tokens: use step")
