"""The settings of ``posttrain study label-sources``: ``StudyConfig``, its presets, and the sources it compares.

A preset is a YAML file in ``configs/study/`` (``label-sources``, the measured one; ``smoke``, the test's) over these
defaults, then ``key=value`` overrides (``config.load_config``: an unknown key, a wrong type or a value no run can use
is one line, exit 2, before anything runs). Which paths a stage reads and writes is the study's own business
(``study.layout``): the PRM recipe's ``model``, ``output_dir``, ``dataset`` and ``supervision`` are set per source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from posttrainlab.config import SHIPPED
from posttrainlab.errors import BadInput
from posttrainlab.runners.settings import BestOfNSettings, PRMEvalSettings
from posttrainlab.train.prm_recipe import PRMDataConfig, PRMRecipe
from posttrainlab.train.recipes import OptimConfig

#: the presets: one YAML file each, read over ``StudyConfig``'s defaults
PRESET_DIR = SHIPPED / "study"
#: the value of a field the study sets itself, per source, inside --out
PLACED = "(set by the study for each source)"


@dataclass
class PolicySettings:
    """Where the policy comes from when ``--from RUN`` is not given: the quickstart's prepare, pretrain (the cached
    base) and SFT stages of quickstart preset ``preset`` with ``overrides`` (key=value), run into the study folder."""

    preset: str = "default"
    overrides: list[str] = field(default_factory=list)


@dataclass
class SolutionSettings:
    """The one set of policy solutions every source labels: ``k`` samples per problem of the first ``problems``
    problems of ``train_split`` (PRM training) and of ``heldout_split`` (PRM evaluation), both outside every
    evaluation pool, labelled exactly on every step (``label.arith_prm.build``, labels every-step)."""

    train_split: str = "rl_train"
    heldout_split: str = "rl_extra"
    problems: int = 100
    k: int = 4
    temperature: float = 1.0  # the policy's own errors are the point
    max_new_tokens: int = 64
    seed: int = 0
    batch_size: int = 32

    def check(self) -> None:
        from posttrainlab.data.arith.prm_labels import EVAL_POOLS

        for name in ("problems", "k", "max_new_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise BadInput(f"{name}={getattr(self, name)}: must be at least 1")
        if not self.temperature > 0:
            raise BadInput(f"temperature={self.temperature}: must be > 0 (the policy's errors are what is labelled)")
        from posttrainlab.data.arith.splits import check_split_names

        for name in ("train_split", "heldout_split"):
            check_split_names(f"{name}={getattr(self, name)}", [getattr(self, name)])
            if getattr(self, name) in EVAL_POOLS:
                raise BadInput(f"{name}={getattr(self, name)}: an evaluation pool ({', '.join(EVAL_POOLS)}); the "
                               "study labels problems outside every one (rl_train, rl_extra)")  # fmt: skip
        if self.train_split == self.heldout_split:
            raise BadInput(f"train_split and heldout_split are both {self.train_split}: PRMs are evaluated on "
                           "problems they were not trained on")  # fmt: skip


@dataclass
class MCSettings:
    """Monte-Carlo labels (``label mc``): one run per N in ``ns`` on the training solutions, V > 0 as hard labels;
    ``soft``: the N whose V also train a soft-target PRM (the Polaris MC loss). N = 1 gives V in {0, 1}, where the
    soft loss equals the hard one, so soft N = 1 would train the same PRM twice."""

    ns: list[int] = field(default_factory=lambda: [1, 4, 16])
    soft: list[int] = field(default_factory=lambda: [4, 16])
    temperature: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    batch_size: int = 32

    def check(self) -> None:
        if not self.ns or any(n < 1 for n in self.ns) or len(set(self.ns)) != len(self.ns):
            raise BadInput(f"ns={self.ns}: need distinct N >= 1 (continuations per prefix)")
        missing = [n for n in self.soft if n not in self.ns]
        if missing:
            raise BadInput(f"soft={self.soft}: {missing[0]} is not one of ns {self.ns} (soft targets reuse its run)")
        if len(set(self.soft)) != len(self.soft):
            raise BadInput(f"soft={self.soft}: each N once")
        if not self.temperature > 0 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise BadInput("temperature must be > 0, max_new_tokens and batch_size at least 1")


@dataclass
class JudgeSettings:
    """Judge labels through the SHARP pipeline (``annotate`` -> ``data sharp-build``): the program judge of ``posttrain
    serve --judge arith`` at each ``noise`` p, in process; and, when ``model`` is set (a folder, or a name ``posttrain
    model import`` knows, e.g. smollm2-135m-instruct), a real model as judge, its invalid rows recorded."""

    noise: list[float] = field(default_factory=lambda: [0.0, 0.1, 0.3])
    seed: int = 0
    model: str | None = None
    max_tokens: int = 256  # the annotation copies the solution: its length and more
    max_attempts: int = 3
    concurrency: int = 8  # requests in flight to the program judge (a model judge takes one at a time)

    def check(self) -> None:
        if any(not 0 <= p <= 1 for p in self.noise) or len(set(self.noise)) != len(self.noise):
            raise BadInput(f"noise={self.noise}: need distinct values in [0, 1]")
        for name in ("max_tokens", "max_attempts", "concurrency"):
            if getattr(self, name) < 1:
                raise BadInput(f"{name}={getattr(self, name)}: must be at least 1")


def _prm() -> PRMRecipe:
    return PRMRecipe(
        model=PLACED,
        output_dir=PLACED,
        dataset=PRMDataConfig(path=PLACED),
        input_format="policy",
        optim=OptimConfig(epochs=3, learning_rate=1e-3, batch_size=16, logging_steps=10, save_steps=50),
    )


def _bon() -> BestOfNSettings:
    return BestOfNSettings(n=16, limit=60, temperature=1.0, split="test")


@dataclass
class StudyConfig:
    """Every setting of the study: the defaults here, then a preset's YAML, then ``key=value`` overrides."""

    preset: str = "label-sources"
    policy: PolicySettings = field(default_factory=PolicySettings)
    solutions: SolutionSettings = field(default_factory=SolutionSettings)
    mc: MCSettings = field(default_factory=MCSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)
    # one PRM per source, each from the policy with this recipe (same backbone, budget and seed): every source
    # trains the same number of optimizer steps, optim.max_steps or epochs over the exact source's solutions
    prm: PRMRecipe = field(default_factory=_prm)
    baseline: bool = True  # also score with the policy's own verifier (no labels: prm.baseline)
    eval: PRMEvalSettings = field(default_factory=PRMEvalSettings)  # PRMs on the held-out solutions, exact labels
    bon: BestOfNSettings = field(default_factory=_bon)  # best-of-N on the first bon.limit problems of bon.split

    def check(self) -> None:
        if self.prm.head != "token-cls":
            raise BadInput(f"prm.head={self.prm.head}: the study trains token-cls PRMs (hard and soft on one head)")
        if self.eval.format not in (None, "math-shepherd"):
            raise BadInput(f"eval.format={self.eval.format}: the held-out solutions are math-shepherd rows")
        if self.bon.split in (self.solutions.train_split, self.solutions.heldout_split):
            raise BadInput(f"bon.split={self.bon.split}: best-of-N runs on problems no PRM saw")


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def study_config(config: str, overrides: list[str] | None = None) -> StudyConfig:
    """A preset (a name in ``configs/study/`` or a YAML file) with ``key=value`` overrides; ``preset`` is recorded as
    the file's name. The quickstart preset it names (``policy.preset``) is checked here too."""
    from posttrainlab.config import load_config, preset_file

    path = preset_file(config, PRESET_DIR, "study config")
    cfg = load_config(StudyConfig, path, overrides, start=StudyConfig(preset=path.stem))
    policy_config(cfg)  # the quickstart preset and its overrides, refused now when bad
    return cfg


def policy_config(cfg: StudyConfig):
    """The quickstart config whose prepare, pretrain and SFT stages make the policy (no other method, no process
    stages: the study is its own)."""
    from posttrainlab.quickstart.config import quickstart_config

    try:
        q = quickstart_config(cfg.policy.preset, [*cfg.policy.overrides, "methods=[]", "process.enabled=false"])
    except BadInput as e:
        raise BadInput(f"policy: {e}") from None
    return q


__all__ = [
    "PLACED",
    "PRESET_DIR",
    "JudgeSettings",
    "MCSettings",
    "PolicySettings",
    "SolutionSettings",
    "StudyConfig",
    "policy_config",
    "preset_names",
    "study_config",
]
