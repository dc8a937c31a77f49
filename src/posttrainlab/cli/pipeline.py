"""``posttrain generate``, ``posttrain annotate``, ``posttrain data sharp-build`` and ``posttrain data agree``.

The SHARP pipeline on the command line (docs/sharp-pipeline.md)::

    posttrain generate --model runs/qs/sft --data data/arith-v1:test --k 4 --out runs/sharp/gen
    posttrain serve --judge arith --port 8000 &
    posttrain annotate --model-name arith-judge --model-url http://127.0.0.1:8000/v1 \\
        --data runs/sharp/gen --out runs/sharp/ann
    posttrain data agree runs/sharp/ann/sharp/all/span.jsonl other/span.jsonl

Thin verbs: parse flags, call ``posttrainlab.label`` / ``posttrainlab.eval.agreement``, print. torch
is imported only by ``generate`` (inside the backend), so ``posttrain --help`` stays fast.
``register(app)`` adds ``generate`` and ``annotate``; ``register_data(data_app)`` adds ``sharp-build``
and ``agree`` to the ``data`` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from posttrainlab.cli.options import (
    CONCURRENCY,
    DATA,
    OUT,
    THREADS,
    check_data,
    check_model,
    choice,
    lock_out,
    out_folder,
)
from posttrainlab.data.step_split import GENERATE_STEP_SPLITS
from posttrainlab.errors import BadInput
from posttrainlab.generation.factory import BACKENDS
from posttrainlab.label.sharp_build import SELECTIONS
from posttrainlab.progress import progress_bar
from posttrainlab.report.format import pct
from posttrainlab.threads import configure_threads

# the SHARP views' selection and train/test split, shared by `annotate` and `data sharp-build`
Select = Annotated[choice(SELECTIONS), typer.Option("--select", help="all, or one-per-problem (lowest sample index).")]
TestShare = Annotated[float, typer.Option("--test-share", help="Share of problems in the test split.")]
SplitSeed = Annotated[int, typer.Option("--seed", help="Seed of the train/test split.")]


def _check_split(select: str, test_share: float) -> None:
    """``--select`` (the choice is typer's) and ``--test-share``; a library caller gets the same refusal."""
    if select not in SELECTIONS:
        raise BadInput(f"--select {select!r}: choose one of {', '.join(SELECTIONS)}")
    if not 0 <= test_share < 1:
        raise BadInput(f"--test-share {test_share}: must be in [0, 1)")


def generate(
    model: Annotated[str, typer.Option("--model", help="Policy: a local model folder, a Hub id, or a served name.")],
    data: Annotated[
        str, typer.Option(*DATA, help="DIR:SPLIT of a dataset (arith-v1), or a .jsonl/.json/.parquet/hf:// file.")
    ],
    out: Annotated[
        Path, typer.Option(*OUT, parser=out_folder, help="Output folder: generations.jsonl, generate.json.")
    ],
    k: Annotated[int, typer.Option("--k", help="Independent samples per problem (SHARP: 4).")] = 4,
    backend: Annotated[
        choice(BACKENDS), typer.Option("--backend", help="Sampling backend (openai: a served model at --model-url).")
    ] = "transformers",
    model_url: Annotated[
        str | None, typer.Option("--model-url", help="Endpoint of the openai backend (e.g. http://127.0.0.1:8000/v1).")
    ] = None,
    api_key: Annotated[str | None, typer.Option("--api-key", help="API key of the openai backend.")] = None,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature (SHARP: 0.7).")] = 0.7,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus threshold (SHARP: 0.8).")] = 0.8,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Longest solution, in tokens.")] = 512,
    limit: Annotated[int | None, typer.Option("--limit", help="The first N problems only.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed.")] = 0,
    step_split: Annotated[
        choice(GENERATE_STEP_SPLITS),
        typer.Option("--step-split", help="auto (blank lines when present, else lines), blank or lines."),
    ] = "auto",
    system_prompt: Annotated[
        str | None,
        typer.Option("--system-prompt", help="System prompt ('' for none; default: the SHARP-style math prompt)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Prompts per forward batch.")] = 32,
    threads: Annotated[int | None, typer.Option(*THREADS, help="torch CPU threads.")] = None,
) -> None:
    """Sample K solutions per problem and split them into steps (SHARP "Generation")."""
    from posttrainlab.label.generate import SYSTEM_PROMPT, GenerateConfig, read_generations, run_generate, split_counts

    cfg = GenerateConfig(
        model=model, data=data, out=out, k=k, backend=backend, model_url=model_url, api_key=api_key,
        temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, limit=limit, seed=seed,
        step_split=step_split, system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        batch_size=batch_size,
    )  # fmt: skip
    cfg.check()  # flags, then paths, then threads: all before torch is imported or --out is touched
    check_data(data)
    if backend != "openai":
        check_model(model)
    configure_threads(threads)
    with lock_out(out), progress_bar(transient=True) as bar:
        task = bar.add_task("generating", total=None)
        run_file, written, resumed = run_generate(cfg, progress=lambda d, t: bar.update(task, completed=d, total=t))
    rows = read_generations(run_file)
    split = split_counts(rows)
    also = f" ({resumed} problems were already done)" if resumed else ""
    typer.echo(f"wrote {written} solutions to {run_file}{also}; {len(rows)} in all")
    typer.echo(f"steps cut on blank lines: {split['blank']}, on lines: {split['lines']}; empty: {split['empty']}")
    splits = {r.get("source_split") for r in rows}
    if any(str(s).lower() == "test" for s in splits):
        typer.echo(
            f"warning: these problems come from a test split ({data}): a corpus built from them must not be used to "
            "evaluate a solver on that split",
            err=True,
        )


def annotate(
    model_name: Annotated[str, typer.Option("--model-name", help="The judge's name on the server.")],
    data: Annotated[
        str, typer.Option(*DATA, help="posttrain generate's folder or file, or a span-view file to re-annotate.")
    ],
    out: Annotated[
        Path, typer.Option(*OUT, parser=out_folder, help="Output folder: annotations.jsonl and sharp/ (the views).")
    ],
    model_url: Annotated[
        str, typer.Option("--model-url", help="OpenAI-compatible endpoint.")
    ] = "http://127.0.0.1:8000/v1",
    num_threads: Annotated[
        int, typer.Option(*CONCURRENCY, help="Concurrent requests (--num-threads: its old name, not torch threads).")
    ] = 8,
    max_attempts: Annotated[int, typer.Option("--max-attempts", help="Answers asked per row before it fails.")] = 3,
    api_key: Annotated[str, typer.Option("--api-key", help="API key (a local server takes EMPTY).")] = "EMPTY",
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Longest answer, in tokens.")] = 4096,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 600.0,
    min_ratio: Annotated[
        float, typer.Option("--min-ratio", help="Least match ratio of a repaired answer (docs/sharp-pipeline.md).")
    ] = 0.95,
    limit: Annotated[int | None, typer.Option("--limit", help="The first N solutions only.")] = None,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="Annotate failed rows again.")] = False,
    views: Annotated[bool, typer.Option("--views/--no-views", help="Write the span/step views at the end.")] = True,
    select: Select = "all",
    test_share: TestShare = 0.1,
    seed: SplitSeed = 0,
) -> None:
    """Mark wrong fragments with <HAL> by an LLM judge; verify, repair or regenerate; write the SHARP views."""
    from posttrainlab.label.annotate import AnnotateConfig, run_annotate

    _check_split(select, test_share)
    cfg = AnnotateConfig(
        data=data, out=out, model_name=model_name, model_url=model_url, api_key=api_key, num_threads=num_threads,
        max_attempts=max_attempts, max_tokens=max_tokens, timeout_s=timeout, min_ratio=min_ratio, limit=limit,
        retry_failed=retry_failed,
    )  # fmt: skip
    with lock_out(out):  # the views in out/sharp too (_build also locks that folder)
        with progress_bar(transient=True) as bar:
            task = bar.add_task("annotating", total=None)
            run = run_annotate(cfg, progress=lambda d, t: bar.update(task, completed=d, total=t))
        for note in run.notes:
            typer.echo(f"note: {note}", err=True)
        counts = ", ".join(f"{k} {v}" for k, v in run.status_counts.items())
        typer.echo(f"annotated {run.annotated} rows now, {run.resumed} before ({run.elapsed_s:.1f} s): {counts}")
        failed = run.status_counts["failed"]
        if failed:
            typer.echo(
                f"warning: {failed} rows failed (no acceptable annotation): left out of the views; "
                "run again with --retry-failed to ask for them again",
                err=True,
            )
        if views:
            _build(run.records, out / "sharp", select, test_share, seed, upstream=out)


def _build(
    records: list[dict], out: Path, select: str, test_share: float, seed: int, upstream: Path | None = None
) -> None:
    """Build the SHARP views; their card names the policy and judge of the annotation run's card in ``upstream``."""
    from posttrainlab.data.cards.kinds import upstream_provenance
    from posttrainlab.label.sharp_build import build_sharp

    provenance = upstream_provenance(upstream)
    with lock_out(out):
        summary = build_sharp(records, out, selection=select, test_share=test_share, seed=seed, provenance=provenance)
    for split in ("all", "train", "test"):
        s = summary["splits"][split]
        hist = " ".join(f"{k}:{v}" for k, v in s["first_error_histogram"].items()) or "-"
        typer.echo(
            f"{split:>5}: {s['rows']} rows, {s['problems']} problems, clean {pct(s['clean_share'])}; "
            f"first error at step {hist}"
        )
    for warning in summary["warnings"]:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"wrote {out}/{{all,train,test}}/{{span,step,meta}}.jsonl, {out}/summary.json and {out}/README.md")


def sharp_build(
    annotations: Annotated[
        Path, typer.Option("--annotations", help="annotations.jsonl of posttrain annotate (or its folder).")
    ],
    out: Annotated[
        Path,
        typer.Option(
            *OUT, parser=out_folder, help="Output folder: new, empty or an earlier sharp-build output (replaced whole)."
        ),
    ],
    select: Select = "all",
    test_share: TestShare = 0.1,
    seed: SplitSeed = 0,
) -> None:
    """Span view, step view and a train/test split by problem from an annotation run (failed rows left out)."""
    from posttrainlab.label.sharp_build import load_records

    _check_split(select, test_share)
    _build(load_records(annotations), out, select, test_share, seed, upstream=annotations)


def agree(
    a: Annotated[str, typer.Argument(metavar="A", help="A span-view or step-view file.")],
    b: Annotated[str, typer.Argument(metavar="B", help="Another annotation of the same rows.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Agreement of two annotations of the same rows: step-level Cohen's kappa and character-level span F1."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.jsonl import strict_json
    from posttrainlab.eval.agreement import MisalignedRows, agreement

    rows_a, rows_b = list(iter_rows(a)), list(iter_rows(b))
    try:
        result = agreement(rows_a, rows_b)
    except MisalignedRows as e:
        raise BadInput(f"{a} / {b}: rows do not align: {e}") from None
    except ValueError as e:
        raise BadInput(f"{a} / {b}: {e}") from None
    if as_json:
        typer.echo(strict_json(result, indent=2))
        return
    span = result["span"]

    def num(x: float | None) -> str:
        return "undefined" if x is None else f"{x:.3f}"

    typer.echo(f"{result['rows']} rows ({result['mode']}), {result['steps_compared']} steps compared")
    typer.echo(
        f"step kappa {num(result['step_kappa'])} (agreement {pct(result['step_agreement'])}; wrong steps "
        f"{result['wrong_steps_a']} in A, {result['wrong_steps_b']} in B)"
    )
    typer.echo(
        f"span F1 {num(span['f1'])} (chars marked: {span['chars_a']} in A, {span['chars_b']} in B, "
        f"{span['chars_both']} in both)"
    )
    typer.echo(f"solution kappa {num(result['solution_kappa'])}; same first error {pct(result['first_error_match'])}")


def register(app: typer.Typer) -> None:
    """Add ``generate`` and ``annotate`` to the root app."""
    app.command("generate")(generate)
    app.command("annotate")(annotate)


def register_data(data_app: typer.Typer) -> None:
    """Add ``sharp-build`` and ``agree`` to the ``posttrain data`` group."""
    data_app.command("sharp-build")(sharp_build)
    data_app.command("agree")(agree)
