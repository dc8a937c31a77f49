"""``posttrain label …``: Monte-Carlo value labelling (Polaris MC) and its agreement with exact step labels.

    posttrain label mc --policy runs/quickstart/sft --data data/arith-v1:rl_train --n 8 --out runs/mc --limit 200
    posttrain label mc --policy M --backend openai --base-url http://127.0.0.1:8000/v1 --data F --n 16 --out D
    posttrain label mc --config configs/label/mc.yaml policy=M data=F out=D n=16 search=binary
    posttrain label mc --config configs/label/mc.yaml --print-config         # the resolved settings, as YAML
    posttrain label mc --policy M --data F --n 16 --out D --ray 8 [--ray-address auto]   # on 8 Ray replicas
    posttrain label mc-agreement runs/mc --n 4 --n 8 --n 16

Thin verbs: build the settings (``label.mc.config.MCRunConfig``) from ``--config FILE.yaml``, ``key=value``
and the old flags (``cli.settings``: ``--some-flag VALUE`` is ``some_flag=VALUE``; the field help text lives
on the dataclass and ``--help`` lists it), build the backend (``label.mc.policy.make_sampler``, over
``generation.factory.make_backend``; with ``--ray R`` the replicas build it), call ``label.mc``, print the value
table. torch is imported only inside the verb (``posttrain --help`` stays fast).
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import check_out, lock_out
from posttrainlab.cli.settings import check_choices, flag_overrides, hide_secrets, settings_help
from posttrainlab.data.step_split import MC_STEP_SPLITS
from posttrainlab.generation.factory import BACKENDS
from posttrainlab.label.mc.config import OUTPUT_FORMATS, SEARCHES, MCRunConfig
from posttrainlab.label.mc.judge import MODES
from posttrainlab.models.loading import DTYPES
from posttrainlab.threads import configure_threads

label_app = typer.Typer(
    help="Label reasoning prefixes: Monte-Carlo values (mc) and their agreement with exact labels.",
    no_args_is_help=True,
)


def _print_table(stats: dict, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from posttrainlab.label.mc import value_rows

    table = Table(title=title)
    table.add_column("bucket")
    for name in stats:
        table.add_column(name, justify="right")
    for label, cells in value_rows(stats):
        table.add_row(label, *cells)
    Console().print(table)


#: the settings of `label mc` that take one of a few values, each tuple from the module that defines it
MC_CHOICES = {
    "backend": BACKENDS,
    "search": SEARCHES,
    "step_split": MC_STEP_SPLITS,
    "formats": OUTPUT_FORMATS,
    "judge_relabel": MODES,
    "dtype": DTYPES,
}
MC_HELP = (
    "Label every prefix of base traces with V = share of correct continuations; write Polaris-MC rows.\n\n"
    "Settings come from their defaults, then --config FILE.yaml (configs/label/mc.yaml lists every key with its "
    "default), then the command line in order: key=VALUE, or a flag as always (--some-flag VALUE is "
    "some_flag=VALUE; --flag / --no-flag for true / false). --print-config shows the result. The settings:\n\n"
    + settings_help(MCRunConfig, MC_CHOICES)
)


@label_app.command("mc", help=MC_HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def mc(
    config: Path | None = typer.Option(None, "--config", help="Settings YAML (configs/label/mc.yaml)."),
    print_config: bool = typer.Option(
        False, "--print-config", help="Print the resolved settings as YAML and exit (an api_key shows as ***)."
    ),
    settings: list[str] = typer.Argument(
        None, metavar="KEY=VALUE|--FLAG VALUE", help="Settings in order (listed above).", show_default=False
    ),
) -> None:
    from posttrainlab.config import load_config, to_yaml

    cfg = load_config(MCRunConfig, config, flag_overrides(MCRunConfig, settings or [], command="posttrain label mc"))
    check_choices(cfg, MC_CHOICES)  # with MCRunConfig.check (load_config): --print-config shows no impossible value
    if print_config:
        typer.echo(to_yaml(hide_secrets(cfg)), nl=False)
        return
    _label(cfg)


def _label(cfg: MCRunConfig) -> None:
    """Build the policy (and judge) backends, label, print the value table (and agreement with --exact-check).

    With ``--ray R`` the replicas build the backends (``label.mc.ray_runner``); the work folder is the same.
    """
    from posttrainlab.label.mc.policy import run_options

    cfg.check_paths()
    check_out(cfg.out)  # a file in the path, an unwritable place: refused before any rollout (cli.options)
    run = run_options(cfg)  # a bad --shard is refused before the data is read
    with _lock(cfg, run.shard):
        _label_locked(cfg, run)


def _lock(cfg: MCRunConfig, shard: tuple[int, int]):
    """The writer lock: of ``--out``, or with ``--shard I/K`` (K > 1) of that shard's work file, so that the K
    shards of one folder can run in parallel (docs/mc-labelling.md) but no shard twice at once."""
    from posttrainlab.label.mc.work import WorkDir

    if shard[1] == 1:
        return lock_out(cfg.out, what="label folder")
    return lock_out(WorkDir(Path(cfg.out), shard).file, what="shard's work file")


def _label_locked(cfg: MCRunConfig, run) -> None:
    """``_label`` once its checks passed and the writer lock is held: read the problems, label, print."""
    from posttrainlab.label.mc import load_problems, run_mc
    from posttrainlab.label.mc.policy import make_relabeler, make_sampler

    problems = load_problems(cfg.data, split=cfg.split, limit=cfg.limit, grader=cfg.grader, step_split=cfg.step_split)
    out = Path(cfg.out)
    if cfg.ray is not None:
        from posttrainlab.label.mc.ray_runner import run_mc_ray

        summary = run_mc_ray(problems, cfg)
    else:
        relabeler = make_relabeler(cfg)
        configure_threads(cfg.threads)  # before the policy's backend imports torch
        summary = run_mc(
            problems,
            make_sampler(cfg),
            out,
            config=cfg.labelling(),
            output=cfg.output(),
            relabeler=relabeler,
            run=run,
            progress=cfg.progress,
        )
    s = summary["session"]
    typer.echo(
        f"this run: {s['problems']} problems, {s['rollouts']} rollouts in {s['calls']} calls, {s['seconds']:.1f} s"
        + (f" on {s['replicas']} Ray replica{'s' * (s['replicas'] != 1)}" if "replicas" in s else "")
    )
    if not summary["finished"]:
        typer.echo(
            f"shard {cfg.shard}: done; {summary['missing']} problems of other shards are not labelled yet. "
            "Run the other shards, then once more without --shard to write the outputs."
        )
        return
    title = f"MC values ({summary['problems']} problems, n={cfg.n}, {cfg.search} search)"
    _print_table(summary["value_table"], title)
    typer.echo(f"wrote {', '.join(summary['files'])}, value_table.md and summary.json in {out}")
    if cfg.exact_check:
        _agreement(out, None)


def _agreement(out: Path, ns: list[int] | None) -> None:
    from posttrainlab.label.mc.agreement import agreement_markdown, write_agreement

    result = write_agreement(out, ns)
    typer.echo(agreement_markdown(result))
    typer.echo(f"wrote {out / 'agreement.json'} ({result['traces']} traces with exact labels)")


@label_app.command("mc-agreement")
def mc_agreement(
    run: Path = typer.Argument(..., help="Output folder of `posttrain label mc` (reads its work/ files)."),
    n: list[int] = typer.Option(None, "--n", help="N to score (repeatable; default 4, 8, 16 up to the run's n)."),
) -> None:
    """MC labels against exact arith-v1 step labels (accuracy, Cohen's kappa, mean V) for each N; agreement.json."""
    _agreement(run, n or None)
