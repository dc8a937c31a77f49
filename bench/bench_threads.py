"""torch's thread policy on a shared CPU: steps/s of one lab workload per policy, alone and beside a busy process.

Each policy of ``posttrainlab.threads.CANDIDATES`` (torch's default of one thread per core; 1 thread; the
default count with ``OMP_WAIT_POLICY=PASSIVE``; with ``GOMP_SPINCOUNT=10000``) runs in a fresh subprocess,
because GNU OpenMP reads its variables once, when torch is imported: the subprocess starts from an
environment without any ``OMP_*`` / ``GOMP_*`` / ``MKL_NUM_THREADS`` (so a caller's ``OMP_NUM_THREADS=1``
does not leak in), applies the policy with ``configure_threads`` exactly as a ``posttrain`` command does, and
only then imports torch. libgomp's own report (``OMP_DISPLAY_ENV=VERBOSE``) gives the spin count it read.

The workload, in each subprocess, on the quickstart's tiny model (configs/models/tiny.yaml's shape, ~2.0M
parameters, random init: speed does not depend on the weights):

- train: one AdamW step of forward + backward on a batch of 16 x 128 random tokens (the tiny base's
  pretraining batch, configs/models/tiny-base.yaml);
- generate: one greedy ``generate`` call, 16 prompts of 40 tokens, exactly 16 new tokens each (KV cache),
  the kind of work ``eval policy`` does.

Each is timed for ``--seconds`` (after one warm-up step; at least two timed steps) alone, then again while
``--competitors`` busy-loop processes (``python -c 'while True: pass'``) hold cores. Prints steps/s, then the
ratios: beside / alone per policy (1.0 = a busy neighbour costs nothing) and each policy / default, alone
and beside (above 1 = faster than torch's default), and last the best policy beside a busy process.
Run it on an otherwise idle machine: a job already running makes "alone" mean "beside that job".

    .venv/bin/python bench/bench_threads.py                 # every candidate, 6 s per measurement, ~2.5 min
    .venv/bin/python bench/bench_threads.py --quick         # default vs passive, small batches, ~25 s: a smoke run
    .venv/bin/python bench/bench_threads.py --policies default,threads1 --seconds 10 --json threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

WORKLOADS = ("train", "generate")
CLEARED = ("OMP_", "GOMP_", "KMP_", "MKL_NUM_THREADS")  # inherited settings that would change what is measured
BUSY = "while True: pass"


def timed(step, seconds: float, least: int = 2) -> float:
    """Steps per second of ``step()`` over at least ``seconds`` and ``least`` steps (after one warm-up step)."""
    step()
    done, start = 0, time.perf_counter()
    while done < least or time.perf_counter() - start < seconds:
        step()
        done += 1
    return done / (time.perf_counter() - start)


def workloads(small: bool = False):
    """``{"train": step, "generate": step}`` on the tiny model (module docstring); ``small``: a quarter of the
    batch, for ``--quick``, whose numbers check that the bench runs and are not comparable with a full run."""
    import torch

    from posttrainlab.models.tiny import TinyModelConfig, build_model

    model, tokenizer = build_model(TinyModelConfig())
    gen = torch.Generator().manual_seed(0)
    rows = 4 if small else 16
    batch = torch.randint(0, len(tokenizer), (rows, 128), generator=gen)
    prompts = torch.randint(0, len(tokenizer), (rows, 40), generator=gen)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def train():
        model.train()
        model(input_ids=batch, labels=batch).loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)

    def generate():
        model.eval()
        with torch.inference_mode():
            model.generate(
                input_ids=prompts,
                attention_mask=torch.ones_like(prompts),
                max_new_tokens=16,
                min_new_tokens=16,
                do_sample=False,
            )

    return {"train": train, "generate": generate}


def worker(name: str, seconds: float, competitors: int, small: bool) -> None:
    """One policy, in this fresh process: apply it, import torch, measure alone then beside; print one JSON line."""
    from posttrainlab.threads import CANDIDATES, configure_threads

    configure_threads(policy=CANDIDATES[name])
    import torch

    steps = workloads(small)
    result = {"policy": name, "threads": torch.get_num_threads()}
    for which in ("alone", "beside"):
        busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(competitors if which == "beside" else 0)]
        try:
            time.sleep(0.3 if busy else 0)  # let the competitors get going
            for w in WORKLOADS:
                result[f"{w}_{which}"] = timed(steps[w], seconds, least=1 if small else 2)
        finally:
            for p in busy:
                p.kill()
                p.wait()
    print(json.dumps(result), flush=True)


def measure(name: str, seconds: float, competitors: int, small: bool = False) -> dict:
    """Run ``worker`` in a fresh interpreter with a clean OpenMP environment; add libgomp's spin count."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED)}
    env.update(OMP_DISPLAY_ENV="VERBOSE", TRANSFORMERS_VERBOSITY="error")
    args = [sys.executable, __file__, "--worker", name, "--seconds", str(seconds), "--competitors", str(competitors)]
    args += ["--small"] if small else []
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"policy {name}: worker failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    spin = re.search(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    result["spincount"] = spin.group(1) if spin else "?"
    return result


def report(results: list[dict], competitors: int) -> None:
    from posttrainlab.threads import CANDIDATES

    print(f"\nsteps/s; beside = beside {competitors} busy-loop process(es); cores: {os.cpu_count()}")
    head = f"{'policy':10} {'threads':>7} {'spin':>7}"
    for w in WORKLOADS:
        head += f" | {w + ' alone':>14} {'beside':>8} {'beside/alone':>12}"
    print("policies: " + "; ".join(f"{n} = {CANDIDATES[n].describe()}" for n in (r["policy"] for r in results)))
    print(head)
    for r in results:
        line = f"{r['policy']:10} {r['threads']:>7} {r['spincount']:>7}"
        for w in WORKLOADS:
            a, b = r[f"{w}_alone"], r[f"{w}_beside"]
            line += f" | {a:14.2f} {b:8.2f} {b / a:11.2f}x"
        print(line)
    base = next((r for r in results if r["policy"] == "default"), None)
    if base is None:
        return
    cols = [f"{w}_{which}" for w in WORKLOADS for which in ("alone", "beside")]
    print("\npolicy / default, steps/s (above 1: faster than torch's default)")
    print(f"{'policy':10} " + " ".join(f"{c:>16}" for c in cols))
    for r in results:
        if r is not base:
            print(f"{r['policy']:10} " + " ".join(f"{r[c] / base[c]:15.2f}x" for c in cols))
    best = max(results, key=lambda r: sum(r[f"{w}_beside"] / base[f"{w}_beside"] for w in WORKLOADS))
    print(
        f"\nbest beside a busy process: {best['policy']} (train {best['train_beside'] / base['train_beside']:.2f}x, "
        f"generate {best['generate_beside'] / base['generate_beside']:.2f}x torch's default; alone "
        f"{best['train_alone'] / base['train_alone']:.2f}x / {best['generate_alone'] / base['generate_alone']:.2f}x)"
    )


def main(argv: list[str] | None = None) -> None:
    from posttrainlab.threads import CANDIDATES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=None, help=f"comma-separated, of {', '.join(CANDIDATES)} [all]")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per measurement [6]")
    parser.add_argument("--competitors", type=int, default=1, help="busy-loop processes beside the workload [1]")
    parser.add_argument(
        "--quick", action="store_true", help="default vs passive, 0.5 s each, quarter batches: checks the bench runs"
    )
    parser.add_argument("--json", default=None, help="also write the results to this file")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--small", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.seconds, args.competitors, args.small)
    if args.quick:
        args.seconds, args.policies = 0.5, args.policies or "default,passive"
    names = [n.strip() for n in (args.policies or ",".join(CANDIDATES)).split(",") if n.strip()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown or not names or args.seconds <= 0 or args.competitors < 1:
        parser.error(f"--policies: choose from {', '.join(CANDIDATES)}; --seconds > 0; --competitors >= 1")
    results = []
    for name in names:
        start = time.perf_counter()
        results.append(measure(name, args.seconds, args.competitors, small=args.quick))
        print(f"{name}: measured in {time.perf_counter() - start:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            settings = {"competitors": args.competitors, "seconds": args.seconds, "quick": args.quick}
            json.dump({**settings, "results": results}, f, indent=2)
    report(results, args.competitors)


if __name__ == "__main__":
    main()
