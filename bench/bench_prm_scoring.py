"""PRM scoring: all steps of a solution in one forward pass vs each prefix as its own sequence.

A PRM that reads a score at every step separator can score a whole solution at once when the model
is causal; scoring prefix by prefix (what a judge-style verdict model needs) re-encodes 1 + 2 + ... + n
steps. Same model (the tiny ~2.0M default shape with a fresh 2-label token-classification head), the
same synthetic solutions, batches of the same number of sequences. Prints steps/s both ways, the
largest score difference (float noise), and, last, the ratio.

    .venv/bin/python bench/bench_prm_scoring.py
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

SOLUTIONS = 16
STEPS = 6
BATCH = 8


def solutions(seed: int = 0) -> list[tuple[str, list[str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(SOLUTIONS):
        total = rng.randint(1, 50)
        question, steps = f"Start at {total} and add {STEPS - 1} numbers. What is the total?", []
        for _ in range(STEPS - 1):
            a = rng.randint(1, 30)
            steps.append(f"{total} + {a} = {total + a}.")
            total += a
        out.append((question, steps + [f"Answer: {total}"]))
    return out


def timed(name: str, fn, items) -> tuple[float, list[list[float]]]:
    fn(items[:1])  # warm-up
    t0 = time.perf_counter()
    scores = fn(items)
    seconds = time.perf_counter() - t0
    n = sum(len(s) for _, s in items)
    print(f"{name:<22}: {n} steps in {seconds:6.2f} s = {n / seconds:8.1f} steps/s")
    return n / seconds, scores


def main() -> None:
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    from posttrainlab.models.tiny import TinyModelConfig, init_model
    from posttrainlab.prm import PRM

    with tempfile.TemporaryDirectory() as d:
        base = init_model(TinyModelConfig(), Path(d) / "tiny")
        torch.manual_seed(0)
        AutoModelForTokenClassification.from_pretrained(base, num_labels=2).save_pretrained(Path(d) / "prm")
        AutoTokenizer.from_pretrained(base).save_pretrained(Path(d) / "prm")
        prm = PRM.from_pretrained(Path(d) / "prm", device="cpu")
        items = solutions()
        one, a = timed("one pass per solution", lambda xs: prm.score_batch(xs, batch_size=BATCH), items)
        each, b = timed("each prefix separately", lambda xs: prm.score_prefixes_batch(xs, batch_size=BATCH), items)
        diff = max(abs(x - y) for sa, sb in zip(a, b, strict=True) for x, y in zip(sa, sb, strict=True))
        print(f"largest |score difference| = {diff:.1e}")
        print(f"one pass / each prefix steps/s: {one / each:.2f}x")


if __name__ == "__main__":
    main()
