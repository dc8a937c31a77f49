"""How well Monte-Carlo labels agree with exact step labels on arith-v1, for several N (agreement.json).

On arith-v1 every step of a trace can be checked by a program (``data.arith.steps.first_error``), so
the MC estimate can be scored against the truth: a prefix is *exactly right* when every step in it is
right (``step_idx < first_error`` or ``first_error == -1``), else *exactly wrong*. For each N:

- ``hard``: the Math-Shepherd label V > 0 against the exact label: accuracy and Cohen's kappa;
- ``at_half``: the row's ``correct`` (V >= 0.5) against the exact label: accuracy and kappa;
- ``mean_v_wrong`` / ``mean_v_right``: mean V of exactly-wrong and exactly-right prefixes;
- the same over rolled-out prefixes only (``rolled_out``): the last prefix is the whole trace, graded
  directly, and agrees with the exact label by construction whenever the trace's steps decide its answer;
- ``binary``: what ``--search binary`` would have spent and written (replayed exactly from the full
  run's per-prefix values, see ``label.mc.search.simulate_binary``): rollouts of each way, their ratio,
  hard-label agreement with the full labelling, mean |V_binary - V_full|, and its own accuracy and
  kappa against the exact labels.

Smaller N come from the first N continuations of each prefix of one run (they are i.i.d. samples, so
the first 4 of 16 are a sample of 4), so every N sees the same base traces. Written by hand: pure
counting over the run's work files, with hand-checked tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from posttrainlab.errors import BadInput
from posttrainlab.eval.agreement import cohen_kappa
from posttrainlab.label.mc.search import simulate_binary
from posttrainlab.label.mc.steps import exact_labels


def _accuracy(a: Sequence[int], b: Sequence[int]) -> float | None:
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a) if a else None


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def score(values: Sequence[float], exact: Sequence[int]) -> dict[str, Any]:
    """Agreement of MC values with exact labels (module docstring for the fields).

    >>> s = score([0.5, 0.0, 0.25, 1.0], [1, 0, 0, 1])
    >>> s["hard"], s["at_half"], s["mean_v_wrong"], s["mean_v_right"]
    ({'accuracy': 0.75, 'kappa': 0.5}, {'accuracy': 1.0, 'kappa': 1.0}, 0.125, 0.75)
    """
    hard = [int(v > 0) for v in values]
    half = [int(v >= 0.5) for v in values]
    return {
        "prefixes": len(values),
        "exact_wrong": sum(1 for e in exact if e == 0),
        "exact_right": sum(1 for e in exact if e == 1),
        "hard": {"accuracy": _accuracy(hard, exact), "kappa": cohen_kappa(hard, exact)},
        "at_half": {"accuracy": _accuracy(half, exact), "kappa": cohen_kappa(half, exact)},
        "mean_v_wrong": _mean([v for v, e in zip(values, exact, strict=True) if e == 0]),
        "mean_v_right": _mean([v for v, e in zip(values, exact, strict=True) if e == 1]),
    }


def _trace_values(trace: dict[str, Any], n: int | None) -> list[float]:
    """V per prefix from the first ``n`` graded continuations (``None``: the values written)."""
    if n is None:
        return [float(p["value"]) for p in trace["prefixes"]]
    out = []
    for p in trace["prefixes"]:
        grades = p["grades"] if p["how"] == "trace" else p["grades"][:n]
        out.append(sum(grades) / len(grades))
    return out


def agreement(records: Iterable[dict[str, Any]], ns: Sequence[int], config: dict[str, Any]) -> dict[str, Any]:
    """The agreement table for each N in ``ns`` over every trace with exact labels (module docstring)."""
    run_n, search = int(config["n"]), config.get("search", "full")
    bad = [n for n in ns if n < 1 or n > run_n]
    if bad:
        raise BadInput(f"--n {bad[0]}: a run with n={run_n} can be scored at 1..{run_n} continuations")
    if search != "full" and any(n != run_n for n in ns):
        raise BadInput(f"a --search {search} run can only be scored at its own n={run_n}")
    traces = [t for r in records for t in r["traces"] if t["num_steps"] and t.get("first_error") is not None]
    if not traces:
        raise BadInput("no trace with exact labels (exact step labels exist for arith-v1 questions only)")
    table = []
    for n in ns:
        values, exact, rolled_values, rolled_exact = [], [], [], []
        binary_values, full_rollouts, binary_rollouts = [], 0, 0
        for t in traces:
            v = _trace_values(t, n if search == "full" else None)
            e = exact_labels(t["first_error"], t["num_steps"])
            values += v
            exact += e
            rolled_values += v[:-1]
            rolled_exact += e[:-1]
            if search == "full":
                b, visits = simulate_binary(v)
                binary_values += b
                full_rollouts += (t["num_steps"] - 1) * n
                binary_rollouts += visits * n
        entry: dict[str, Any] = {"n": n, **score(values, exact), "rolled_out": score(rolled_values, rolled_exact)}
        if search == "full":
            entry["binary"] = {
                "rollouts_full": full_rollouts,
                "rollouts_binary": binary_rollouts,
                "rollout_ratio": full_rollouts / binary_rollouts if binary_rollouts else None,
                "hard_agreement_with_full": _accuracy(
                    [int(x > 0) for x in binary_values], [int(x > 0) for x in values]
                ),
                "mean_abs_dv": _mean([abs(x - y) for x, y in zip(binary_values, values, strict=True)]),
                "vs_exact": score(binary_values, exact),
            }
        table.append(entry)
    return {"traces": len(traces), "run_n": run_n, "search": search, "table": table}


def _f(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def agreement_markdown(result: dict[str, Any]) -> str:
    """The table as Markdown: one row per N."""
    head = (
        "| N | prefixes | exact wrong | hard acc | hard kappa | acc (V>=0.5) | kappa (V>=0.5) | mean V wrong "
        "| mean V right | rolled-out hard acc | rolled-out kappa |"
    )
    lines = [head, "|" + "---:|" * 11]
    for e in result["table"]:
        r = e["rolled_out"]
        lines.append(
            f"| {e['n']} | {e['prefixes']} | {e['exact_wrong']} | {_f(e['hard']['accuracy'], True)} | "
            f"{_f(e['hard']['kappa'])} | {_f(e['at_half']['accuracy'], True)} | {_f(e['at_half']['kappa'])} | "
            f"{_f(e['mean_v_wrong'])} | {_f(e['mean_v_right'])} | {_f(r['hard']['accuracy'], True)} | "
            f"{_f(r['hard']['kappa'])} |"
        )
    if any("binary" in e for e in result["table"]):
        lines += [
            "",
            "| N | rollouts full | rollouts binary | ratio | hard agreement with full | mean abs dV | binary hard acc "
            "| binary kappa |",
            "|" + "---:|" * 8,
        ]
        for e in result["table"]:
            b = e.get("binary")
            if b:
                lines.append(
                    f"| {e['n']} | {b['rollouts_full']} | {b['rollouts_binary']} | {_f(b['rollout_ratio'])} | "
                    f"{_f(b['hard_agreement_with_full'], True)} | {_f(b['mean_abs_dv'])} | "
                    f"{_f(b['vs_exact']['hard']['accuracy'], True)} | {_f(b['vs_exact']['hard']['kappa'])} |"
                )
    return "\n".join(lines) + "\n"


def write_agreement(out, ns: Sequence[int] | None = None) -> dict[str, Any]:
    """Score the run in ``out`` and write ``out/agreement.json`` and ``out/agreement.md``."""
    from pathlib import Path

    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.jsonl import write_json
    from posttrainlab.label.mc.work import read_work

    config, records = read_work(out)
    run_n = int(config["n"])
    if ns is None:
        ns = sorted({n for n in (4, 8, 16) if n <= run_n} | {run_n}) if config.get("search") == "full" else [run_n]
    result = agreement(records, list(ns), config)
    result["problems"] = len(records)
    write_json(Path(out) / "agreement.json", result)
    write_text(Path(out) / "agreement.md", agreement_markdown(result))
    return result


__all__ = ["agreement", "agreement_markdown", "cohen_kappa", "score", "write_agreement"]
