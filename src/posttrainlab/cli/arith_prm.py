"""``posttrain data arith-prm``: build the exactly step-labelled arith-prm dataset from a policy.

    posttrain data arith-prm --policy runs/qs/sft --data runs/qs/data/arith-v1 --out data/arith-prm --k 4

A thin verb over ``posttrainlab.label.arith_prm.build`` (rules in ``posttrainlab.data.arith.prm_data``
and docs/prm-eval.md); torch is imported only when the verb runs. ``register(data_app)`` adds it to the
``data`` group.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import (
    BACKEND,
    DATA,
    OUT,
    POLICY,
    THREADS,
    check_data,
    check_model,
    choice,
    lock_out,
    out_folder,
)
from posttrainlab.data.arith.prm_labels import LABEL_MODES, MISSING_ANSWER
from posttrainlab.generation.factory import POLICY_BACKENDS
from posttrainlab.models.loading import DTYPES
from posttrainlab.report.format import pct


def stats_table(manifest: dict):
    """Rows, all-correct share and first-error position histogram per split and source."""
    from rich.table import Table

    table = Table(title=f"arith-prm from {manifest['policy']} (k={manifest['sampling']['k']})")
    for column in ("split", "source", "rows", "all correct", "first error at step 0/1/2/3+"):
        table.add_column(column, justify="left" if column in ("split", "source") else "right")

    def hist(h: dict) -> str:
        counts = [h.get(str(i), 0) for i in range(3)] + [sum(v for k, v in h.items() if int(k) >= 3)]
        return "/".join(map(str, counts))

    for split, s in manifest["stats"].items():
        table.add_row(split, "all", str(s["rows"]), pct(s["all_correct_share"]), hist(s["first_error_histogram"]))
        for source, t in s["by_source"].items():
            table.add_row("", source, str(t["rows"]), pct(t["all_correct_share"]), hist(t["first_error_histogram"]))
    return table


def arith_prm(
    policy: str = POLICY,
    data: str = typer.Option(..., *DATA, help="arith-v1 folder (posttrain data prepare) or hf:// path."),
    out: Path = typer.Option(
        ..., *OUT, parser=out_folder, help="Output folder (replaced atomically; empty or an arith-prm build)."
    ),
    k: int = typer.Option(4, "--k", help="Solutions sampled per problem."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed (and the held-out corruption seed)."),
    limit: int | None = typer.Option(None, "--limit", help="Use the first N records of every arith-v1 split read."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (> 0)."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling threshold."),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", help="Longest solution, in tokens."),
    batch_size: int = typer.Option(32, "--batch-size", help="Prompts per generate call."),
    train_prompts: str = typer.Option("rl_train", "--train-prompts", help="arith-v1 splits sampled for train."),
    heldout_prompts: str = typer.Option("dev,validation", "--heldout-prompts", help="Splits sampled for heldout."),
    labels: choice(LABEL_MODES) = typer.Option(
        "first-error", "--labels", help="first-error: the step view's cut; every-step: every line (Math-Shepherd view)."
    ),
    missing_answer: choice(MISSING_ANSWER) = typer.Option(
        "last-step", "--missing-answer", help="No answer line: 0 on the last line, or an explicit '(no answer)' step."
    ),
    hard_negatives: str = typer.Option(
        "", "--hard-negatives", help="arith-v1 splits (outside every eval pool) giving near-miss negatives to train."
    ),
    hard_negative_limit: int | None = typer.Option(None, "--hard-negative-limit", help="First N records of each."),
    hard_negatives_per_problem: int = typer.Option(2, "--hard-negatives-per-problem", help="Near-misses per problem."),
    dtype: choice(DTYPES) = typer.Option("float32", "--dtype", help="Weights' dtype (auto: the checkpoint's own)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run the model repo's own code."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    threads: int | None = typer.Option(None, *THREADS, help="torch CPU threads (default: the thread policy)."),
    backend: choice(POLICY_BACKENDS) = BACKEND,
) -> None:
    """Sample K solutions per problem, label every step exactly, write the step and Math-Shepherd views."""
    from rich.console import Console

    from posttrainlab.data.arith.prm_labels import ArithPRMOptions
    from posttrainlab.label.arith_prm import ArithPRMBuild, build
    from posttrainlab.threads import check_threads, configure_threads

    check_threads(threads)  # every check before torch is imported (cli.options)
    check_model(policy, "--policy")
    check_data(data)

    def names(text: str) -> tuple[str, ...]:
        return tuple(n.strip() for n in text.split(",") if n.strip())

    options = ArithPRMOptions(labels, missing_answer, list(names(hard_negatives)), hard_negative_limit,
                              hard_negatives_per_problem).check(names(heldout_prompts))  # fmt: skip
    configure_threads(threads)

    settings = ArithPRMBuild(
        k=k, seed=seed, limit=limit, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
        batch_size=batch_size, train_prompts=names(train_prompts), heldout_prompts=names(heldout_prompts),
        trust_remote_code=trust_remote_code, dtype=dtype,
    )  # fmt: skip
    from posttrainlab.generation.factory import policy_backend

    with lock_out(out, what="dataset folder"), policy_backend(
        policy, backend, batch_size=batch_size, dtype=dtype, trust_remote_code=trust_remote_code, threads=threads,
        progress=progress,
    ) as sampler:  # fmt: skip
        manifest = build(policy, data, out, settings, progress=progress, options=options, backend=sampler)
    console = Console()
    console.print(stats_table(manifest))
    sampling = manifest["sampling"]
    total = {
        key: sum(s[key] for s in manifest["stats"].values())
        for key in ("dropped_empty", "right_answer_wrong_steps", "grader_disagreements")
    }
    console.print(
        f"{sampling['samples']} samples in {sampling['seconds']:.1f} s; dropped {total['dropped_empty']} empty "
        f"solutions; right answer through a wrong step: {total['right_answer_wrong_steps']}; "
        f"label/grader disagreements: {total['grader_disagreements']}",
        highlight=False,
    )
    console.print(f"wrote {out}/step, {out}/math_shepherd, {out}/stats.json, {out}/manifest.json", highlight=False)


def register(data_app: typer.Typer) -> None:
    """Add ``arith-prm`` to the ``posttrain data`` group."""
    data_app.command("arith-prm")(arith_prm)
