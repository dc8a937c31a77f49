"""The settings of Monte-Carlo labelling, each field's help text written once, on the field.

``MCConfig`` holds what decides the labels (a work folder is only resumed with the same ones),
``OutputConfig`` what only shapes the written files, and ``MCRunConfig`` every setting of one
``posttrain label mc`` run: those two, what to label and where, and how to reach the policy and the
judge. ``MCRunConfig`` is flat (it inherits the fields of the other two, so no field is listed twice):
its keys are the YAML keys of ``posttrain label mc --config FILE.yaml`` and of ``key=value``, and each
old flag ``--some-flag VALUE`` is the key ``some_flag`` (configs/label/mc.yaml lists them with their
defaults; the CLI's ``--help`` is generated from these fields).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from posttrainlab.data.step_split import MC_STEP_SPLITS, check_step_split
from posttrainlab.errors import BadInput
from posttrainlab.generation.ray_backend import check_ray

SEARCHES = ("full", "binary")
OUTPUT_FORMATS = ("parquet", "jsonl")


def setting(default: Any, help: str, **meta: Any) -> Any:
    """A dataclass field with its help text (``off``: a second name of a boolean's false flag; ``secret``)."""
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class MCConfig:
    """The settings that decide the labels (a work folder is only resumed with the same ones)."""

    n: int = setting(8, "Continuations per prefix (V = correct / n).")
    samples_per_problem: int = setting(1, "Base traces sampled per problem.")
    temperature: float = setting(1.0, "Sampling temperature (0 is greedy).")
    top_p: float = setting(1.0, "Nucleus sampling threshold.")
    max_new_tokens: int = setting(64, "Longest continuation, in tokens.")
    seed: int = setting(0, "Run seed (each request's seed derives from it and the problem id).")
    search: str = setting("full", "full: roll out every prefix; binary: OmegaPRM bisection.")
    grader: str = setting(
        "arith", "arith (Answer: <int>) or math[:KEY=VALUE,...] (math-verify; settings in docs/arith-v1.md)."
    )
    step_split: str = setting("lines", "lines or paragraphs (blank-line separated).")
    stop: tuple[str, ...] = setting((), "Stop string for continuations (repeatable).")

    def check(self) -> None:
        if self.n < 1:
            raise BadInput(f"--n {self.n}: need at least one continuation per prefix")
        if self.samples_per_problem < 1:
            raise BadInput(f"--samples-per-problem {self.samples_per_problem}: must be at least 1")
        if self.search not in SEARCHES:
            raise BadInput(f"--search {self.search!r}: choose one of {', '.join(SEARCHES)}")
        check_step_split(self.step_split, MC_STEP_SPLITS)
        from posttrainlab.generation.transformers_backend import check_sampling

        check_sampling(self.n, self.temperature, self.top_p, self.max_new_tokens)


def labelling_settings(config: MCConfig) -> dict[str, Any]:
    """The fields of ``MCConfig`` as JSON values (tuples as lists), also of an ``MCRunConfig``: the work identity."""
    return {f.name: _plain(getattr(config, f.name)) for f in fields(MCConfig)}


@dataclass(frozen=True)
class OutputConfig:
    """Settings that only shape the written files (they may change between a run and its resume)."""

    val_problems: int = setting(128, "Problems held out by id for val (card: 128).")
    keep_band: tuple[float, float] | None = setting(
        None, "Also write rows with LO <= V <= HI (e.g. 0.1 0.9) to band-LO-HI/.", metavar="LO HI"
    )
    mid_difficulty: tuple[float, float] | None = setting(
        None, "Also write problems with solve rate in [LO, HI] to mid-LO-HI/.", metavar="LO HI"
    )
    source: str = setting("arith-v1", "The rows' source column.")
    formats: tuple[str, ...] = setting(OUTPUT_FORMATS, "Files written per split: parquet, jsonl (repeatable).")
    text_columns: bool = setting(
        True,
        "Also write question and steps (grouped PRM training reads them); or the card's columns + value_source.",
        off="card-columns-only",
    )

    def check(self) -> None:
        if self.val_problems < 0:
            raise BadInput(f"--val-problems {self.val_problems}: must be >= 0")
        for name, band in (("--keep-band", self.keep_band), ("--mid-difficulty", self.mid_difficulty)):
            if band is not None and not 0 <= band[0] <= band[1] <= 1:
                raise BadInput(f"{name} {band[0]:g} {band[1]:g}: need 0 <= LO <= HI <= 1")
        unknown = [f for f in self.formats if f not in OUTPUT_FORMATS]
        if unknown or not self.formats:
            raise BadInput(f"--formats {' '.join(self.formats) or '(none)'}: choose from {', '.join(OUTPUT_FORMATS)}")


def output_settings(config: OutputConfig) -> dict[str, Any]:
    """The fields of ``OutputConfig`` as JSON values (what ``summary.json`` records as ``output``)."""
    return {f.name: _plain(getattr(config, f.name)) for f in fields(OutputConfig)}


@dataclass(frozen=True)
class Job:
    """What to label, with which policy, and where the outputs go (the first keys of ``MCRunConfig``)."""

    policy: str | None = setting(None, "Policy: a model folder or Hub id (served model name for openai).")
    data: str | None = setting(
        None, "Problems (DIR:SPLIT, a .jsonl/.parquet file, hf://...) or a step-level trace file."
    )
    out: str | None = setting(None, "Output folder (train/val parquet + jsonl, summary.json, work/).")
    split: str | None = setting(None, "Split of a dataset folder (default: rl_train).")
    limit: int | None = setting(None, "Label the first N problems.")
    shard: str | None = setting(None, "I/K: label the problems whose id hashes to I mod K.")


@dataclass(frozen=True)
class Runtime:
    """How the run reaches its policy and judge, and what it keeps and prints (the last keys of ``MCRunConfig``)."""

    backend: str = setting("transformers", "transformers, vllm, vllm-server (docs/vllm.md) or openai.")
    base_url: str | None = setting(None, "OpenAI-compatible endpoint (--backend openai).")
    api_key: str | None = setting(None, "Endpoint key (default $OPENAI_API_KEY).", secret=True)
    batch_size: int = setting(32, "Prefixes per prefill / concurrent requests.")
    problems_per_call: int | None = setting(
        None, "Problems sharing a backend call (default 1 for transformers, else 8)."
    )
    judge_model: str | None = setting(None, "LLM-judge relabel pass: served model name.")
    judge_url: str | None = setting(None, "LLM-judge endpoint (OpenAI-compatible).")
    judge_relabel: str = setting("all", "all, or unparsed (only ungradable answers).")
    keep_continuations: bool = setting(False, "Keep continuation texts in work/.")
    exact_check: bool = setting(False, "Also write agreement.json: MC labels against exact arith-v1 step labels.")
    trust_remote_code: bool = setting(False, "Run the model repo's own code.")
    dtype: str = setting("float32", "float32, bfloat16, float16 or auto.")
    threads: int | None = setting(None, "torch CPU threads.")
    progress: bool = setting(True, "Show a progress bar.")
    ray: int | None = setting(
        None, "Label over R Ray replicas (needs the ray extra; docs/mc-labelling.md, Ray).", metavar="R"
    )
    ray_address: str | None = setting(
        None, "An existing Ray cluster (auto, or HEAD:6379); default: start a local one for the R replicas."
    )


@dataclass(frozen=True)
class MCRunConfig(Runtime, OutputConfig, MCConfig, Job):
    """Every setting of one ``posttrain label mc`` run (module docstring); ``labelling()`` and ``output()`` split it."""

    def labelling(self) -> MCConfig:
        return MCConfig(**{f.name: getattr(self, f.name) for f in fields(MCConfig)})

    def output(self) -> OutputConfig:
        return OutputConfig(**{f.name: getattr(self, f.name) for f in fields(OutputConfig)})

    def check_paths(self) -> None:
        """``BadInput`` unless policy, data and out are set (the shipped YAML leaves them to the command line)."""
        for name in ("policy", "data", "out"):
            if not getattr(self, name):
                raise BadInput(f"--{name}: not set; pass --{name} VALUE, {name}=VALUE or set it in the --config file")

    def check(self) -> None:
        """``BadInput`` for a setting out of range, before any model is loaded."""
        self.labelling().check()
        self.output().check()
        if (self.judge_model is None) != (self.judge_url is None):
            raise BadInput("the judge relabel pass needs both --judge-model and --judge-url")
        if self.threads is not None and self.threads < 1:
            raise BadInput(f"--threads {self.threads}: must be at least 1")
        check_ray(self.ray, self.ray_address)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


__all__ = [
    "OUTPUT_FORMATS",
    "SEARCHES",
    "Job",
    "MCConfig",
    "MCRunConfig",
    "OutputConfig",
    "Runtime",
    "labelling_settings",
    "output_settings",
    "setting",
]
