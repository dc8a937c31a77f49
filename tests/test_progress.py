"""progress.py: the bar's columns and labels, the one training line per logging step (a real tiny SFT run through
the CLI), and the libraries kept quiet unless ``--verbose``."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from posttrainlab import progress
from posttrainlab.progress import clock, log_line, progress_bar, quiet_libraries, rate, task_label

ROOT = Path(__file__).resolve().parents[1]


def test_clock_and_rate():
    assert [clock(s) for s in (0, 9.94, 10, 59.6, 151, 3600, 3723.4)] == [
        "0.0 s", "9.9 s", "0:10", "1:00", "2:31", "1:00:00", "1:02:03",
    ]  # fmt: skip
    assert [rate(r) for r in (2.34, 1.0, 0.5, 0.0, None)] == ["2.3 it/s", "1.0 it/s", "2.0 s/it", "? it/s", "? it/s"]


@pytest.mark.parametrize(
    "method,logs,expected",
    [
        ("sft", {"loss": 0.8123, "learning_rate": 0.00096, "grad_norm": 0.41, "entropy": 5.5, "epoch": 0.1},
         "sft  step 40/376  loss 0.812  lr 9.6e-04  grad 0.41  2.0 it/s  eta 2:48"),
        ("dpo", {"loss": 0.6931, "rewards/accuracies": 0.75, "rewards/margins": 0.0123, "learning_rate": 1e-4,
                 "logps/chosen": -197.3},
         "dpo  step 40/376  loss 0.693  acc 0.75  margin 0.0123  lr 1.0e-04  2.0 it/s  eta 2:48"),
        ("grpo", {"loss": 0.0, "reward": 0.25, "rewards/correctness_reward/mean": 0.125, "kl": 0.00042,
                  "learning_rate": 2e-5, "completions/mean_length": 8.0},
         "grpo  step 40/376  reward 0.25  correct 0.125  kl 0.00042  lr 2.0e-05  2.0 it/s  eta 2:48"),
        ("prm", {"loss": 0.7019, "grad_norm": 3.071, "learning_rate": 0.0},
         "prm  step 40/376  loss 0.702  lr 0.0e+00  grad 3.07  2.0 it/s  eta 2:48"),
        ("pretrain", {"loss": 4.867, "grad_norm": 3.671, "learning_rate": 0.0001033},
         "pretrain  step 40/376  loss 4.87  lr 1.0e-04  grad 3.67  2.0 it/s  eta 2:48"),
        ("prm", {"eval_loss": 0.5, "eval_runtime": 1.2, "eval_samples_per_second": 80.0, "eval_auroc": 0.875},
         "prm  eval step 40/376  loss 0.5  auroc 0.875"),
    ],
)  # fmt: skip
def test_one_line_per_trainer(method, logs, expected):
    """Each trainer's keys in its order; (376 - 40) steps at 2 it/s is 168 s = 2:48."""
    assert log_line(method, 40, 376, logs, 2.0) == expected


def test_a_log_without_shown_keys_has_no_line_and_an_unknown_rate_no_eta():
    assert log_line("sft", 1, 2, {"train_runtime": 0.2, "train_loss": 5.5}) is None
    assert log_line("sft", 1, 2, {"loss": 5.5}) == "sft  step 1/2  loss 5.5"


def test_task_label_names_the_bars_started_inside_it():
    with progress_bar(False) as bar:
        first = bar.add_task("generating", total=3)
        with task_label("sampling rl_train (k=4)"):
            second = bar.add_task("generating", total=3)
            with task_label("sampling dev (k=4)"):
                third = bar.add_task("generating", total=3)
        fourth = bar.add_task("generating", total=3)
    names = [bar.tasks[i].description for i in (first, second, third, fourth)]
    assert names == ["generating", "sampling rl_train (k=4)", "sampling dev (k=4)", "generating"]


def test_the_bar_shows_done_total_rate_and_eta_and_no_eta_once_finished():
    from rich.console import Console

    now = [100.0]
    bar = progress_bar(False)
    bar.get_time = lambda: now[0]
    task = bar.add_task("scoring", total=100)

    def shown() -> str:
        console = Console(record=True, width=100, color_system=None)
        console.print(bar.make_tasks_table(bar.tasks))
        return console.export_text().rstrip()

    for _ in range(4):  # 10 items a second: 60 left take 6 s
        now[0] += 1.0
        bar.advance(task, 10)
    assert re.search(r"^scoring .* 40/100 10\.0 it/s 0:00:04 eta 6\.0 s$", shown())
    for _ in range(6):
        now[0] += 1.0
        bar.advance(task, 10)
    assert re.search(r"^scoring .* 100/100 10\.0 it/s 0:00:10$", shown())
    at_once = bar.add_task("generating", total=8)  # done in one update: the rate is the whole bar's
    now[0] += 2.0
    bar.advance(at_once, 8)
    assert re.search(r"^generating .* 8/8 +4\.0 it/s +0:00:02$", shown().splitlines()[-1])


@pytest.fixture
def restore_quiet():
    yield
    quiet_libraries(True)  # the libraries as they start: bars on, nothing silenced...
    progress._verbose[0] = False  # ...and no --verbose chosen


def _state():
    import datasets
    import huggingface_hub.utils as hub
    import transformers

    return (datasets.is_progress_bar_enabled(), transformers.utils.logging.is_progress_bar_enabled(),
            not hub.are_progress_bars_disabled())  # fmt: skip


def _passed(logger: logging.Logger, message: str) -> bool:
    """Whether ``logger.warning(message)`` reaches a handler (transformers' loggers do not propagate to caplog's)."""
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    try:
        logger.warning(message)
    finally:
        logger.removeHandler(handler)
    return seen == [message]


def test_quiet_libraries_turns_bars_and_silenced_notes_off_and_verbose_back_on(restore_quiet):
    logger = logging.getLogger("transformers.modeling_utils")
    note = "The new embeddings will be initialized from a multivariate normal distribution that has old embeddings'"
    quiet_libraries(False)
    assert _state() == (False, False, False)
    assert not _passed(logger, note) and _passed(logger, "a message nobody silenced")
    for name, start in progress.SILENCED:  # each note on its own logger
        assert not _passed(logging.getLogger(name), start + " (the rest)") and _passed(logging.getLogger(name), "x")
    quiet_libraries()  # None: the last choice stays
    assert _state() == (False, False, False) and not _passed(logger, note)
    quiet_libraries(True)
    quiet_libraries()  # run_quickstart's call does not undo --verbose
    assert _state() == (True, True, True) and _passed(logger, note)


def _sft(capfd, tiny_model, arith_dir, out, *flags):
    from cli_capture import cli

    code, stdout, stderr = cli(
        capfd, "train", "sft", "--config", str(ROOT / "configs/arith/sft.yaml"), f"model={tiny_model}",
        f"output_dir={out}", f"dataset.path={arith_dir}", "dataset.limit=16", "optim.max_steps=3",
        "optim.batch_size=4", "optim.logging_steps=1", *flags,
    )  # fmt: skip
    assert code == 0, stderr
    return stdout, stderr


def test_a_tiny_sft_run_prints_one_line_per_logging_step_and_no_library_bars(
    capfd, tiny_model, arith_dir, tmp_path, restore_quiet
):
    out = tmp_path / "sft"
    stdout, stderr = _sft(capfd, tiny_model, arith_dir, out)
    logged = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in logged if "loss" in row]
    lines = stdout.splitlines()
    steps = [line for line in lines if line.startswith("sft  step ")]
    assert len(steps) == 3 == len(losses)  # logging_steps=1: one line a step, no more
    for n, (line, loss) in enumerate(zip(steps, losses, strict=True), start=1):
        assert line.startswith(f"sft  step {n}/3  loss {loss:.3g}  lr "), line
        assert re.search(r"  \d+\.\d (it/s|s/it)  eta ", line), line
    assert re.fullmatch(rf"sft done: 3 steps in \d+\.\d s, final loss {losses[-1]:.3g}", lines[-2])
    assert lines[-1] == f"sft: model saved to {out}" and len(lines) == 5
    for text in (stdout, stderr):
        assert "{'loss'" not in text and "{'train_runtime'" not in text  # transformers' raw dicts
        assert "100%" not in text and "it/s]" not in text  # tqdm bars (training, loading, saving)
    assert "Tokenizing train dataset" not in stderr and "Loading weights" not in stderr


def test_verbose_brings_the_library_bars_back(capfd, tiny_model, arith_dir, tmp_path, restore_quiet):
    stdout, stderr = _sft(capfd, tiny_model, arith_dir, tmp_path / "sft", "--verbose")
    assert "Tokenizing train dataset" in stderr and "Writing model shards" in stderr
    assert len([line for line in stdout.splitlines() if line.startswith("sft  step ")]) == 3  # still our lines
    assert "{'loss'" not in stdout


def test_use_train_log_replaces_transformers_bar_and_printer(tiny_model, arith_dir):
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from posttrainlab.config import load_config
    from posttrainlab.train.recipes import SFTRecipe
    from posttrainlab.train.sft import build_trainer

    recipe = load_config(SFTRecipe, None, [f"model={tiny_model}", f"dataset.path={arith_dir}", "dataset.limit=4"])
    trainer, _ = build_trainer(recipe)
    trainer.add_callback(PrinterCallback)
    progress.use_train_log(trainer, "sft")
    kinds = [type(c).__name__ for c in trainer.callback_handler.callbacks]
    assert not any(isinstance(c, (ProgressCallback, PrinterCallback)) for c in trainer.callback_handler.callbacks)
    assert kinds.count("TrainLog") == 1
