"""PRM training on MC-value rows: one sequence per trace (grouped) vs one sequence per prefix row.

Polaris MC ships one row per prefix, so a trace of n steps read row by row costs 1 + 2 + ... + n step
encodings; grouped, it costs n. Both give the same loss (causal attention: the logits at step k's
separator do not depend on later tokens; tests/prm/test_prm_grouping.py proves it to float tolerance).
Same model (the tiny ~2.0M default shape, random init), the same synthetic MC-value rows, same batch
size in sequences, one epoch each on ``transformers.Trainer`` through ``posttrain train prm``'s own
``build_trainer``. Prints the loss both ways at the start (equal), seconds per epoch, and, last, the ratio.

    .venv/bin/python bench/bench_prm_grouped.py
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

TRACES = 8
STEPS = 6
BATCH = 8


def mc_rows(seed: int = 0) -> list[dict]:
    """Polaris-schema rows (plus ``question`` and ``steps``) for TRACES arithmetic traces of STEPS steps."""
    rng = random.Random(seed)
    rows = []
    for t in range(TRACES):
        total = rng.randint(1, 50)
        steps, question = [], f"Start at {total}, then apply {STEPS - 1} operations; what is the result?"
        for _ in range(STEPS - 1):
            a = rng.randint(1, 30)
            steps.append(f"{total} + {a} = {total + a}.")
            total += a
        steps.append(f"Answer: {total}")
        for j in range(STEPS + 1):
            v = round(rng.random(), 3)
            rows.append({
                "messages": [{"role": "user", "content": question + "\n" + "\n".join(steps[:j])},
                             {"role": "assistant", "content": "yes"}],
                "reward": v, "correct": v >= 0.5, "label": "yes", "id": f"q{t}", "source": "bench",
                "sample_index": 0, "step_idx": j, "num_steps": STEPS, "loss_weight": 1.0, "enable_thinking": False,
                "question": question, "steps": steps,
            })  # fmt: skip
    return rows


def run(mode: str, model_dir: Path, data: Path, work: Path) -> tuple[float, float]:
    import torch

    from posttrainlab.config import load_config
    from posttrainlab.train.prm import batch_loss, build_trainer, collate
    from posttrainlab.train.prm_recipe import PRMRecipe

    recipe = load_config(
        PRMRecipe,
        None,
        [f"model={model_dir}", f"output_dir={work / mode}", f"dataset.path={data}", "dataset.format=mc-value",
         f"dataset.mc_rows={mode}", "head=verdict", "supervision=soft", "optim.epochs=1",
         f"optim.batch_size={BATCH}", "optim.save_steps=100000", "optim.logging_steps=1000"],
    )  # fmt: skip
    trainer, n, _ = build_trainer(recipe)
    examples = trainer.train_dataset
    tokens = sum(len(ex["input_ids"]) for ex in examples)
    model = trainer.model.eval()
    with torch.no_grad():
        loss = batch_loss(model, trainer.prm_head, collate(trainer.processing_class.pad_token_id)(examples), soft=True)
    model.train()
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    print(f"{mode:<8}: {n:>4} sequences, {tokens:>6} tokens, start loss {loss.item():.6f}, {seconds:6.2f} s/epoch")
    return seconds, loss.item()


def main() -> None:
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        data = work / "mc.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in mc_rows()))
        model = init_model(TinyModelConfig(), work / "tiny")
        print(f"{TRACES} traces x {STEPS} steps = {TRACES * (STEPS + 1)} MC-value rows (step_idx 0 has no separator)")
        per_row, loss_rows = run("prefix", model, data, work)
        grouped, loss_grouped = run("grouped", model, data, work)
        print(f"|loss grouped - loss per-row| = {abs(loss_grouped - loss_rows):.2e}")
        print(f"per-row / grouped time per epoch: {per_row / grouped:.2f}x")


if __name__ == "__main__":
    main()
