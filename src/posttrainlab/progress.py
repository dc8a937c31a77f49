"""What long work shows while it runs, and what the libraries under it are kept from showing (issue #17).

- ``progress_bar(enabled)``: the one progress bar of long library work (generation, scoring, labelling): ``rich``,
  on stderr, with "description, bar, done/total, rate, elapsed, ETA" columns; ``enabled=False`` turns it off
  (tests, library callers with bars of their own). ``task_label(text)`` names the work of every bar started inside
  it: ``data arith-prm`` labels each sampling call "sampling rl_train (k=4)" where the sampling backend's own bar
  would say "generating" three times.
- ``use_train_log(trainer, method)``: our trainers' one training display, in place of transformers' tqdm
  ``ProgressCallback`` (``PrinterCallback`` with ``disable_tqdm``), which printed every log as a raw dict and the
  final 100% bar up to four times. One formatted line per logging step, always (``log_line``)::

      sft  step 40/376  loss 0.812  lr 9.6e-04  grad 0.41  2.3 it/s  eta 2:26

  a live bar (step N/M, it/s, ETA) only while both stdout and stderr are a terminal (a bar on stderr would swallow
  the lines of a piped stdout), gone when training ends, and one final line
  (``sft done: 376 steps in 2:29, final loss 0.512``). ``train_log.jsonl`` keeps every key of every log.
- ``quiet_libraries(verbose)``: off by default, back with ``--verbose`` (``posttrain train ...``, ``posttrain
  quickstart``): datasets' map/filter bars (five per SFT run: tokenizing, building labels, truncating...);
  transformers' weight loading and saving bars ("Loading weights", "Writing model shards"); huggingface_hub's
  download/upload bars (safetensors draws none of its own); and transformers' notes in ``SILENCED``:
  "The new embeddings will be initialized from a multivariate normal distribution..." when the PRM trainer adds
  its separator token (mean resizing is what the PRM wants; the note offers only to turn it off); "mtime may not
  be reliable on this filesystem" when two checkpoints were saved within a second (it then orders them by step,
  which is right); and, on resume, "There were missing keys in the checkpoint model loaded: ['lm_head.weight']"
  (a tied LM head, which checkpoints do not store twice: it is the embedding, loaded).
  TRL's ``is_gradient_checkpointing`` FutureWarning is filtered in ``posttrain``'s ``main`` (cli/__init__.py).
"""

from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache

_LABEL: ContextVar[str | None] = ContextVar("posttrain_progress_label", default=None)


@contextmanager
def task_label(text: str):
    """Bars started inside the block are described as ``text`` (the innermost label wins)."""
    token = _LABEL.set(text)
    try:
        yield
    finally:
        _LABEL.reset(token)


def clock(seconds: float) -> str:
    """A duration as ``m:ss`` or ``h:mm:ss``; under ten seconds in tenths (``0:00`` says nothing).

    >>> clock(0.44), clock(151), clock(3723)
    ('0.4 s', '2:31', '1:02:03')
    """
    if seconds < 9.95:
        return f"{max(0.0, seconds):.1f} s"
    s = round(seconds)
    h, m = s // 3600, s // 60 % 60
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def rate(per_second: float | None) -> str:
    """Steps per second as ``2.3 it/s``, or ``4.0 s/it`` below one a second (``?`` when unknown).

    >>> rate(2.34), rate(0.25), rate(None)
    ('2.3 it/s', '4.0 s/it', '? it/s')
    """
    if not per_second or per_second <= 0:
        return "? it/s"
    return f"{per_second:.1f} it/s" if per_second >= 1 else f"{1 / per_second:.1f} s/it"


@cache
def _progress_class():
    """``rich.progress.Progress`` that takes its task descriptions from ``task_label``, and the rate column."""
    from rich.progress import Progress, ProgressColumn
    from rich.text import Text

    class Labelled(Progress):
        def add_task(self, description, *args, **kwargs):
            return super().add_task(_LABEL.get() or description, *args, **kwargs)

    class RateColumn(ProgressColumn):
        def render(self, task) -> Text:
            speed = task.finished_speed or task.speed  # rich's estimate: none for a bar done in one update
            if speed is None and task.finished and task.elapsed:
                speed = task.completed / task.elapsed
            return Text(rate(speed), style="progress.data.speed")

    class EtaColumn(ProgressColumn):  # nothing once finished (rich's own says 0:00:00 there)
        def render(self, task) -> Text:
            left = task.time_remaining
            text = "" if task.finished else f"eta {'?' if left is None else clock(left)}"
            return Text(text, style="progress.remaining")

    return Labelled, RateColumn, EtaColumn


def progress_bar(enabled: bool = True, *, transient: bool = False):
    """A ``rich`` Progress on stderr; add tasks with ``bar.add_task(description, total=...)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    labelled, rate_column, eta_column = _progress_class()
    return labelled(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        rate_column(),
        TimeElapsedColumn(),
        eta_column(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=transient,
    )


# ------------------------------------------------------------------------------------------- training lines

#: the log keys each trainer's line shows, in order, with their short names (docs/policy-lab.md "What training
#: prints"); a key a log lacks is left out. Any ``eval_*`` key gets a line of its own.
LINE_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "sft": (("loss", "loss"), ("learning_rate", "lr"), ("grad_norm", "grad")),
    "dpo": (("loss", "loss"), ("rewards/accuracies", "acc"), ("rewards/margins", "margin"), ("learning_rate", "lr")),
    "grpo": (("reward", "reward"), ("rewards/correctness_reward/mean", "correct"), ("prm/score", "prm"),
             ("exact/any_wrong_step", "wrong-step"), ("kl", "kl"), ("learning_rate", "lr")),
    "prm": (("loss", "loss"), ("learning_rate", "lr"), ("grad_norm", "grad")),
}  # fmt: skip
DEFAULT_KEYS = LINE_KEYS["sft"]  # pretrain and any other Trainer: loss, lr, grad
#: eval keys that say how fast the eval ran, not how good the model is
_EVAL_TIMING = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")


def _value(key: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key == "learning_rate":
        return f"{value:.1e}"
    return str(value) if isinstance(value, int) else f"{value:.3g}"


def log_line(method: str, step: int, max_steps: int, logs: dict, per_second: float | None = None) -> str | None:
    """The one console line of a trainer's log event, or ``None`` for an event with nothing to show.

    >>> log_line("sft", 40, 376, {"loss": 0.8123, "learning_rate": 0.00096, "grad_norm": 0.412, "epoch": 0.3}, 2.0)
    'sft  step 40/376  loss 0.812  lr 9.6e-04  grad 0.412  2.0 it/s  eta 2:48'
    >>> log_line("prm", 10, 20, {"eval_loss": 0.5, "eval_runtime": 1.2})
    'prm  eval step 10/20  loss 0.5'
    """
    evals = [(k, k.removeprefix("eval_")) for k in logs if k.startswith("eval_") and k not in _EVAL_TIMING]
    shown = [(k, name) for k, name in LINE_KEYS.get(method, DEFAULT_KEYS) if k in logs]
    if not shown and evals:
        return f"{method}  eval step {step}/{max_steps}  " + "  ".join(f"{n} {_value(k, logs[k])}" for k, n in evals)
    if not shown:
        return None
    parts = [f"{method}  step {step}/{max_steps}", *(f"{n} {_value(k, logs[k])}" for k, n in shown)]
    if per_second:
        parts += [rate(per_second), f"eta {clock((max_steps - step) / per_second)}"]
    return "  ".join(parts)


def _terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


@cache
def _callback_class():
    from transformers import TrainerCallback

    class TrainLog(TrainerCallback):
        """One line per logging step, a live bar on a terminal, one final line (module docstring)."""

        def __init__(self, method: str, bar: bool | None = None):
            self.method, self.bar = method, bar
            self.progress = self.task = None
            self.key = LINE_KEYS.get(method, DEFAULT_KEYS)[0]  # the final line's value: loss, or GRPO's reward
            self.last = self.mean_loss = None

        def on_train_begin(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            self.t0, self.first = time.monotonic(), state.global_step
            self.progress = progress_bar(_terminal() if self.bar is None else self.bar, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.method, total=state.max_steps, completed=state.global_step)

        def per_second(self, state) -> float | None:
            seconds, steps = time.monotonic() - self.t0, state.global_step - self.first
            return steps / seconds if seconds > 0 and steps > 0 else None

        def on_step_end(self, args, state, control, **kwargs):
            if self.progress is not None:
                self.progress.update(self.task, completed=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            if "train_runtime" in logs:  # the summary log of the whole run: the final line says it
                self.mean_loss = logs.get("train_loss")
                return
            self.last = logs.get(self.key[0], self.last)
            line = log_line(self.method, state.global_step, state.max_steps, logs, self.per_second(state))
            if line is not None:
                print(line, flush=True)

        def on_train_end(self, args, state, control, **kwargs):
            if self.progress is None:
                return
            self.progress.stop()
            self.progress = None
            steps = state.global_step - self.first
            resumed = f" (resumed at step {self.first})" if self.first else ""
            key, name = self.key
            value = self.last if self.last is not None else self.mean_loss if key == "loss" else None
            tail = f", final {name} {_value(key, value)}" if value is not None else ""
            took = clock(time.monotonic() - self.t0)
            print(f"{self.method} done: {steps} step{'' if steps == 1 else 's'} in {took}{resumed}{tail}", flush=True)

    return TrainLog


def use_train_log(trainer, method: str, *, bar: bool | None = None) -> None:
    """Give ``trainer`` our training display (module docstring) instead of transformers' tqdm bar or dict printer.

    ``bar``: draw the live bar (``None``: when stdout and stderr are a terminal).
    """
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in list(trainer.callback_handler.callbacks):
        if isinstance(callback, (ProgressCallback, PrinterCallback)) or type(callback).__name__.endswith(
            "ProgressCallback"
        ):  # the notebook bar too
            trainer.remove_callback(callback)
    trainer.add_callback(_callback_class()(method, bar))


# -------------------------------------------------------------------------------------------- quiet libraries

#: log messages that tell the user nothing they can act on: (logger, how the message starts); see the docstring
SILENCED: tuple[tuple[str, str], ...] = (
    ("transformers.modeling_utils", "The new embeddings will be initialized from a multivariate normal"),
    ("transformers.trainer_utils", "mtime may not be reliable on this filesystem"),
    ("transformers.trainer", "There were missing keys in the checkpoint model loaded: ['lm_head.weight']."),
    # DeepSpeed (installed for ZeRO-3 runs) is imported by accelerate inside every Trainer and says it found no GPU
    ("DeepSpeed", "Setting accelerator to CPU"),
)
_verbose = [False]  # the last choice quiet_libraries was given


def _drop_silenced(record: logging.LogRecord) -> bool:
    return not any(record.name == name and record.getMessage().startswith(start) for name, start in SILENCED)


def quiet_libraries(verbose: bool | None = None) -> None:
    """Turn the libraries' bars and ``SILENCED`` messages off, or back on with ``verbose`` (module docstring).

    ``verbose=None`` keeps the last choice (quiet when none was made), so a library call (``run_quickstart``) does
    not undo the ``--verbose`` its command was given.
    """
    import datasets
    import huggingface_hub.utils as hub
    import transformers

    verbose = _verbose[0] if verbose is None else verbose
    _verbose[0] = verbose
    (datasets.enable_progress_bars if verbose else datasets.disable_progress_bars)()
    logs = transformers.utils.logging
    (logs.enable_progress_bar if verbose else logs.disable_progress_bar)()
    (hub.enable_progress_bars if verbose else hub.disable_progress_bars)()
    for name in dict.fromkeys(name for name, _ in SILENCED):
        logger = logging.getLogger(name)
        logger.removeFilter(_drop_silenced)
        if not verbose:
            logger.addFilter(_drop_silenced)
