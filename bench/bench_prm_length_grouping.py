"""PRM training on CPU: random batches vs length-grouped batches (``PRMRecipe.length_grouping``).

The main job's PRM trains on 12,000 sampled solutions of 1 to 8 lines after a fixed instruction; in random batches
of 16 the padded tokens are 1.41x the real ones (its ``arith-prm/math_shepherd/train.jsonl``, this bench's --data).
transformers' ``group_by_length`` sampler batches similar lengths together. Same model (the tiny ~2.0M default
shape, random init), the same step-labelled solutions (default: arith-v1 ``sft_train_3k`` reference solutions,
every step right, and a copy of each cut after a random number of lines with its last line's result changed,
labelled wrong there), the main job's recipe (policy format, result head, batch 16), the same number of optimizer
steps each way, after a warm-up run; prints padded/real tokens, seconds, real tokens/s, and last the ratio.

    .venv/bin/python bench/bench_prm_length_grouping.py
    .venv/bin/python bench/bench_prm_length_grouping.py --data runs/quickstart/arith-prm/math_shepherd/train.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

STEPS = 60
BATCH = 16


def reference_rows(seed: int = 0) -> list[dict]:
    """Math-Shepherd rows from arith-v1's reference solutions: each right as written, and a cut, wrong copy."""
    from posttrainlab.data.arith.generator import build

    rng = random.Random(seed)
    built = build()
    text = next(v for k, v in built.files.items() if k.endswith("sft_train_3k.jsonl")).decode()
    rows = []
    for line in text.splitlines():
        rec = json.loads(line)
        steps = rec["response"].split("\n")
        question = rec["prompt"].rsplit("\n\n", 1)[-1]
        rows.append({"prompt": question, "completions": steps, "labels": [True] * len(steps)})
        cut = rng.randint(1, len(steps))
        wrong = steps[: cut - 1] + [steps[cut - 1] + "1"]
        rows.append({"prompt": rows[-1]["prompt"], "completions": wrong, "labels": [True] * (cut - 1) + [False]})
    rng.shuffle(rows)
    return rows


def run(name: str, model_dir: Path, data: Path, work: Path, grouped: bool, *extra: str) -> float:
    """Seconds for one epoch of ``STEPS`` batches (``extra``: more ``key=value`` overrides of the recipe)."""
    from posttrainlab.config import load_config
    from posttrainlab.train.prm import build_trainer
    from posttrainlab.train.prm_recipe import PRMRecipe

    recipe = load_config(
        PRMRecipe,
        None,
        [f"model={model_dir}", f"output_dir={work / name}", f"dataset.path={data}", "dataset.format=math-shepherd",
         f"dataset.limit={STEPS * BATCH}", "head=result", "input_format=policy", "optim.epochs=1",
         f"optim.batch_size={BATCH}", "optim.save_steps=100000", "optim.logging_steps=1000",
         f"length_grouping={str(grouped).lower()}", *extra],
    )  # fmt: skip
    trainer, n, _ = build_trainer(recipe)
    lengths = [len(ex["input_ids"]) for ex in trainer.train_dataset]
    order = list(trainer._get_train_sampler())  # the batches this run draws, in order (transformers' own sampler)
    padded = sum(max(lengths[i] for i in order[j : j + BATCH]) * len(order[j : j + BATCH])
                 for j in range(0, len(order), BATCH))  # fmt: skip
    real = sum(lengths)
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    print(f"{name:<8}: {n} solutions, padded/real tokens {padded / real:.2f}, {seconds:6.1f} s, "
          f"{real / seconds:7.0f} real tokens/s")  # fmt: skip
    return seconds


def main() -> None:
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="a math-shepherd train.jsonl (default: rows built from arith-v1 references)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        data = work / "train.jsonl"
        if args.data:  # a random sample of its rows (a run's file lists each prompt's samples together)
            lines = Path(args.data).read_text().splitlines(keepends=True)
            random.Random(0).shuffle(lines)
            data.write_text("".join(lines))
        else:
            data.write_text("".join(json.dumps(r) + "\n" for r in reference_rows()))
        model = init_model(TinyModelConfig(), work / "tiny")
        print(f"{STEPS} optimizer steps of {BATCH} solutions each way: {args.data or 'arith-v1 references'}")
        run("warm-up", model, data, work, grouped=False)  # the first training in a process pays one-off costs
        random_s = run("random", model, data, work, grouped=False)
        grouped_s = run("grouped", model, data, work, grouped=True)
        print(f"random / length-grouped time: {random_s / grouped_s:.2f}x")


if __name__ == "__main__":
    main()
