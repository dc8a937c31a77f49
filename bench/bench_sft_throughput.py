"""SFT throughput on CPU: TRL's defaults vs posttrainlab's, and TRL's bfd packing.

TRL's default is padded batches in random order with activation (gradient) checkpointing on;
posttrainlab's is length-grouped batches with checkpointing off. Same model (the tiny ~2.0M default
shape, random init), the same 384 arith-v1 sft_train_3k rows, same batch size, one epoch each; prints
real (non-pad) tokens/s for each way, the switches one at a time, and, last, the ratio of
posttrainlab's default to TRL's default.

    .venv/bin/python bench/bench_sft_throughput.py
    .venv/bin/python bench/bench_sft_throughput.py --model smollm2   # the real model: LoRA as in its preset,
                                                                    # 8 steps of 8, TRL default vs ours only
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

STEPS = 24
BATCH = 16


def run(name: str, model_dir: Path, data_dir: Path, work: Path, steps: int = STEPS, batch: int = BATCH, **switches):
    from posttrainlab.config import load_config
    from posttrainlab.train.recipes import SFTRecipe
    from posttrainlab.train.sft import build_trainer

    recipe = load_config(
        SFTRecipe,
        None,
        [f"model={model_dir}", f"output_dir={work / name}", f"dataset.path={data_dir}", "dataset.split=sft_train_3k",
         f"dataset.limit={steps * batch}", "optim.epochs=1", f"optim.batch_size={batch}",
         "optim.save_steps=100000", "optim.logging_steps=1000", "optim.learning_rate=0.0005"]
        + [f"{k}={v}" for k, v in switches.items()],
    )  # fmt: skip
    trainer, _ = build_trainer(recipe)
    # every row is seen once (one epoch); packing regroups the same tokens into fewer rows
    real = sum(len(ids) for ids in trainer.train_dataset["input_ids"])
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    print(f"{name:<32}: {real:>8} real tokens in {seconds:6.1f} s = {real / seconds:7.0f} tokens/s")
    return real / seconds


def real_model(data: Path, work: Path) -> None:
    """SmolLM2-135M-Instruct with the smollm2 preset's LoRA: TRL's default way against posttrainlab's."""
    from posttrainlab.models.gguf_import import import_model

    model, _, _ = import_model("smollm2-135m-instruct")
    lora = {"lora.enabled": "true", "lora.r": 16, "lora.alpha": 32, "lora.dropout": 0.0, "optim.learning_rate": 0.001}
    sizes = {"steps": 8, "batch": 8}
    trl_default = run(
        "TRL default (random, ckpt)", model, data, work, length_grouping=False,
        **{"optim.activation_checkpointing": True}, **lora, **sizes,
    )  # fmt: skip
    ours = run("length-grouped, no ckpt (ours)", model, data, work, length_grouping=True, **lora, **sizes)
    print(f"posttrainlab default (grouped, no ckpt) / TRL default on SmolLM2-135M (LoRA): {ours / trl_default:.2f}x")


def main() -> None:
    import argparse

    from posttrainlab.data.arith.release import prepare
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "smollm2"), default="tiny", help="the model to train [tiny]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        data = work / "arith-v1"
        prepare(data)
        if args.model == "smollm2":
            real_model(data, work)
            return
        model = init_model(TinyModelConfig(), work / "tiny")
        ckpt = {"optim.activation_checkpointing": True}
        trl_default = run("TRL default (random, ckpt)", model, data, work, length_grouping=False, **ckpt)
        no_ckpt = run("random, no ckpt", model, data, work, length_grouping=False)
        grouped_ckpt = run("length-grouped, ckpt", model, data, work, length_grouping=True, **ckpt)
        ours = run("length-grouped, no ckpt (ours)", model, data, work, length_grouping=True)
        packed = run("TRL bfd packing, ckpt", model, data, work, length_grouping=False, packing=True, **ckpt)
        print(f"packing / TRL default: {packed / trl_default:.2f}x")
        print(f"checkpointing off alone / TRL default: {no_ckpt / trl_default:.2f}x")
        print(f"length grouping alone / TRL default: {grouped_ckpt / trl_default:.2f}x")
        print(f"posttrainlab default (grouped, no ckpt) / TRL default: {ours / trl_default:.2f}x")


if __name__ == "__main__":
    main()
