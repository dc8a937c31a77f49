"""``posttrain eval …``: evaluate policies (and, later, PRMs and judges).

    posttrain eval policy --model runs/sft/final --data data/arith-v1 --out runs/sft/eval
    posttrain eval policy --model runs/dpo/final --ref-model runs/sft/final --data data/arith-v1 --out runs/dpo/eval
    posttrain eval policy --model M --data data/arith-v1:dev --out E --k 8 --temperature 0.8 --limit 100
    posttrain eval policy --model M --data data/arith-v1:dev --out E --samples 8   # greedy + pass@1, maj@8 at T 1.0

Thin verbs: parse flags, call ``posttrainlab.eval.policy``, print a short table. torch and
transformers are imported inside the verb, so ``posttrain --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import (
    BACKEND,
    CONCURRENCY,
    DATA,
    OUT,
    OVERWRITE,
    THREADS,
    check_model,
    check_out_file,
    check_results,
    check_split,
    choice,
    lock_out,
    out_file,
    out_folder,
)
from posttrainlab.errors import finite
from posttrainlab.generation.factory import POLICY_BACKENDS
from posttrainlab.models.loading import DTYPES
from posttrainlab.report.format import pct
from posttrainlab.run_layout import METRICS, SAMPLES
from posttrainlab.runners.settings import JudgeSettings, OnInvalid, PolicyEvalSettings

eval_app = typer.Typer(
    help="Evaluate policies: accuracy per category with intervals, pass@k, preferences.", no_args_is_help=True
)


def summary_table(metrics: dict):
    """A rich table: overall and per-category accuracy with 95% intervals (and pass@k when measured)."""
    from rich.table import Table

    pass_k = metrics.get("pass_at_k")
    table = Table(title=f"{metrics['model']} on {metrics['data']} ({metrics['split']}, n={metrics['n']})")
    for column in ("category", "n", "correct", "accuracy", "95% CI"):
        table.add_column(column, justify="left" if column == "category" else "right")
    if pass_k:
        table.add_column(f"pass@{pass_k['k']}", justify="right")

    def add(name: str, acc: dict, passed: float | None) -> None:
        lo, hi = acc["ci95"]
        cells = [name, str(acc["n"]), str(acc["correct"]), pct(acc["value"]), f"{pct(lo)} - {pct(hi)}"]
        table.add_row(*cells, *([pct(passed)] if pass_k else []))

    add("overall", metrics["accuracy"], pass_k["value"] if pass_k else None)
    for category, acc in metrics["per_category"].items():
        add(category, acc, pass_k["per_category"][category] if pass_k else None)
    return table


def summary_lines(metrics: dict) -> list[str]:
    """Outcome shares, format rate, preference accuracy and speed, one line each."""
    shares = ", ".join(f"{k} {pct(v)}" for k, v in metrics["outcome_shares"].items())
    lines = [f"outcomes: {shares}; format rate {pct(metrics['format_rate'])}"]
    pref = metrics.get("preference")
    if pref:
        acc = pref["accuracy"]
        per = ", ".join(f"{k} {pct(v['value'])}" for k, v in pref["per_corruption"].items())
        lo, hi = acc["ci95"]
        lines.append(
            f"preference accuracy ({pref['method']}, n={acc['n']}): {pct(acc['value'])} [{pct(lo)} - {pct(hi)}]; {per}"
        )
    sampled = metrics.get("sampled")
    if sampled:
        p1, maj = sampled["pass_at_1"], sampled["maj_at_k"]
        lines.append(
            f"sampled (K={sampled['n_samples']}, T={sampled['temperature']:g}): pass@1 {pct(p1['value'])} "
            f"[{pct(p1['ci95'][0])} - {pct(p1['ci95'][1])}], maj@{maj['k']} {pct(maj['value'])} "
            f"[{pct(maj['ci95'][0])} - {pct(maj['ci95'][1])}]; samples' format rate {pct(sampled['format_rate'])}"
        )
    gen = metrics["generation"]
    if gen.get("requests_per_s"):
        lines.append(f"generation: {gen['seconds']:.1f} s, {gen['requests_per_s']:.1f} requests/s")
    return lines


P = PolicyEvalSettings  # each flag's default is the settings class's (runners.settings)


@eval_app.command("policy")
def policy(
    model: str = typer.Option(..., "--model", help="Policy: a local Hugging Face model folder or a Hub id."),
    data: str = typer.Option(..., *DATA, help="Dataset folder (DIR or DIR:SPLIT), split file, or hf://… path."),
    out: Path = typer.Option(..., *OUT, parser=out_folder, help="Output folder for metrics.json and samples.jsonl."),
    split: str | None = typer.Option(
        P.split, "--split", help="Split to evaluate (default: the one in --data, else test)."
    ),
    limit: int | None = typer.Option(P.limit, "--limit", help="Evaluate the first N problems (and preference pairs)."),
    k: int = typer.Option(P.k, "--k", help="pass@k from the --samples (k > 1; --samples defaults to k)."),
    n_samples: int | None = typer.Option(
        None,
        "--samples",
        "--n-samples",
        help="K > 1 samples per problem beside the greedy answer: pass@1 (mean over K) and maj@K (default: --k).",
    ),
    temperature: float = typer.Option(P.temperature, "--temperature", help="0 is greedy."),
    sample_temperature: float | None = typer.Option(
        P.sample_temperature,
        "--sample-temperature",
        help="Temperature of the --samples (default: --temperature, 1.0 if that is 0).",
    ),
    top_p: float = typer.Option(P.top_p, "--top-p", help="Nucleus sampling threshold (when temperature > 0)."),
    batch_size: int = typer.Option(P.batch_size, "--batch-size", help="Prompts per generate call / pairs per pass."),
    max_new_tokens: int = typer.Option(P.max_new_tokens, "--max-new-tokens", help="Longest response, in tokens."),
    seed: int = typer.Option(P.seed, "--seed", help="Sampling seed."),
    ref_model: str | None = typer.Option(
        None, "--ref-model", help="Reference model: preference by DPO's implicit reward."
    ),
    beta: float = typer.Option(P.beta, "--beta", help="DPO beta for the implicit reward."),
    preference_split: str = typer.Option(
        P.preference_split, "--preference-split", help="Preference pairs to rank, or 'none' to skip."
    ),
    trust_remote_code: bool = typer.Option(
        P.trust_remote_code, "--trust-remote-code", help="Run the model repo's own code."
    ),
    dtype: choice(DTYPES) = typer.Option(P.dtype, "--dtype", help="Weights' dtype (auto: the checkpoint's own)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    threads: int | None = typer.Option(
        None, *THREADS, help="torch CPU threads (1 is fastest for the tiny model on a busy machine)."
    ),
    backend: choice(POLICY_BACKENDS) = BACKEND,
    overwrite: bool = OVERWRITE,
) -> None:
    """Generate on a split, grade, and write metrics.json (accuracy per category with 95% CIs) and samples.jsonl."""
    from rich.console import Console

    from posttrainlab.runners.policy import evaluate_policy
    from posttrainlab.threads import check_threads, configure_threads

    settings = PolicyEvalSettings(
        split=split, limit=limit, batch_size=batch_size, max_new_tokens=max_new_tokens, k=k,
        samples=0 if n_samples is None else n_samples, temperature=temperature,
        sample_temperature=sample_temperature, top_p=top_p, seed=seed,
        preference_split=None if preference_split.lower() == "none" else preference_split, beta=beta,
        trust_remote_code=trust_remote_code, dtype=dtype,
    )  # fmt: skip
    for flag, value in (("--temperature", temperature), ("--sample-temperature", sample_temperature),
                        ("--top-p", top_p), ("--beta", beta)):  # fmt: skip
        finite(flag, value)  # nan sampled on and wrote results (issue #42): refused before anything is written
    # every check before torch is imported (cli.options), in evaluate_policy's order: data and split, then models
    check_results(out, METRICS, overwrite)
    check_threads(threads)
    check_split(data, split, default="test")
    check_model(model)
    if ref_model is not None:
        check_model(ref_model, "--ref-model")
    configure_threads(threads)
    from posttrainlab.generation.factory import policy_backend

    with lock_out(out), policy_backend(model, backend, batch_size=batch_size, dtype=dtype, threads=threads,
                                       trust_remote_code=trust_remote_code, progress=progress) as sampler:  # fmt: skip
        metrics = evaluate_policy(model, data, out, settings, ref_model=ref_model, progress=progress, backend=sampler)
    console = Console()
    console.print(summary_table(metrics))
    for line in summary_lines(metrics):
        console.print(line, highlight=False)
    console.print(f"wrote {out / METRICS} and {out / SAMPLES}", highlight=False)


# ---- posttrain eval judge / judge-summary (Math-Shepherd-614 protocol, docs/judge.md) ----------------

LABEL_ALIGNED_NOTE = "label-aligned (reads gold labels)"


def _judge_table(metrics: dict, title: str):
    """A rich table of one run's headline metrics; the label-aligned number is always named as such."""
    from rich.table import Table

    m = metrics["metrics"]["All"]
    table = Table(title=title)
    for column in ("metric", "precision", "recall", "F1", "accuracy"):
        table.add_column(column, justify="left" if column == "metric" else "right")

    def row(name: str, d: dict, accuracy: bool = False) -> None:
        cells = [pct(d["precision"], 2), pct(d["recall"], 2), pct(d["f1"], 2)]
        table.add_row(name, *cells, pct(d["accuracy"], 2) if accuracy else "")

    row(f"span, {LABEL_ALIGNED_NOTE}", m["span_level"])
    row("span, gold-independent", m["span_level_gold_independent"])
    row("case (row flagged)", m["case_level"], accuracy=True)
    fe = m["first_error"]
    table.add_row("first error (ProcessBench)", "", "", pct(fe["f1"], 2), "")
    return table


def _judge_lines(metrics: dict) -> list[str]:
    m = metrics["metrics"]["All"]
    un = m["unlocated_spans"]
    size = f"test_data_size {metrics['test_data_size']}, failed rows {metrics['failed_rows']}"
    if metrics.get("smoke_run"):
        size += " (SMOKE RUN: --max-samples, not the full evaluation)"
    spans = (
        f"span F1 {pct(m['span_level']['f1'], 2)} {LABEL_ALIGNED_NOTE}, "
        f"{pct(m['span_level_gold_independent']['f1'], 2)} gold-independent"
    )
    lines = [spans, size, f"unlocated spans: {un['count']} in {un['rows']} rows; located by {m['span_locate_methods']}"]
    lines += [f"  row {u['index']}: {u['span'][:100]!r}" for u in un["spans"][:5]]
    if un["count"] > 5:
        lines.append(f"  ... {un['count'] - 5} more in the metric file")
    card = metrics.get("data", {}).get("card_check") if isinstance(metrics.get("data"), dict) else None
    if card:
        lines.append(f"data sha256 vs the card: {card}")
    lines += [f"warning: {w}" for w in metrics.get("warnings", [])]
    return lines


J = JudgeSettings  # each flag's default is the settings class's (runners.settings)


@eval_app.command("judge")
def judge(
    data_file: str | None = typer.Option(
        None, *DATA, help="Math-Shepherd rows (prompt, completions, labels): .parquet, .jsonl or hf://."
    ),
    model_name: str | None = typer.Option(None, "--model-name", help="The model name the endpoint serves."),
    model_url: str = typer.Option(J.model_url, "--model-url", help="OpenAI-compatible base URL."),
    num_threads: int = typer.Option(
        J.num_threads, *CONCURRENCY, help="Concurrent requests (--num-threads: the card's name)."
    ),
    max_tokens: int = typer.Option(
        J.max_tokens, "--max-tokens", help="Generation limit per answer (the card's 8,000)."
    ),
    max_samples: int | None = typer.Option(
        J.max_samples, "--max-samples", help="Judge the first N rows only: a smoke run, marked as such."
    ),
    output_dir: Path = typer.Option(J.output_dir, *OUT, parser=out_folder, help="Where <run>.jsonl and metrics go."),
    on_invalid: OnInvalid = typer.Option(
        J.on_invalid,
        "--on-invalid",
        help="A row with no valid answer after 4 tries: abort the run, or record it as failed.",
    ),
    api_key: str = typer.Option(J.api_key, "--api-key", help="API key (a local vLLM server takes EMPTY)."),
    timeout: float = typer.Option(J.timeout_s, "--timeout", help="Seconds to wait for one answer."),
    run_tag: str | None = typer.Option(
        J.run_tag, "--run-tag", help="Tell repeated runs apart (e.g. r1 … r10); part of the run name."
    ),
    retry_failed: bool = typer.Option(J.retry_failed, "--retry-failed", help="Judge rows recorded as failed again."),
    filepath: Path | None = typer.Option(
        None, "--filepath", help="Recompute metrics offline from RUN.jsonl into <run>_recomputed_metric.json."
    ),
) -> None:
    """Judge Math-Shepherd rows with an LLM behind an OpenAI-compatible endpoint (Math-Shepherd-614 protocol).

    Resumable: run the same command again and it skips finished rows. With --filepath, only recompute.
    """
    from rich.console import Console

    from posttrainlab.errors import BadInput
    from posttrainlab.runners.judge import recompute, run_judge

    console = Console()
    if filepath is not None:
        if data_file is not None or model_name is not None:
            raise BadInput("--filepath recomputes a saved run: do not combine it with --data-file or --model-name")
        out, metrics = recompute(filepath)
        console.print(_judge_table(metrics, f"recomputed from {filepath}"))
        for line in _judge_lines(metrics):
            console.print(line, highlight=False)
        console.print(f"wrote {out}", highlight=False)
        return
    if data_file is None or model_name is None:
        raise BadInput("give --data-file and --model-name to run a judge, or --filepath RUN.jsonl to recompute")
    cfg = JudgeSettings(
        data_file=data_file, model_name=model_name, model_url=model_url, api_key=api_key, num_threads=num_threads,
        max_tokens=max_tokens, max_samples=max_samples, output_dir=output_dir,
        on_invalid=on_invalid,  # type: ignore[arg-type]  # checked by JudgeSettings.check
        timeout_s=timeout, run_tag=run_tag, retry_failed=retry_failed,
    )  # fmt: skip
    cfg.check()  # before the lock: a refused run leaves --out as it was (run_judge checks again)
    with lock_out(output_dir), console.status("judging…") as status:
        run = run_judge(cfg, progress=lambda done, total: status.update(f"judged {done}/{total} rows"))
    console.print(_judge_table(run.metrics, f"{model_name} on {data_file} ({run.metrics['run']})"))
    for line in _judge_lines(run.metrics):
        console.print(line, highlight=False)
    console.print(
        f"{run.judged} rows judged now ({run.records_per_s:.2f} rows/s), {run.resumed} found finished; "
        f"wrote {run.jsonl} and {run.metric_file}",
        highlight=False,
    )


@eval_app.command("judge-summary")
def judge_summary(
    files: list[Path] = typer.Argument(..., help="RUN_metric.json files of repeated runs (the card averages 10)."),
    accept_mismatch: bool = typer.Option(
        False, "--accept-mismatch", help="Average runs whose test_data_size or data differ, or smoke runs."
    ),
    out: Path | None = typer.Option(None, "--out", parser=out_file, help="Also write the summary as JSON here."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier summary at --out."),
) -> None:
    """Mean ± std (sample, n - 1) of judge metrics over runs; refuses mismatched runs unless told."""
    import json

    from rich.console import Console
    from rich.table import Table

    from posttrainlab.data.jsonl import write_json
    from posttrainlab.errors import BadInput
    from posttrainlab.eval.judge_metrics import summarize_runs

    if out is not None:
        check_out_file(out, overwrite, [("the run", f) for f in files], what="eval results")
    runs = []
    for f in files:
        try:
            runs.append((str(f), json.loads(f.read_text(encoding="utf-8"))))
        except FileNotFoundError:
            raise BadInput(f"{f}: no such file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadInput(f"{f}: not a metric JSON file ({e})") from None
    summary = summarize_runs(runs, accept_mismatch)
    table = Table(title=f"judge summary over {summary['runs']} runs (mean ± sample std)")
    for column in ("metric", "mean", "± std"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for entry in summary["metrics"].values():
        std = "-" if entry["std"] is None else f"{100 * entry['std']:.2f}"
        table.add_row(entry["label"], f"{100 * entry['mean']:.2f}", std)
    console = Console()
    console.print(table)
    console.print(f"test_data_size per run: {summary['test_data_size']}", highlight=False)
    for problem in summary["problems"]:
        console.print(f"accepted mismatch: {problem}", highlight=False)
    if out is not None:
        write_json(out, summary, ensure_ascii=False)
        console.print(f"wrote {out}", highlight=False)


# ---- posttrain eval prm / best-of-n (process reward models, docs/prm-eval.md) -------------------------
from posttrainlab.cli.beam_search import register as _register_beam_search  # noqa: E402
from posttrainlab.cli.compare import register as _register_compare  # noqa: E402
from posttrainlab.cli.eval_prm import register as _register_prm_eval  # noqa: E402

_register_prm_eval(eval_app)
_register_beam_search(eval_app)  # eval beam-search (docs/prm-eval.md "Beam search")
_register_compare(eval_app)  # eval compare (docs/metrics.md "Paired comparison")
