"""``posttrain eval beam-search``: PRM-guided step-level beam search, beside best-of-N at an equal token budget.

    posttrain eval beam-search --policy runs/qs/sft --prm runs/qs/prm --data runs/qs/data/arith-v1 \\
        --out runs/qs/beam --best-of-n runs/qs/best-of-n
    posttrain eval beam-search --policy P --prm PRM --data DIR:test --out OUT --beams 4 --proposals 4 --limit 20

A thin verb over ``posttrainlab.runners.beam_search.run`` (docs/prm-eval.md "Beam search"): it builds a
``runners.settings.BeamSettings`` from its flags, whose defaults are the class's; its flags are
``eval best-of-n``'s where they mean the same, and so is the overwrite rule: an ``--out`` holding an earlier
``beam.json`` or ``outcomes.jsonl`` is refused unless ``--overwrite`` (``cli.options.check_results``). Every input
is checked before torch is imported (``--prm`` must be a PRM, ``--best-of-n`` a best-of-N output); torch is imported
inside the verb. ``register(eval_app)``
adds it to ``posttrain eval``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import (
    BACKEND,
    OUT,
    OVERWRITE,
    POLICY,
    PRM,
    PROBLEMS,
    THREADS,
    check_model,
    check_prm,
    check_results,
    check_split,
    choice,
    lock_out,
    out_folder,
)
from posttrainlab.generation.factory import POLICY_BACKENDS
from posttrainlab.report.format import pct
from posttrainlab.run_layout import BEAM, OUTCOMES
from posttrainlab.runners.settings import BeamSettings

S = BeamSettings  # each flag's default is the settings class's (runners.settings)


def beam_table(b: dict):
    """Accuracy of the PRM's choice (overall, per category) and of the votes over the finished beams."""
    from rich.table import Table

    s = b["settings"]
    table = Table(
        title=f"beam search ({s['beams']} beams x {s['proposals']} proposals, {s['aggregation']}): "
        f"{b['policy']} + PRM {b['prm']} on {b['problems']} {b['split']} problems"
    )
    for column in ("answer", "n", "correct", "accuracy", "95% CI"):
        table.add_column(column, justify="left" if column == "answer" else "right")

    def add(name: str, acc: dict) -> None:
        lo, hi = acc["ci95"]
        table.add_row(name, str(acc["n"]), str(acc["correct"]), pct(acc["value"]), f"{pct(lo)} - {pct(hi)}")

    add("best-scored beam", b["accuracy"])
    for category, acc in b["per_category"].items():
        add(f"  {category}", acc)
    add("majority of finished beams", b["selectors"]["majority"])
    add("PRM-weighted vote", b["selectors"]["prm_vote"])
    return table


def beam_search(
    policy: str = POLICY,
    prm_model: str = PRM,
    data: str = PROBLEMS,
    out: Path = typer.Option(..., *OUT, parser=out_folder, help="Output folder: beam.json, outcomes.jsonl."),
    beams: int = typer.Option(S.beams, "--beams", help="Beams kept per problem (finished ones count)."),
    proposals: int = typer.Option(S.proposals, "--proposals", help="One-step continuations each active beam proposes."),
    max_steps: int = typer.Option(
        S.max_steps, "--max-steps", help="Rounds (steps) at most; a beam is finished after the last."
    ),
    temperature: float = typer.Option(S.temperature, "--temperature", help="Sampling temperature (> 0)."),
    top_p: float = typer.Option(S.top_p, "--top-p", help="Nucleus sampling threshold."),
    max_new_tokens: int = typer.Option(
        S.max_new_tokens,
        "--max-new-tokens",
        help="A beam that has generated this many tokens is finished (best-of-n's limit).",
    ),
    max_step_tokens: int = typer.Option(S.max_step_tokens, "--max-step-tokens", help="Longest step, in tokens."),
    aggregation: str = typer.Option(
        S.aggregation, "--aggregation", help="A beam's score from its step scores: last or min."
    ),
    distinct: bool = typer.Option(
        S.distinct, "--distinct/--keep-duplicates", help="Drop a candidate that repeats another of its round."
    ),
    best_of_n: Path | None = typer.Option(
        None, "--best-of-n", help="A best-of-n output folder: count its tokens per problem for the comparison."
    ),
    seed: int = typer.Option(S.seed, "--seed", help="Sampling seed."),
    limit: int | None = typer.Option(S.limit, "--limit", help="Use the first N problems (default: all)."),
    batch_size: int = typer.Option(S.batch_size, "--batch-size", help="Beams per prefill."),
    prm_batch_size: int = typer.Option(S.prm_batch_size, "--prm-batch-size", help="Solutions per PRM forward pass."),
    dtype: str = typer.Option(S.dtype, "--dtype", help="float32, bfloat16, float16 or auto."),
    device: str | None = typer.Option(S.device, "--device", help="PRM device (default: CUDA when available)."),
    threads: int | None = typer.Option(None, *THREADS, help="torch CPU threads (default: the thread policy)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    backend: choice(POLICY_BACKENDS) = BACKEND,
    overwrite: bool = OVERWRITE,
) -> None:
    """Step-level beam search guided by the PRM; accuracy, votes, and tokens per problem beside best-of-n's."""
    from rich.console import Console

    from posttrainlab.runners.beam_search import OUTPUTS
    from posttrainlab.threads import check_threads, configure_threads

    settings = BeamSettings(
        beams, proposals, max_steps, temperature, top_p, max_new_tokens, max_step_tokens, aggregation, distinct,
        seed=seed, limit=limit, batch_size=batch_size, prm_batch_size=prm_batch_size, dtype=dtype, device=device,
    )  # fmt: skip
    # every check before torch is imported (cli.options), in run's order: settings, --out, models, data
    settings.check()
    check_results(out, OUTPUTS, overwrite)
    check_threads(threads)
    check_model(policy, "--policy")
    check_prm(prm_model)
    check_split(data, None, default="test")
    if best_of_n is not None:
        _check_best_of_n(best_of_n, data, limit)
    configure_threads(threads)
    from posttrainlab.generation.factory import policy_backend
    from posttrainlab.runners.beam_search import run

    with lock_out(out), policy_backend(policy, backend, batch_size=batch_size, dtype=dtype, threads=threads,
                                       progress=False) as sampler:  # fmt: skip
        b = run(policy, prm_model, data, out, settings, best_of_n=best_of_n, progress=progress, backend=sampler)
    console = Console()
    console.print(beam_table(b))
    tokens = f"{b['tokens_per_problem']:.1f} generated tokens per problem"
    if "best_of_n_tokens_per_problem" in b:
        tokens += f" (best-of-{b['best_of_n']['n']}: {b['best_of_n_tokens_per_problem']:.1f})"
    sec = b["seconds"]
    console.print(
        f"{tokens}; {b['rounds_per_problem']:.1f} rounds per problem; search {sec['search']:.1f} s "
        f"(sampling {sec['sampling']:.1f} s, PRM {sec['scoring']:.1f} s)",
        highlight=False,
    )
    console.print(f"wrote {out / BEAM} and {out / OUTCOMES}", highlight=False)


def _check_best_of_n(folder: Path, data: str, limit: int | None) -> None:
    """``--best-of-n`` must be a best-of-N output holding some of the problems searched (``best_of_n_samples``)."""
    from posttrainlab.errors import BadInput
    from posttrainlab.runners.beam_search import best_of_n_samples
    from posttrainlab.runners.best_of_n import read_problems

    _, records = read_problems(data, None, limit)
    try:
        best_of_n_samples(folder, [str(r["id"]) for r in records])
    except BadInput as e:
        raise BadInput(f"--best-of-n {e}") from None


def register(eval_app: typer.Typer) -> None:
    """Add ``beam-search`` to the ``posttrain eval`` group."""
    eval_app.command("beam-search")(beam_search)
