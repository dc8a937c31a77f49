"""Generation on the real model (SmolLM2-135M-Instruct): posttrain's backend against plain ``model.generate``,
and how far both are from what memory bandwidth allows.

Work: the first 25 arith-v1 test prompts under the model's chat template, one batch of 25, greedy,
``max_new_tokens=64`` (the ``eval policy`` setting of the smollm2 preset). Ways, one run each:

- ``model.generate``: the HF way a user would write it (``apply_chat_template``, left padding, greedy);
- ``posttrain``: ``TransformersBackend.generate`` (what ``eval policy`` runs), float32;
- ``posttrain bf16``: the same in bfloat16 (other rounding: outputs may differ, the count of differing ones
  is printed);
- ``posttrain static cache``: ``cache_implementation="static"`` (a preallocated KV cache);
- ``posttrain batch 50``: 50 prompts in one batch.

A decode step of a batch reads every weight once, so memory bandwidth bounds the steps per second at
``copy bandwidth / weight bytes``; the copy bandwidth is measured here (a 256 MB tensor copy, read + write).
Each way prints its decode steps/s and that share of the bound. Ratios against ``model.generate`` last.

    .venv/bin/python bench/bench_real_generation.py [--threads N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

N_PROMPTS = 25
MAX_NEW_TOKENS = 64


def copy_bandwidth_gb_s() -> float:
    """Bytes moved per second by a 256 MB float32 copy (read + write), best of 5."""
    import torch

    src = torch.ones(64 * 1024 * 1024)
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.numel() * 4 / best / 1e9


def hf_generate(model, tokenizer, prompts) -> tuple[float, list[str], int]:
    import torch

    tokenizer.padding_side = "left"
    batch = tokenizer.apply_chat_template(
        prompts, add_generation_prompt=True, return_tensors="pt", return_dict=True, padding=True
    )
    t = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            **batch, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, top_k=None, top_p=None, temperature=None
        )
    elapsed = time.perf_counter() - t
    new = out[:, batch["input_ids"].shape[1] :]
    texts = []
    for row in new.tolist():
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id)]
        texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return elapsed, texts, new.shape[1]


def differing(texts: list[str], reference: list[str]) -> int:
    """How many of the first ``len(reference)`` outputs differ from the reference."""
    return sum(a != b for a, b in zip(texts[: len(reference)], reference, strict=True))


def ours(backend, prompts) -> tuple[float, list[str]]:
    t = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=MAX_NEW_TOKENS)
    return time.perf_counter() - t, [o[0] for o in out]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads [torch's default]")
    args = parser.parse_args(argv)

    import torch

    from posttrainlab.data.arith.release import prepare
    from posttrainlab.data.loading import load_split
    from posttrainlab.generation.prompts import as_messages
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.models.gguf_import import import_model
    from posttrainlab.models.loading import load_causal_lm

    if args.threads:
        torch.set_num_threads(args.threads)
    folder, _, _ = import_model("smollm2-135m-instruct")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "arith-v1"
        prepare(data)
        records = load_split(str(data), split="test", limit=2 * N_PROMPTS)
    prompts = [as_messages(r["prompt"]) for r in records]
    model, tokenizer = load_causal_lm(str(folder))
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = copy_bandwidth_gb_s()
    bound = bandwidth * 1e9 / weight_bytes  # decode steps/s if every step only read the weights once
    threads = torch.get_num_threads()
    print(f"model: SmolLM2-135M-Instruct, {weight_bytes / 1e6:.0f} MB of float32 weights; threads {threads}")
    print(f"copy bandwidth {bandwidth:.1f} GB/s -> memory bound {bound:.1f} decode steps/s (float32)")
    print(f"work: {N_PROMPTS} arith-v1 test prompts, one batch, greedy, max_new_tokens={MAX_NEW_TOKENS}")

    backend = TransformersBackend(model, tokenizer, batch_size=N_PROMPTS, progress=False)
    backend.generate(prompts[:2], max_new_tokens=4)  # warm-up
    t_hf, hf_texts, steps = hf_generate(model, tokenizer, prompts[:N_PROMPTS])
    rows = [("model.generate", t_hf, steps, N_PROMPTS, bound, None)]
    t, texts = ours(backend, prompts[:N_PROMPTS])
    rows.append(("posttrain", t, steps, N_PROMPTS, bound, differing(texts, hf_texts)))

    model.generation_config.cache_implementation = "static"
    t, texts = ours(backend, prompts[:N_PROMPTS])
    rows.append(("posttrain static cache", t, steps, N_PROMPTS, bound, differing(texts, hf_texts)))
    model.generation_config.cache_implementation = None

    backend.batch_size = 2 * N_PROMPTS
    t, texts = ours(backend, prompts)
    rows.append(("posttrain batch 50", t, steps, 2 * N_PROMPTS, bound, differing(texts, hf_texts)))

    bf16 = TransformersBackend(model.to(torch.bfloat16), tokenizer, batch_size=N_PROMPTS, progress=False)
    bf16.generate(prompts[:2], max_new_tokens=4)
    t, texts = ours(bf16, prompts[:N_PROMPTS])
    rows.append(("posttrain bf16", t, steps, N_PROMPTS, 2 * bound, differing(texts, hf_texts)))

    print(f"{'way':<24} {'seconds':>8} {'requests/s':>11} {'steps/s':>8} {'of bound':>9}  outputs differing")
    for name, seconds, n_steps, n, way_bound, diff in rows:
        rate = n_steps / seconds
        note = "(reference)" if diff is None else f"{diff} of {N_PROMPTS}"
        print(f"{name:<24} {seconds:8.2f} {n / seconds:11.2f} {rate:8.2f} {rate / way_bound:9.1%}  {note}")
    for name, seconds, _, n, _, _ in rows[1:]:
        print(f"ratio {name} / model.generate requests/s: {(n / seconds) / (N_PROMPTS / t_hf):.2f}x")


if __name__ == "__main__":
    main()
