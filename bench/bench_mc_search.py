"""Binary search (OmegaPRM-style) against full Monte-Carlo labelling: rollouts spent, and agreement.

Both ways run ``label.mc.run_mc`` on the same problems and base traces with the same seeds, once with
``search="full"`` (N continuations from every prefix) and once with ``search="binary"`` (bisection for
the first prefix with V = 0; unvisited prefixes get the documented copies). Two settings, no model:

- **long traces**: ``--traces`` synthetic traces of 12-32 steps (Polaris-like lengths), 70% with one
  wrong step at a uniform position; a model-free policy continues a clean prefix correctly with
  probability 0.6 and a prefix holding the wrong step with probability 0.03 (recovery);
- **arith-v1**: 100 arith-v1 problems, 2 base traces each, from ``ScriptedArithPolicy`` (per-step error
  rate 0.2, recovery 0.05): traces of 2-4 steps, where bisection has little room.

For each: rollouts of each way, hard-label (V > 0) agreement of binary with full over all prefixes,
mean |V_binary - V_full|, seconds. Prints the long-trace rollout ratio (full / binary) last.

    .venv/bin/python bench/bench_mc_search.py [--n 8] [--traces 300]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from posttrainlab.generation.shared_prefix import PrefixRequest

QUESTION = "Chain problem {i}: carry out every step, then answer 1."


class ChainPolicy:
    """Continues a prefix of 'step k ok' / 'step k WRONG' lines: right with p_clean, or p_recover after WRONG."""

    def __init__(self, p_clean: float = 0.6, p_recover: float = 0.03):
        self.p_clean, self.p_recover = p_clean, p_recover

    def sample_continuations(self, requests: list[PrefixRequest], *, n: int = 1, **kw) -> list[list[str]]:
        out = []
        for r in requests:
            rng = random.Random(r.seed)
            p = self.p_recover if "WRONG" in r.prefix else self.p_clean
            out.append(["Answer: 1" if rng.random() < p else "Answer: 0" for _ in range(n)])
        return out


def chain_traces(count: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        length = rng.randint(12, 32)
        bad = rng.randrange(length - 1) if rng.random() < 0.7 else None
        steps = [f"step {k} {'WRONG' if k == bad else 'ok'}" for k in range(length - 1)]
        steps.append("Answer: 0" if bad is not None else "Answer: 1")
        rows.append({"id": f"chain-{i:04d}", "question": QUESTION.format(i=i), "answer": 1, "steps": steps})
    return rows


def arith_problems(count: int) -> list[dict]:
    from posttrainlab.data.arith.problems import CATEGORIES, draw

    rng, taken = random.Random(1), set()
    rows = []
    for i in range(count):
        p = draw(CATEGORIES[i % len(CATEGORIES)], rng, taken)
        rows.append({"id": f"arith-{i:04d}", "prompt": p.prompt, "answer": p.answer})
    return rows


def compare(name: str, rows: list[dict], policy, n: int, samples: int, tmp: Path) -> float:
    from posttrainlab.label.mc import MCConfig, OutputConfig, load_problems, read_work, run_mc

    data = tmp / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    problems = load_problems(str(data))
    result = {}
    for search in ("full", "binary"):
        start = time.perf_counter()
        config = MCConfig(n=n, samples_per_problem=samples, search=search)
        summary = run_mc(
            problems, policy, tmp / f"{name}-{search}", config=config, output=OutputConfig(val_problems=0),
            progress=False,
        )  # fmt: skip
        _, records = read_work(tmp / f"{name}-{search}")
        values = {
            (r["id"], t["sample_index"], p["step_idx"]): p["value"]
            for r in records
            for t in r["traces"]
            for p in t["prefixes"]
        }
        root = sum(len(r["root"]["correct"]) for r in records)
        result[search] = (summary["rollouts"] - root, values, time.perf_counter() - start)
    (full_rollouts, full, t_full), (bin_rollouts, binary, t_bin) = result["full"], result["binary"]
    agree = sum((full[k] > 0) == (binary[k] > 0) for k in full) / len(full)
    mean_dv = sum(abs(full[k] - binary[k]) for k in full) / len(full)
    traces = len({k[:2] for k in full})
    print(
        f"{name}: {traces} traces, {len(full)} prefixes, N={n}; prefix rollouts full {full_rollouts} "
        f"({t_full:.1f} s), binary {bin_rollouts} ({t_bin:.1f} s); hard-label agreement {100 * agree:.1f}%, "
        f"mean |dV| {mean_dv:.3f}; ratio {full_rollouts / bin_rollouts:.2f}x"
    )
    return full_rollouts / bin_rollouts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="continuations per prefix")
    parser.add_argument("--traces", type=int, default=300, help="synthetic long traces")
    args = parser.parse_args(argv)

    from posttrainlab.label.mc.scripted import ScriptedArithPolicy

    print("rollouts counted from the prefixes only (both ways also draw N from the empty prefix per problem)")
    with tempfile.TemporaryDirectory() as tmp:
        arith = compare("arith-v1", arith_problems(100), ScriptedArithPolicy(0.2, 0.05), args.n, 2, Path(tmp))
        long = compare("long traces", chain_traces(args.traces), ChainPolicy(), args.n, 1, Path(tmp))
    print(f"rollouts full / binary: arith-v1 {arith:.2f}x, long traces {long:.2f}x")


if __name__ == "__main__":
    main()
