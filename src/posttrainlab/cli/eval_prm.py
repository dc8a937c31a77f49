"""``posttrain eval prm`` and ``posttrain eval best-of-n``: process reward models, evaluated.

    posttrain eval prm --model runs/prm --data data/arith-prm --out runs/prm/eval          # arith-prm heldout
    posttrain eval prm --model runs/prm --data SHARP-Math.jsonl --out E --threshold 0.5
    posttrain eval best-of-n --policy runs/qs/sft --prm runs/prm --data runs/qs/data/arith-v1 --out runs/bon
    posttrain eval best-of-n --policy runs/qs/sft --prm runs/prm --orm runs/orm --data ... --out runs/bon   # + ORM

Thin verbs over ``posttrainlab.runners.prm_eval.run`` and ``posttrainlab.runners.best_of_n.run`` (metrics in
docs/prm-eval.md): each builds its settings (``runners.settings``) from its flags, whose defaults are the settings
class's; torch is imported inside the verbs. ``register(eval_app)`` adds them to ``eval``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import (
    BACKEND,
    DATA,
    OUT,
    OVERWRITE,
    POLICY,
    PRM,
    PROBLEMS,
    THREADS,
    check_data,
    check_model,
    check_prm,
    check_results,
    choice,
    lock_out,
    out_folder,
)
from posttrainlab.eval.aggregation import AGGREGATIONS
from posttrainlab.generation.factory import POLICY_BACKENDS
from posttrainlab.generation.ray_backend import check_ray
from posttrainlab.models.loading import DTYPES
from posttrainlab.report.format import pct
from posttrainlab.run_layout import BON, BON_PNG, METRICS, PVO_PNG, RELIABILITY_PNG, SCORES
from posttrainlab.runners.prm_eval import EVAL_FORMATS
from posttrainlab.runners.settings import BestOfNSettings, PRMEvalSettings

THREADS_HELP = "torch CPU threads (default: the thread policy, posttrainlab.threads)."
B = BestOfNSettings  # each flag's default is the settings class's (runners.settings)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def prm_table(m: dict):
    """The headline PRM metrics, one row each."""
    from rich.table import Table

    table = Table(
        title=f"{m['model']} on {m['source']} ({m['format']}, {m['solutions']} solutions, {m['steps']} steps)"
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    s, fe, sw = m["step"], m["first_error"], m["first_error_sweep"]
    rows = [
        (f"wrong-step precision @ {m['threshold']}", pct(s["precision"])),
        (f"wrong-step recall @ {m['threshold']}", pct(s["recall"])),
        (f"wrong-step F1 @ {m['threshold']}", pct(s["f1"])),
        ("step AUROC", _num(s["auroc"])),
        (f"first-error F1 @ {m['threshold']} (ProcessBench)", pct(fe["f1"])),
        ("  accuracy on erroneous / correct", f"{pct(fe['accuracy_erroneous'])} / {pct(fe['accuracy_correct'])}"),
        (
            "first-error F1, best threshold (tuned on this data)",
            f"{pct(sw['best_f1'])} @ {sw['best_threshold']}",
        ),
        (f"ECE ({m['calibration']['n_bins']} bins)", _num(m["calibration"]["ece"])),
        ("mean score correct / wrong steps", f"{_num(s['mean_score_correct'])} / {_num(s['mean_score_wrong'])}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


E = PRMEvalSettings  # each flag's default is the settings class's (runners.settings)


def prm(
    model: str = typer.Option(..., "--model", help="PRM: a local folder (posttrain train prm) or a Hub id."),
    data: str = typer.Option(
        ..., *DATA, help="Step-level file (.jsonl/.json/.parquet), hf:// path, or arith-prm DIR[:SPLIT]."
    ),
    out: Path = typer.Option(
        ..., *OUT, parser=out_folder, help="Output folder for metrics.json, scores.jsonl, reliability.png."
    ),
    threshold: float = typer.Option(
        E.threshold, "--threshold", help="A step is predicted wrong when its score is below."
    ),
    batch_size: int = typer.Option(E.batch_size, "--batch-size", help="Solutions per PRM forward pass."),
    fmt: choice(EVAL_FORMATS) | None = typer.Option(
        E.format, "--format", help="Format of the rows (default: told from the first row)."
    ),
    limit: int | None = typer.Option(E.limit, "--limit", help="Evaluate the first N rows."),
    dtype: choice(DTYPES) = typer.Option(E.dtype, "--dtype", help="Weights' dtype (auto: the checkpoint's own)."),
    device: str | None = typer.Option(E.device, "--device", help="cpu, cuda, ... (default: CUDA when available)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    threads: int | None = typer.Option(None, *THREADS, help=THREADS_HELP),
    overwrite: bool = OVERWRITE,
) -> None:
    """Score step-labelled solutions with a PRM: wrong-step P/R/F1, AUROC, first-error F1, ECE, per position."""
    from rich.console import Console

    from posttrainlab.runners.prm_eval import run
    from posttrainlab.threads import check_threads, configure_threads

    settings = PRMEvalSettings(threshold, batch_size, fmt, limit, dtype=dtype, device=device)
    check_results(out, METRICS, overwrite)  # every check before torch is imported (cli.options)
    check_threads(threads)
    check_prm(model, "--model")
    check_data(data)
    configure_threads(threads)

    with lock_out(out):
        m = run(model, data, out, settings, progress=progress)
    console = Console()
    console.print(prm_table(m))
    pos = ", ".join(
        f"{r['position']}: {pct(r['gold_wrong_rate'])}/{pct(r['predicted_wrong_rate'])}" for r in m["per_position"][:6]
    )
    console.print(f"wrong rate by step (gold/predicted): {pos}", highlight=False)
    console.print(f"wrote {out / METRICS}, {out / SCORES}, {out / RELIABILITY_PNG}", highlight=False)


def bon_table(b: dict):
    """Accuracy of every selector (and the oracle) at every n."""
    from rich.table import Table

    orm = b.get("orm")  # an ORM beside the PRM, or given as the PRM
    scorers = f"ORM {orm}" if orm == b["prm"] else f"PRM {b['prm']}" + (f" + ORM {orm}" if orm else "")
    table = Table(title=f"best-of-n: {b['policy']} + {scorers} on {b['problems']} {b['split']} problems")
    table.add_column("selector")
    for n in b["ns"]:
        table.add_column(f"n={n}", justify="right")
    for name, by_n in b["selectors"].items():
        label = f"prm_vote ({b['vote_aggregation']})" if name == "prm_vote" else name
        table.add_row(label, *[pct(by_n[str(n)]["value"]) for n in b["ns"]])
    table.add_row("oracle (pass@n)", *[pct(b["oracle"][str(n)]["value"]) for n in b["ns"]])
    table.caption = "95% Wilson intervals in bon.json"
    return table


def paired_lines(b: dict) -> list[str]:
    """One line per paired comparison of ``bon.json`` (``paired``): B − A and McNemar's p at each n."""
    from posttrainlab.eval.compare import p_value

    lines = []
    for name, pair in b.get("paired", {}).items():
        cells = [f"n={n} {100 * s['diff']:+.1f} (p {p_value(s['mcnemar_p'])})" for n, s in pair["by_n"].items()]
        lines.append(f"{name.replace(' vs ', ' − ')}: " + ", ".join(cells))
    return lines


def best_of_n(
    policy: str = POLICY,
    prm_model: str = PRM,
    data: str = PROBLEMS,
    out: Path = typer.Option(
        ..., *OUT, parser=out_folder, help="Output folder: bon.json, samples.jsonl (cache), best_of_n.png."
    ),
    orm: str | None = typer.Option(
        None,
        "--orm",
        help="An outcome reward model (posttrain train orm) scoring the same samples: selectors orm, "
        "orm_vote, paired with the PRM at each n; process_vs_outcome.png.",
    ),
    n: int = typer.Option(B.n, "--n", help="Samples per problem (drawn once)."),
    ns: str | None = typer.Option(
        None, "--ns", help="n values to report, e.g. 1,2,4,8,16 (default: powers of 2 up to --n, and --n)."
    ),
    temperature: float = typer.Option(B.temperature, "--temperature", help="Sampling temperature (> 0)."),
    top_p: float = typer.Option(B.top_p, "--top-p", help="Nucleus sampling threshold."),
    max_new_tokens: int = typer.Option(B.max_new_tokens, "--max-new-tokens", help="Longest solution, in tokens."),
    seed: int = typer.Option(B.seed, "--seed", help="Sampling seed."),
    limit: int | None = typer.Option(B.limit, "--limit", help="Use the first N problems (default: all)."),
    batch_size: int = typer.Option(B.batch_size, "--batch-size", help="Prompts per generate call."),
    prm_batch_size: int = typer.Option(B.prm_batch_size, "--prm-batch-size", help="Solutions per PRM forward pass."),
    vote_aggregation: choice(AGGREGATIONS) = typer.Option(
        B.vote_aggregation, "--vote-aggregation", help="Step-score aggregation weighting the PRM vote."
    ),
    dtype: choice(DTYPES) = typer.Option(B.dtype, "--dtype", help="Weights' dtype (auto: the checkpoint's own)."),
    device: str | None = typer.Option(B.device, "--device", help="PRM device (default: CUDA when available)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
    threads: int | None = typer.Option(None, *THREADS, help=THREADS_HELP),
    backend: choice(POLICY_BACKENDS) = BACKEND,
    ray: int | None = typer.Option(
        None, "--ray", metavar="R", help="Sample on R Ray replicas (the ray extra; transformers or vllm backend)."
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="An existing Ray cluster (auto, or HEAD:6379); default: a local one for --ray R."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace bon.json an earlier run left in --out (its sample cache is reused anyway)."
    ),
) -> None:
    """Sample n solutions per problem once; pick one by PRM (min/last/product/mean), majority or PRM vote.

    With ``--ray R`` the samples are drawn on R Ray replicas (``generation.ray_backend``): the same samples for any R.
    """
    from rich.console import Console

    from posttrainlab.eval.best_of_n import split_ns
    from posttrainlab.runners.best_of_n import run
    from posttrainlab.threads import check_threads, configure_threads

    # only bon.json is a result: samples.jsonl is the sample cache a rerun with the same settings reuses
    check_results(out, BON, overwrite)
    check_threads(threads)
    check_model(policy, "--policy")
    check_prm(prm_model)  # a policy folder as --prm: refused now, not after the sampling
    if orm is not None:
        check_prm(orm, "--orm")  # and the runner refuses a folder that is no ORM, before it samples too
    check_data(data)
    check_ray(ray, ray_address)
    configure_threads(threads)
    settings = BestOfNSettings(
        n=n, ns=None if ns is None else split_ns(ns), temperature=temperature, top_p=top_p,
        max_new_tokens=max_new_tokens, seed=seed, limit=limit, batch_size=batch_size, prm_batch_size=prm_batch_size,
        vote_aggregation=vote_aggregation, dtype=dtype, device=device,
    )  # fmt: skip
    with lock_out(out):
        if ray is not None:
            from posttrainlab.generation.ray_backend import RayBackend

            sampler = RayBackend(policy, replicas=ray, backend=backend, address=ray_address, threads=threads,
                                 batch_size=batch_size, dtype=dtype, progress=progress)  # fmt: skip
            b = run(policy, prm_model, data, out, settings, progress=progress, backend=sampler, orm=orm)
        else:
            from posttrainlab.generation.factory import policy_backend

            with policy_backend(policy, backend, batch_size=batch_size, dtype=dtype, threads=threads,
                                progress=progress) as sampler:  # fmt: skip
                b = run(policy, prm_model, data, out, settings, progress=progress, backend=sampler, orm=orm)
    console = Console()
    console.print(bon_table(b))
    s = b["sampling"]
    how = "reused from samples.jsonl" if s["reused_cache"] else f"sampled in {s['seconds']:.1f} s"
    orm_s = b["scoring"].get("orm_seconds")
    console.print(
        f"{s['samples']} samples {how}; PRM scoring {b['scoring']['seconds']:.1f} s; "
        + ("" if orm_s is None else f"ORM scoring {orm_s:.1f} s; ")
        + f"single-sample accuracy {pct(b['sample_accuracy']['value'])}",
        highlight=False,
    )
    for line in paired_lines(b) if "orm" in b else []:  # PRM vs ORM (and each vs majority) at each n
        console.print(line, highlight=False)
    more = f", {out / PVO_PNG}" if "orm" in b else ""
    console.print(f"wrote {out / BON}, {out / SCORES}, {out / BON_PNG}{more}", highlight=False)


def register(eval_app: typer.Typer) -> None:
    """Add ``prm`` and ``best-of-n`` to the ``posttrain eval`` group."""
    eval_app.command("prm")(prm)
    eval_app.command("best-of-n")(best_of_n)
