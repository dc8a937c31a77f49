"""The main job's training stages under a neighbour: pretrain, SFT and PRM training, alone and beside a busy process.

A machine of the lab's kind has 2 cores. The main job's time (README "Presets") is measured on idle cores; issue #38
measured it at 5,782 s instead of ~1,800 with light jobs beside it. This bench answers how much a neighbour costs
each training stage of the main job, with the real commands and the default thread policy (``posttrainlab.threads``:
``OMP_WAIT_POLICY=PASSIVE``), each for a fixed amount of work:

- pretrain: ``posttrain model pretrain`` on a small corpus (the tiny base's shape and recipe, one epoch);
- sft: ``posttrain train sft`` with ``configs/arith/sft.yaml`` from a random tiny model, ``--steps`` steps;
- prm: ``posttrain train prm`` with the main job's PRM (result head, policy format) on arith-prm solutions sampled
  from that model and labelled on every line, ``--steps`` steps.

Each runs alone, then beside one neighbour at a time: ``spinner`` (a busy loop holding one core) and ``io`` (a
``git status``/``pip install``-like job: walks the venv, reads and hashes every file, over and over). Prints each
stage's seconds, then the slowdown beside each neighbour (beside / alone; 1.0 = it costs nothing) and, last, the
three stages together against the 1.5x the README allows. Run it on an otherwise idle machine (~6 min):

    .venv/bin/python bench/bench_neighbour.py
    .venv/bin/python bench/bench_neighbour.py --steps 20 --corpus 2000 --stages sft      # a quick look
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POSTTRAIN = [sys.executable, "-m", "posttrainlab"]
SPINNER = "while True: pass"
IO_JOB = """
import hashlib, os, sys
root = sys.argv[1]
while True:
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(folder, name), 'rb') as f:
                    hashlib.sha1(f.read()).hexdigest()
            except OSError:
                pass
"""
NEIGHBOURS = {"spinner": [sys.executable, "-c", SPINNER], "io": [sys.executable, "-c", IO_JOB, sys.prefix]}
STAGES = ("pretrain", "sft", "prm")


def run(cmd: list[str], what: str) -> float:
    """Seconds ``cmd`` took; exits with its output when it fails."""
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return time.perf_counter() - start


def setup(work: Path, steps: int) -> None:
    """arith-v1, a random tiny model of the base's shape, and arith-prm solutions sampled from it."""
    run([*POSTTRAIN, "data", "prepare", "--out", str(work / "data")], "data prepare")
    run([*POSTTRAIN, "model", "init", "--out", str(work / "init")], "model init")
    run([*POSTTRAIN, "data", "arith-prm", "--policy", str(work / "init"), "--data", str(work / "data"), "--out",
         str(work / "arith-prm"), "--k", "2", "--limit", str(max(8, steps)), "--labels", "every-step",
         "--missing-answer", "explicit", "--max-new-tokens", "48", "--no-progress"], "data arith-prm")  # fmt: skip


def command(stage: str, work: Path, out: Path, steps: int, corpus: int) -> list[str]:
    if stage == "pretrain":
        return [*POSTTRAIN, "model", "pretrain", "--out", str(out), f"corpus.size={corpus}", "train.epochs=1",
                "train.learning_rate=0.0005", "train.warmup_ratio=0.1", "train.save_steps=100000",
                "heldout_per_op=5"]  # fmt: skip
    common = [f"output_dir={out}", f"optim.max_steps={steps}", "optim.save_steps=100000", "optim.logging_steps=100"]
    if stage == "sft":
        return [*POSTTRAIN, "train", "sft", "--config", "configs/arith/sft.yaml", f"model={work / 'init'}",
                f"dataset.path={work / 'data'}", *common]  # fmt: skip
    data = work / "arith-prm" / "math_shepherd"
    return [*POSTTRAIN, "train", "prm", "--config", "configs/prm/step.yaml", f"model={work / 'init'}",
            f"dataset.path={data / 'train.jsonl'}", "dataset.format=math-shepherd", "head=result",
            "input_format=policy", "optim.batch_size=16", "optim.learning_rate=0.0001", *common]  # fmt: skip


def measure(stage: str, work: Path, steps: int, corpus: int, neighbour: str | None, tag: str) -> float:
    out = work / f"{stage}-{tag}"
    proc = None
    if neighbour is not None:
        proc = subprocess.Popen(NEIGHBOURS[neighbour], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # the neighbour is busy before the stage starts
    try:
        return run(command(stage, work, out, steps, corpus), f"{stage} ({neighbour or 'alone'})")
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60, help="SFT and PRM optimizer steps")
    ap.add_argument("--corpus", type=int, default=6000, help="pretraining corpus size (one epoch)")
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated subset of pretrain,sft,prm")
    ap.add_argument("--neighbours", default=",".join(NEIGHBOURS), help="comma-separated subset of spinner,io")
    args = ap.parse_args()
    stages = [s for s in args.stages.split(",") if s]
    neighbours = [n for n in args.neighbours.split(",") if n]
    unknown = [s for s in stages if s not in STAGES] + [n for n in neighbours if n not in NEIGHBOURS]
    if unknown:
        sys.exit(f"unknown stage or neighbour: {', '.join(unknown)}")
    os.environ.pop("OMP_NUM_THREADS", None)  # the default thread policy, as `make quickstart` runs it
    with tempfile.TemporaryDirectory(prefix="bench-neighbour-") as tmp:
        work = Path(tmp)
        setup(work, args.steps)
        seconds: dict[str, dict[str, float]] = {}
        for stage in stages:
            seconds[stage] = {"alone": measure(stage, work, args.steps, args.corpus, None, "alone")}
            for n in neighbours:
                seconds[stage][n] = measure(stage, work, args.steps, args.corpus, n, n)
            row = "  ".join(f"{k} {v:6.1f} s" for k, v in seconds[stage].items())
            print(f"{stage:9s} {row}", flush=True)
    print("slowdown beside a neighbour (beside / alone; 1.0 = no cost):")
    for stage, s in seconds.items():
        print(f"  {stage:9s} " + "  ".join(f"{n} {s[n] / s['alone']:.2f}x" for n in neighbours))
    alone = sum(s["alone"] for s in seconds.values())
    for n in neighbours:
        ratio = sum(s[n] for s in seconds.values()) / alone
        verdict = "within" if ratio <= 1.5 else "beyond"
        print(f"all stages beside {n}: {ratio:.2f}x alone ({verdict} the README's 1.5x)")


if __name__ == "__main__":
    main()
