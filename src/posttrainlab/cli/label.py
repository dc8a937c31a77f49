"""``posttrain label …``: Monte-Carlo value labelling (Polaris MC) and its agreement with exact step labels.

    posttrain label mc --policy runs/quickstart/sft --data data/arith-v1:rl_train --n 8 --out runs/mc --limit 200
    posttrain label mc --policy M --backend openai --base-url http://127.0.0.1:8000/v1 --data F --n 16 --out D
    posttrain label mc-agreement runs/mc --n 4 --n 8 --n 16

Thin verbs: parse flags, build the backend (``generation.factory.make_backend``), call ``label.mc``,
print the value table. torch is imported only inside the verb (``posttrain --help`` stays fast).
"""

from __future__ import annotations

from pathlib import Path

import typer

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


@label_app.command("mc")
def mc(
    policy: str = typer.Option(
        ..., "--policy", help="Policy: a model folder or Hub id (served model name for openai)."
    ),
    data: str = typer.Option(
        ..., "--data", help="Problems (DIR:SPLIT, a .jsonl/.parquet file, hf://...) or a step-level trace file."
    ),
    n: int = typer.Option(..., "--n", help="Continuations per prefix (V = correct / n)."),
    out: Path = typer.Option(..., "--out", help="Output folder (train/val parquet + jsonl, summary.json, work/)."),
    split: str | None = typer.Option(None, "--split", help="Split of a dataset folder (default: rl_train)."),
    limit: int | None = typer.Option(None, "--limit", help="Label the first N problems."),
    samples_per_problem: int = typer.Option(1, "--samples-per-problem", help="Base traces sampled per problem."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (0 is greedy)."),
    top_p: float = typer.Option(1.0, "--top-p", help="Nucleus sampling threshold."),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", help="Longest continuation, in tokens."),
    seed: int = typer.Option(0, "--seed", help="Run seed (each request's seed derives from it and the problem id)."),
    search: str = typer.Option("full", "--search", help="full: roll out every prefix; binary: OmegaPRM bisection."),
    grader: str = typer.Option(
        "arith",
        "--grader",
        help="arith (Answer: <int>) or math[:KEY=VALUE,...] (math-verify; settings in docs/arith-v1.md).",
    ),
    step_split: str = typer.Option("lines", "--step-split", help="lines or paragraphs (blank-line separated)."),
    stop: list[str] = typer.Option(None, "--stop", help="Stop string for continuations (repeatable)."),
    backend: str = typer.Option("transformers", "--backend", help="transformers, vllm or openai."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (--backend openai)."),
    api_key: str | None = typer.Option(None, "--api-key", help="Endpoint key (default $OPENAI_API_KEY)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Prefixes per prefill / concurrent requests."),
    problems_per_call: int | None = typer.Option(
        None, "--problems-per-call", help="Problems sharing a backend call (default 1 for transformers, else 8)."
    ),
    judge_model: str | None = typer.Option(None, "--judge-model", help="LLM-judge relabel pass: served model name."),
    judge_url: str | None = typer.Option(None, "--judge-url", help="LLM-judge endpoint (OpenAI-compatible)."),
    judge_relabel: str = typer.Option("all", "--judge-relabel", help="all, or unparsed (only ungradable answers)."),
    val_problems: int = typer.Option(128, "--val-problems", help="Problems held out by id for val (card: 128)."),
    keep_band: tuple[float, float] | None = typer.Option(
        None, "--keep-band", help="Also write rows with LO <= V <= HI (e.g. 0.1 0.9) to band-LO-HI/."
    ),
    mid_difficulty: tuple[float, float] | None = typer.Option(
        None, "--mid-difficulty", help="Also write problems with solve rate in [LO, HI] to mid-LO-HI/."
    ),
    source: str = typer.Option("arith-v1", "--source", help="The rows' source column."),
    text_columns: bool = typer.Option(
        True,
        "--text-columns/--card-columns-only",
        help="Also write question and steps (grouped PRM training reads them); or the card's columns + value_source.",
    ),
    shard: str | None = typer.Option(None, "--shard", help="I/K: label the problems whose id hashes to I mod K."),
    keep_continuations: bool = typer.Option(False, "--keep-continuations", help="Keep continuation texts in work/."),
    exact_check: bool = typer.Option(
        False, "--exact-check", help="Also write agreement.json: MC labels against exact arith-v1 step labels."
    ),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run the model repo's own code."),
    dtype: str = typer.Option("float32", "--dtype", help="float32, bfloat16, float16 or auto."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Label every prefix of base traces with V = share of correct continuations; write Polaris-MC rows."""
    from posttrainlab.errors import BadInput
    from posttrainlab.generation.factory import make_backend
    from posttrainlab.label.mc import MCConfig, OutputConfig, load_problems, parse_shard, run_mc

    config = MCConfig(
        n=n,
        samples_per_problem=samples_per_problem,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        search=search,
        grader=grader,
        step_split=step_split,
        stop=tuple(stop or ()),
    )
    output = OutputConfig(
        val_problems=val_problems,
        keep_band=keep_band,
        mid_difficulty=mid_difficulty,
        source=source,
        text_columns=text_columns,
    )
    config.check()
    output.check()
    shard_ik = parse_shard(shard)
    if (judge_model is None) != (judge_url is None):
        raise BadInput("the judge relabel pass needs both --judge-model and --judge-url")
    if threads is not None:
        if threads < 1:
            raise BadInput(f"--threads {threads}: must be at least 1")
        import torch

        torch.set_num_threads(threads)
    problems = load_problems(data, split=split, limit=limit, grader=grader, step_split=step_split)
    relabeler = None
    if judge_model is not None:
        from posttrainlab.label.mc_judge import Relabeler

        judge = make_backend(judge_model, backend="openai", base_url=judge_url, api_key=api_key, batch_size=batch_size)
        relabeler = Relabeler(judge, mode=judge_relabel, seed=seed)
    extra = (
        {"progress": False, "trust_remote_code": trust_remote_code, "dtype": dtype} if backend == "transformers" else {}
    )
    if backend == "vllm":
        extra = {"trust_remote_code": trust_remote_code, "dtype": "auto" if dtype == "float32" else dtype}
    sampler = make_backend(policy, backend=backend, base_url=base_url, api_key=api_key, batch_size=batch_size, **extra)
    summary = run_mc(
        problems,
        sampler,
        out,
        config=config,
        output=output,
        relabeler=relabeler,
        shard=shard_ik,
        problems_per_call=problems_per_call or (1 if backend == "transformers" else 8),
        keep_continuations=keep_continuations,
        run_info={"policy": policy, "backend": backend},
        progress=progress,
    )
    s = summary["session"]
    typer.echo(
        f"this run: {s['problems']} problems, {s['rollouts']} rollouts in {s['calls']} calls, {s['seconds']:.1f} s"
    )
    if not summary["finished"]:
        typer.echo(
            f"shard {shard}: done; {summary['missing']} problems of other shards are not labelled yet. "
            "Run the other shards, then once more without --shard to write the outputs."
        )
        return
    _print_table(summary["value_table"], f"MC values ({summary['problems']} problems, n={n}, {search} search)")
    typer.echo(f"wrote {', '.join(summary['files'])}, value_table.md and summary.json in {out}")
    if exact_check:
        _agreement(out, None)


def _agreement(out: Path, ns: list[int] | None) -> None:
    from posttrainlab.label.mc_agreement import agreement_markdown, write_agreement

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
