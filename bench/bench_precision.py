"""bf16 autocast against fp32 on the CPU: the one lever left on the main job's time that is not a smaller experiment.

The main job's time is training (pretraining, SFT, the PRM: ~70% of the stages), and training the tiny model is
compute-bound on 2 cores (fp32 linear layers at ~120 GFLOP/s, profiled 2026-12-07; Python overhead is a few
percent), so only a cheaper number format can make it faster. CPUs with AVX512_BF16 (AMD Zen 4, Intel Cooper Lake
and later) run bf16 matrix products about twice as fast as fp32; without it oneDNN emulates bf16 and is slower.
This bench measures, in one run, on the quickstart's tiny model shape (random init: speed does not depend on the
weights):

- SFT: the lab's trainer (``train.sft.build_trainer``, length-grouped batches) for the same 24 steps of 16
  arith-v1 solutions, fp32 (``optim.bf16=never``) against ``optim.bf16=auto`` (transformers' CPU autocast);
- PRM: the main job's PRM recipe (result head, policy format, length-grouped) for the same 60 steps of 16
  step-labelled solutions (bench/bench_prm_length_grouping.py's rows), fp32 against bf16 autocast;
- generation: one greedy ``generate`` of 64 prompts x 48 new tokens (KV cache), fp32 against autocast.

It prints real (non-pad) tokens/s and seconds for each, then the ratios (above 1: bf16 is faster). The main job's
SFT and PRM train with ``optim.bf16: auto`` since this bench (pretraining and generation stay fp32);
docs/experiments.md "The main job's SFT and PRM under bf16 autocast" says what it gave on each CPU type and what
the switch did to the numbers on five bases.

    .venv/bin/python bench/bench_precision.py      # ~1.5 min on 2 cores
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench_prm_length_grouping import reference_rows
from bench_prm_length_grouping import run as prm_run  # the same PRM measurement as the length-grouping bench
from bench_sft_throughput import run  # the same SFT measurement as the throughput bench


def generation(model_dir: Path, bf16: bool, prompts: int = 64, new_tokens: int = 48) -> float:
    """Seconds for one greedy ``generate`` of ``prompts`` x ``new_tokens`` (after one warm-up call)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ids = torch.randint(3, 200, (prompts, 40), generator=torch.Generator().manual_seed(0))
    kwargs = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        model.generate(ids, **{**kwargs, "max_new_tokens": 4, "min_new_tokens": 4})
        t0 = time.perf_counter()
        model.generate(ids, **kwargs)
        return time.perf_counter() - t0


def main() -> None:
    from posttrainlab.data.arith.release import prepare
    from posttrainlab.models.tiny import TinyModelConfig, init_model
    from posttrainlab.train.launch import cpu_has_bf16

    if not cpu_has_bf16():
        print("this CPU has no native bf16 (avx512_bf16 / amx_bf16 flags): optim.bf16=auto trains in fp32 here,")
        print("so there is nothing to compare (forced bf16 would run oneDNN's emulation, slower than fp32)")
        return
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        data = work / "arith-v1"
        prepare(data)
        model = init_model(TinyModelConfig(), work / "tiny")
        fp32 = run("SFT fp32", model, data, work, **{"optim.bf16": "never"})
        bf16 = run("SFT bf16 autocast", model, data, work, **{"optim.bf16": "auto"})
        rows = work / "prm.jsonl"
        rows.write_text("".join(json.dumps(r) + "\n" for r in reference_rows()))
        prm_run("warm-up", model, rows, work, True)
        prm32 = prm_run("PRM fp32", model, rows, work, True, "optim.bf16=never")
        prm16 = prm_run("PRM bf16", model, rows, work, True, "optim.bf16=auto")
        gen32, gen16 = generation(model, False), generation(model, True)
        print(f"{'generate fp32':<32}: {gen32:6.2f} s")
        print(f"{'generate bf16 autocast':<32}: {gen16:6.2f} s")
        print(f"generation, bf16 autocast / fp32: {gen32 / gen16:.2f}x")
        print(f"PRM training, bf16 autocast / fp32: {prm32 / prm16:.2f}x")
        print(f"SFT training, bf16 autocast / fp32: {bf16 / fp32:.2f}x")


if __name__ == "__main__":
    main()
