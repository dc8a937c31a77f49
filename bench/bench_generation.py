"""Batched KV-cached generation against one-at-a-time generation, on the same model and prompts.

The model is the tiny arith model at its default size (``TinyModelConfig()``, ~2.0M parameters,
random init: speed does not depend on what the weights say); the prompts are the first 64 arith-v1
test problems, rendered with the chat template as ``posttrain eval policy`` renders them. Both ways
run through ``TransformersBackend`` with the KV cache, greedy, ``max_new_tokens=32``: once with
``--batch-size`` prompts per ``generate`` call (length-sorted, left-padded), once with one prompt per
call. Prints requests/s for each, whether the outputs agree, and the ratio last.

    .venv/bin/python bench/bench_generation.py [--batch-size 32] [--threads N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

N_PROMPTS = 64
MAX_NEW_TOKENS = 32


def timed(backend, prompts, batch_size: int) -> tuple[float, list[list[str]]]:
    backend.batch_size = batch_size
    start = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=MAX_NEW_TOKENS)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32, help="prompts per generate call when batched")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads [torch's default]")
    args = parser.parse_args(argv)

    import torch

    from posttrainlab.data.arith.release import prepare
    from posttrainlab.data.loading import load_split
    from posttrainlab.generation.prompts import as_messages
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.models.tiny import TinyModelConfig, build_model, count_parameters

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "arith-v1"
        prepare(data)
        records = load_split(str(data), split="test", limit=N_PROMPTS)
    prompts = [as_messages(r["prompt"]) for r in records]
    model, tokenizer = build_model(TinyModelConfig())
    backend = TransformersBackend(model, tokenizer, progress=False)
    backend.generate(prompts[:4], max_new_tokens=4)  # warm-up: first-call allocations and lazy imports

    t_batched, batched = timed(backend, prompts, args.batch_size)
    t_single, single = timed(backend, prompts, 1)
    new_chars = sum(len(out[0]) for out in batched)
    print(
        f"model: tiny qwen2, {count_parameters(model) / 1e6:.1f}M parameters; torch threads {torch.get_num_threads()}"
    )
    print(
        f"work: {len(prompts)} arith-v1 test prompts, greedy, max_new_tokens={MAX_NEW_TOKENS} ({new_chars} chars out)"
    )
    print(f"one at a time (batch 1)  : {t_single:7.2f} s  {len(prompts) / t_single:7.2f} requests/s")
    print(f"batched (batch {args.batch_size:<3})      : {t_batched:7.2f} s  {len(prompts) / t_batched:7.2f} requests/s")
    print(f"same outputs             : {batched == single}")
    print(f"ratio batched / one-at-a-time requests/s: {t_single / t_batched:.2f}x")


if __name__ == "__main__":
    main()
