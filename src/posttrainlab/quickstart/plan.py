"""The quickstart's stage table (``STAGES``): each stage's name, when it runs, what says it is done, what it
depends on, and the function that runs it. ``run.run_quickstart`` walks this table and nothing else, so the plan
the counter shows ("stage 3/16") is the plan that runs; adding a stage is one row.

A row is a function of the run (``Run``: the config, the ``RunLayout`` and the base once known) returning the
stages it adds: none (switched off), one, or several (one per method and seed). Each ``Stage`` says:

- ``marker``: the file its writer leaves last (``run_layout``'s names), or ``is_done`` where the output lives
  outside the run folder (the cached tiny base);
- ``settings``: everything its output depends on, as plain data with run-folder paths written ``OUT/…``, so a
  copied run folder keeps matching; ``after``: the stages whose outputs it reads. ``quickstart.record`` hashes both
  and reuses a finished stage only when the hash matches (docs/design.md "Reliability conventions");
- ``reads_base``: it starts from ``OUT/base``; ``rebuilt``: it runs every time and is not recorded (the report).
  The runner reads these flags, never a stage's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from posttrainlab.data.arith.prm_data import TRAIN_PROMPTS
from posttrainlab.data.arith.prm_labels import ArithPRMOptions
from posttrainlab.quickstart.config import METHODS, PRM_METHODS, QuickstartConfig, method_recipe, seed_name
from posttrainlab.run_layout import BEAM, BON, MANIFEST, METRICS, PRM_CONFIG, TRAIN_SUMMARY, RunLayout


@dataclass
class Run:
    """What the stages share: the config (its paths placed in ``layout``), the layout, and the base."""

    cfg: QuickstartConfig
    layout: RunLayout
    base: Path | None = None  # the model the run starts from, once pretrain or import has run
    state: dict[str, Any] = field(default_factory=dict)  # what run.json records besides stage times


@dataclass
class Stage:
    name: str
    run: Callable[[], None]
    settings: Any  # a dataclass or plain data: what the output depends on
    marker: Path | None = None  # done when this file exists
    is_done: Callable[[], bool] | None = None  # … or when this says so (outputs outside the run folder)
    after: tuple[str, ...] = ()  # stages whose outputs it reads
    folder: Path | None = None  # the folder it writes in the run folder (checked before anything runs)
    models: tuple[Path, ...] = ()  # model folders it produces (their weights' SHA-256 go to run.json)
    reads_base: bool = False  # it reads OUT/base, which is linked to the base model before it runs
    rebuilt: bool = False  # run every time from what is there, never recorded (the report); provenance first

    def done(self) -> bool:
        if self.is_done is not None:
            return self.is_done()
        return self.marker is not None and self.marker.is_file()


def _prepare(r: Run) -> list[Stage]:
    from posttrainlab.data.arith.release import LATEST, prepare

    data = r.layout.data
    return [Stage("prepare", lambda: prepare(data), {"arith": LATEST}, marker=data / MANIFEST, folder=data)]


def _pretrain(r: Run) -> list[Stage]:
    if r.cfg.base_model is not None:
        return []
    from posttrainlab.train.pretrain import base_cache_path, is_cached, pretrain

    base, cfg = base_cache_path(r.cfg.base), r.cfg.base
    return [Stage("pretrain", lambda: pretrain(cfg, base), cfg, is_done=lambda: is_cached(base, cfg))]


def _import(r: Run) -> list[Stage]:
    from posttrainlab.models.gguf_import import is_import_source

    source = r.cfg.base_model
    if source is None or not is_import_source(source):
        return []  # a model folder is used as it is: no stage

    def go() -> None:
        from posttrainlab.models.gguf_import import import_model

        r.base = import_model(source)[0]  # cached by the GGUF's hash: a second run only looks it up

    return [Stage("import", go, {"base_model": source})]


def base_stage(cfg: QuickstartConfig) -> tuple[str, ...]:
    """The stage that makes the base (none when ``base_model`` is a folder used as it is)."""
    from posttrainlab.models.gguf_import import is_import_source

    if cfg.base_model is None:
        return ("pretrain",)
    return ("import",) if is_import_source(cfg.base_model) else ()


# Legacy-record compatibility, in one place. A stage record is the hash of its settings; a setting added after run
# folders were recorded must leave the record unchanged while it does what those runs did, so those folders stay
# current. Each table below says, per section, which fields are always recorded and when the others join.

#: eval and beam sections: these fields always; any other only when it differs from its class default
EVAL_RECORDED = ("split", "limit", "batch_size", "max_new_tokens", "preference_split", "eval_base", "samples",
                 "sample_temperature")  # fmt: skip
BEAM_RECORDED = ("enabled", "beams", "proposals", "max_steps", "temperature", "aggregation")

#: method recipes: every field, but these only when they differ from their class default
RECIPE_ADDED = ("sft_weight", "max_pass_rate", "prm_reward", "probe")

#: arith-prm (process): k, limit, temperature, references, reference_limit always; these only when they differ from
#: the value here (what runs recorded before them did; the default preset now sets both otherwise)
PROCESS_ADDED = {"labelling": ArithPRMOptions(), "train_prompts": list(TRAIN_PROMPTS)}

#: PRM recipes (the prm and orm stages): every field, but these only when they differ from the value here (random
#: batches, what runs recorded before length grouping did; the recipe's default is now length-grouped)
PRM_ADDED = {"length_grouping": False}

#: every recipe's ``optim`` (OptimConfig): these only when they differ from their default (fp32 on a CPU)
OPTIM_ADDED = {"bf16": "gpu"}


def _optim(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its ``optim`` less ``OPTIM_ADDED`` fields at their default."""
    optim = record.get("optim")
    if optim is None:
        return record
    optim = asdict(optim) if not isinstance(optim, dict) else optim
    return record | {"optim": {k: v for k, v in optim.items() if k not in OPTIM_ADDED or v != OPTIM_ADDED[k]}}


def recipe_record(recipe: Any) -> dict[str, Any]:
    """A method's recipe as its stage records it: every field, less ``RECIPE_ADDED`` ones at their default (and
    ``OPTIM_ADDED`` ones)."""
    return _optim(recorded(recipe, tuple(f.name for f in fields(recipe) if f.name not in RECIPE_ADDED)))


def prm_record(recipe: Any) -> dict[str, Any]:
    """A PRM recipe as the prm and orm stages (and the label-sources study's PRMs) record it: every field, less
    ``PRM_ADDED`` ones at their old value (and ``OPTIM_ADDED`` ones)."""
    return _optim({k: v for k, v in asdict(recipe).items() if k not in PRM_ADDED or v != PRM_ADDED[k]})


def recorded(settings: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    """``keys`` of a settings dataclass, and every other field whose value is not its default (``EVAL_RECORDED``)."""
    default = type(settings)()
    out = {k: getattr(settings, k) for k in keys}
    out.update({f.name: getattr(settings, f.name) for f in fields(settings)
                if f.name not in keys and getattr(settings, f.name) != getattr(default, f.name)})  # fmt: skip
    return out


def _eval(r: Run, name: str, after: tuple[str, ...]) -> Stage:
    from posttrainlab.runners.policy import evaluate_policy

    e, target, model = r.cfg.eval, r.layout.eval_dir(name), r.layout.model(name)
    ref = r.layout.model("sft") if name.startswith("dpo") else None
    if name == "base":
        model = r.layout.base
    settings = e.policy_settings(beta=r.cfg.dpo.beta)

    def go() -> None:
        evaluate_policy(str(model), str(r.layout.data), target, settings, ref_model=str(ref) if ref else None)

    recorded_settings = {"eval": recorded(e, EVAL_RECORDED), "beta": r.cfg.dpo.beta if ref else None}
    return Stage(f"eval-{name}", go, recorded_settings, marker=target / METRICS, after=after, folder=target,
                 reads_base=name == "base")  # fmt: skip


def _eval_base(r: Run) -> list[Stage]:
    return [_eval(r, "base", ("prepare", *base_stage(r.cfg)))] if r.cfg.eval.eval_base else []


def _method_stages(r: Run, method: str, k: int, after: tuple[str, ...]) -> list[Stage]:
    """Seed ``k`` of ``method``: its training (reading ``after``) and its greedy evaluation."""
    from posttrainlab.train.continued import train_continued
    from posttrainlab.train.dpo import train_dpo
    from posttrainlab.train.grpo import train_grpo
    from posttrainlab.train.rft import train_rft
    from posttrainlab.train.sft import train_sft

    # each method trains with its recipe's trainer (config.METHODS), sft-continued with the control's
    by_recipe = {"sft": train_sft, "dpo": train_dpo, "grpo": train_grpo, "rft": train_rft}
    trainer = train_continued if method == "sft-continued" else by_recipe[METHODS.get(method, method)]
    name, recipe = seed_name(method, k), method_recipe(r.cfg, method, k)
    folder = r.layout.model(name)
    # where the base lives (a cache, an import) is not a setting: the base's own stage says what it is
    settings = recipe_record(replace(recipe, model="BASE") if method == "sft" and base_stage(r.cfg) else recipe)
    train = Stage(name, lambda t=trainer, rc=recipe: t(rc), settings, marker=folder / TRAIN_SUMMARY,
                  after=after, folder=folder, models=(folder,), reads_base=method == "sft")  # fmt: skip
    return [train, _eval(r, name, ("prepare", name, *(("sft",) if method.startswith("dpo") else ())))]


def _methods(r: Run) -> list[Stage]:
    """SFT then each method, each trained and evaluated once per seed; every method starts from ``OUT/sft``
    (sft-continued also reads the run whose step count it matches, ``continued_steps_from``). Methods that read the
    PRM (``PRM_METHODS``) come after it (``_prm_methods``)."""
    stages = []
    for method in ("sft", *(m for m in r.cfg.methods if m not in PRM_METHODS)):
        for k in range(r.cfg.seeds):
            after = ("prepare", *base_stage(r.cfg)) if method == "sft" else ("prepare", "sft")
            if method == "sft-continued" and r.cfg.continued_steps_from is not None:
                after = tuple(dict.fromkeys((*after, seed_name(r.cfg.continued_steps_from, k))))
            stages += _method_stages(r, method, k, after)
    return stages


def _prm_methods(r: Run) -> list[Stage]:
    """The methods that train with the run's PRM (grpo-prm, grpo-prm-only), once it exists: from ``OUT/sft``,
    reading ``OUT/prm``."""
    return [stage for method in r.cfg.methods if method in PRM_METHODS for k in range(r.cfg.seeds)
            for stage in _method_stages(r, method, k, ("prepare", "sft", "prm"))]  # fmt: skip


def _process(r: Run) -> list[Stage]:
    """arith-prm from the SFT policy → step PRM (from the SFT model) → PRM eval (held out) → best-of-N (on
    the eval split, like the policies) → beam search on the same problems at about best-of-N's token budget (B x M =
    N)."""
    p, L = r.cfg.process, r.layout
    if not p.enabled:
        return []
    split = r.cfg.eval.split
    # the split joins the records only when it is not test, so runs recorded before it was followed stay current
    on_split = {} if split == "test" else {"split": split}
    from posttrainlab.label.arith_prm import build
    from posttrainlab.runners import beam_search, best_of_n, prm_eval
    from posttrainlab.train.prm import train_prm

    policy = L.model("sft")
    labelled = {k: getattr(p, k) for k in ("k", "limit", "temperature", "references", "reference_limit")}
    labelled |= {k: getattr(p, k) for k, was in PROCESS_ADDED.items() if getattr(p, k) != was}
    stages = [
        Stage(
            "arith-prm",
            lambda: build(policy, L.data, L.arith_prm, p.arith_prm(), options=p.labelling),
            labelled,
            marker=L.arith_prm / MANIFEST,
            after=("prepare", "sft"),
            folder=L.arith_prm,
        ),
        Stage(
            "prm",
            lambda: train_prm(p.prm),
            prm_record(p.prm),
            marker=L.prm / PRM_CONFIG,
            after=("sft", "arith-prm"),
            folder=L.prm,
            models=(L.prm,),
        ),
        Stage(
            "eval-prm",
            lambda: prm_eval.run(L.prm, L.prm_heldout, L.prm_eval),
            {},
            marker=L.prm_eval / METRICS,
            after=("arith-prm", "prm"),
            folder=L.prm_eval,
        ),
    ]
    orm = L.orm if p.orm else None  # joins best-of-N's record only when on, so runs recorded before stay current
    if p.orm:
        recipe = p.orm_recipe(L.orm)
        stages.append(Stage("orm", lambda: train_prm(recipe), prm_record(recipe), marker=L.orm / PRM_CONFIG,
                            after=("sft", "arith-prm"), folder=L.orm, models=(L.orm,)))  # fmt: skip
    stages.append(
        Stage(
            "best-of-n",
            lambda: best_of_n.run(policy, L.prm, L.data, L.best_of_n, p.best_of_n(split), orm=orm),
            {"n": p.bon_n, "limit": p.bon_limit, "temperature": p.bon_temperature}
            | on_split
            | ({"orm": True} if p.orm else {}),
            marker=L.best_of_n / BON,
            after=("prepare", "sft", "prm", *(("orm",) if p.orm else ())),
            folder=L.best_of_n,
        )
    )
    if p.beam.enabled:
        stages.append(
            Stage(
                "beam-search",
                lambda: beam_search.run(
                    policy, L.prm, L.data, L.beam_search, p.beam_search(split), best_of_n=L.best_of_n
                ),
                {"beam": recorded(p.beam, BEAM_RECORDED), "limit": p.bon_limit} | on_split,
                marker=L.beam_search / BEAM,
                after=("prepare", "sft", "prm", "best-of-n"),
                folder=L.beam_search,
            )
        )
    return stages


def _report(r: Run) -> list[Stage]:
    from posttrainlab.report.build import build_report

    return [Stage("report", lambda: build_report(r.layout.root), None, rebuilt=True)]


#: the quickstart, in order: each row adds the stages it runs for a run's config (none, one, or one per seed)
STAGES: tuple[Callable[[Run], list[Stage]], ...] = (
    _prepare,
    _pretrain,
    _import,
    _eval_base,
    _methods,
    _process,
    _prm_methods,
    _report,
)


def plan(r: Run) -> list[Stage]:
    """Every stage ``run_quickstart`` runs for ``r``, in order (``STAGES``)."""
    return [stage for row in STAGES for stage in row(r)]


def planned_stages(cfg: QuickstartConfig, out: str | Path = "OUT") -> list[str]:
    """The names of the stages ``run_quickstart`` runs for ``cfg``, in order."""
    from copy import deepcopy

    from posttrainlab.quickstart.config import place

    cfg = deepcopy(cfg)
    layout = RunLayout(Path(out))
    place(cfg, layout)
    return [s.name for s in plan(Run(cfg, layout))]
