"""``posttrain eval compare A B``: is B's accuracy really different from A's on the same problems?

    posttrain eval compare runs/q/eval/sft runs/q/eval/grpo                 # table + verdict
    posttrain eval compare runs/q/eval/sft runs/q/eval/grpo --out cmp      # also cmp/compare.json
    posttrain eval compare a/samples.jsonl b/outcomes.jsonl --json          # the JSON on stdout

A and B are ``eval policy`` folders (their ``samples.jsonl``) or JSON Lines files of ``id, category,
correct`` rows covering the same problems. The paired difference B − A with Newcombe's 95% interval
and McNemar's exact p, overall and per category, come from ``posttrainlab.eval.compare``
(docs/metrics.md "Paired comparison"); when both hold samples (``eval policy --samples K``), pass@1 and maj@K are
paired too (``eval.sampled_compare``); when both are evaluations of arith-v1 problems, trace error (a right answer
reached through a wrong step) is paired on the problems both answer right (``eval.trace_error``). An ``--out``
holding an earlier ``compare.json`` is refused unless ``--overwrite``, as every eval verb does
(``cli.options.check_results``). Nothing here imports torch.
``register(eval_app)`` adds the verb.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from posttrainlab.cli.options import OUT, OVERWRITE, check_results, lock_out, out_folder
from posttrainlab.run_layout import COMPARE_JSON  # what `eval compare --out DIR` writes there


def compare_table(result: dict[str, Any]):
    """A rich table: per group n, accuracy of A and B, B − A with its 95% interval, b, c and McNemar's p.

    >>> s = {"n": 8, "acc_a": 0.5, "acc_b": 0.875, "diff": 0.375, "ci": [0.01, 0.6], "b": 1, "c": 4, "mcnemar_p": 0.375}
    >>> compare_table({"a": "A", "b": "B", "overall": s, "categories": {}}).row_count
    1
    """
    from rich.table import Table

    from posttrainlab.eval.compare import p_value, points

    table = Table(title=f"B − A: A = {result['a']}, B = {result['b']}")
    for column in ("group", "n", "A", "B", "B − A [95% CI]", "b", "c", "p"):
        table.add_column(column, justify="left" if column == "group" else "right", no_wrap=True)
    for name, s in {"overall": result["overall"], **result["categories"]}.items():
        accuracies = [f"{100 * s[k]:.1f}%" for k in ("acc_a", "acc_b")]
        cells = [points(s["diff"], s["ci"]), str(s["b"]), str(s["c"]), p_value(s["mcnemar_p"])]
        table.add_row(name, str(s["n"]), *accuracies, *cells)
    table.caption = (
        "accuracy in %, B − A in points with Newcombe's paired interval; b: A right, B wrong; c: A wrong, B right; "
        "p: exact McNemar"
    )
    return table


def sampled_lines(sampled: dict[str, Any] | None) -> list[str]:
    """pass@1 and maj@K, B − A overall, one line each (``eval.sampled_compare``); none without samples."""
    from posttrainlab.eval.compare import describe, p_value, points

    if not sampled:
        return []
    s = sampled["pass_at_1"]["overall"]
    lines = [f"sampled pass@1 B − A = {points(s['diff'], s['ci'])} points (paired t-test p {p_value(s['p'])})"]
    if sampled["maj_at_k"] is not None:
        lines.append(describe("maj@K B − A", sampled["maj_at_k"]["overall"]))
    return lines


def trace_lines(trace: dict[str, Any] | None) -> list[str]:
    """Trace error, B − A, greedy (exact McNemar) and sampled (paired t), one line each (``eval.trace_error``).

    >>> s = {"n": 6, "trace_error_a": 0.5, "trace_error_b": 0.0, "diff": -0.5, "ci": [-0.8, -0.1], "b": 3, "c": 0,
    ...      "mcnemar_p": 0.25, "significant": False}
    >>> print(trace_lines({"greedy": {"overall": s}, "sampled": None})[0].split("], ")[1])
    p = 0.250: not significant at 0.05 (A 50.0%, B 0.0% with a wrong step among the 6 problems both answer right)
    """
    from posttrainlab.eval.compare import describe, p_value, points

    if not trace:
        return []
    g = trace["greedy"]["overall"]
    shares = f"A {100 * g['trace_error_a']:.1f}%, B {100 * g['trace_error_b']:.1f}%"
    lines = [f"{describe('trace error B − A', g)} ({shares} with a wrong step among the {g['n']} problems both "
             "answer right)"]  # fmt: skip
    s = trace["sampled"] and trace["sampled"]["overall"]
    if s:
        where = f"per-problem mean over the {s['n']} problems both sample a right answer on"
        lines.append(f"sampled trace error B − A = {points(s['diff'], s['ci'])} points, {where} (paired t-test p "
                     f"{p_value(s['p'])})")  # fmt: skip
    return lines


def compare(
    a: Path = typer.Argument(..., help="A: an eval policy folder or a JSONL file of id, category, correct rows."),
    b: Path = typer.Argument(..., help="B: the same, for the same problems."),
    out: Path | None = typer.Option(None, *OUT, parser=out_folder, help="Folder to write compare.json into."),
    as_json: bool = typer.Option(False, "--json", help="Print compare.json to stdout instead of the table."),
    overwrite: bool = OVERWRITE,
) -> None:
    """Paired comparison of two evaluations: B − A with a 95% interval and McNemar's exact p, per category."""
    from posttrainlab.eval.compare import describe, verdict
    from posttrainlab.provenance import provenance
    from posttrainlab.runners.compare import comparison

    if out is not None:  # --out itself is checked as it is parsed (cli.options.out_folder)
        check_results(out, COMPARE_JSON, overwrite)
    result = {**comparison(a, b), "provenance": provenance()}
    from posttrainlab.runners.compare import has_samples, sampled_comparison

    if has_samples(a) and has_samples(b):  # both evaluated with --samples K: pass@1 and maj@K paired too
        result["sampled"] = sampled_comparison(a, b)
    from posttrainlab.runners.compare import has_trace, trace_comparison

    if has_trace(a) and has_trace(b):  # both eval policy runs on arith-v1: trace error paired too
        result["trace_error"] = trace_comparison(a, b)
    from posttrainlab.data.jsonl import strict_json

    text = strict_json(result, indent=2, ensure_ascii=False) + "\n"
    if out is not None:  # the lock of --out only: A and B are read, and readers take none
        from posttrainlab.data.atomic import write_text

        with lock_out(out):
            write_text(out / COMPARE_JSON, text)
    if as_json:
        typer.echo(text, nl=False)
        return
    from rich.console import Console

    console = Console()
    console.print(compare_table(result))
    console.print(describe("B − A overall", result["overall"]) + ". " + verdict(result), highlight=False)
    for line in sampled_lines(result.get("sampled")) + trace_lines(result.get("trace_error")):
        console.print(line, highlight=False)
    if out is not None:
        console.print(f"wrote {out / 'compare.json'}", highlight=False)


def register(eval_app: typer.Typer) -> None:
    """Add ``compare`` to the ``eval`` group."""
    eval_app.command("compare")(compare)
