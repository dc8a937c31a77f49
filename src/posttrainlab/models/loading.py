"""Load any Hugging Face causal LM (a local folder or a Hub id) with its tokenizer, ready to generate.

``load_causal_lm(path)`` returns ``(model, tokenizer)`` for the tiny model's folder, a trained
checkpoint, or a Hub id such as ``Qwen/Qwen2.5-0.5B-Instruct``. Why it is written this way:

- **One-line failures (docs/design.md exit codes).** A local path that is not a model folder (missing, or
  no ``config.json``) is ``BadInput`` at once, before transformers is imported. A Hub id where the
  Hub cannot be reached is ``HubUnavailable`` in one line: with ``HF_HUB_OFFLINE`` set only the local
  cache is tried (``local_files_only``); otherwise one plain GET of the model's metadata goes first,
  without retries and with a short timeout, because ``from_pretrained`` answers a dead network with
  retries and back-off and then a multi-line error (the same reasoning as ``data.hub``, whose
  environment and error helpers this module reuses).
- **Never unpickle (docs/design.md reliability).** Weights load with ``use_safetensors=True``: a repo
  that ships only ``pytorch_model.bin`` is refused with a one-line reason, not ``torch.load``-ed.
  ``trust_remote_code`` is passed through only when the caller sets it.
- **No weights made up (``load_weights``).** ``from_pretrained`` fills a tensor the checkpoint lacks
  (or holds in another shape) with a fresh random init and logs a multi-line LOAD REPORT table;
  ``load_weights`` asks it for its own loading info instead (``output_loading_info``; shapes that
  differ are reported, not raised) and holds that table back, so the caller decides: refuse in one
  line, say in one line what it initialised, or let transformers' report through unchanged.
- **Ready for batched generation.** The tokenizer gets a pad token (its eos when it has none) and
  left padding, and the model's generation config learns the pad id, so ``model.generate`` on a
  left-padded batch needs nothing more.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from posttrainlab.data import hub
from posttrainlab.errors import BadInput, HubUnavailable, one_line

#: dtype names accepted by ``load_causal_lm`` (``auto`` keeps the checkpoint's own dtype).
DTYPES = ("float32", "bfloat16", "float16", "auto")


def is_local(path: str) -> bool:
    """Whether ``path`` names a local folder rather than a Hub id (an ``owner/name`` that does not exist here).

    >>> is_local("./models/sft"), is_local("/tmp/m"), is_local("sft"), is_local("Qwen/Qwen2.5-0.5B")
    (True, True, True, False)
    """
    if Path(path).exists() or path.startswith((".", "/", "~")):
        return True
    parts = path.split("/")
    return not (len(parts) == 2 and all(hub.valid_name(p) for p in parts))


def check_folder(path: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise BadInput(f"{path}: no such model folder")
    if not (folder / "config.json").is_file():
        raise BadInput(f"{path}: no such model folder (no config.json in it; expected a Hugging Face model folder)")
    return folder


def probe_model(repo_id: str) -> str | None:
    """One GET of the model's Hub metadata (``data.hub.probe_repo``); why it got no answer, else None.

    ``BadInput`` when the Hub answers that the repo does not exist (or is private/gated).
    """
    endpoint = hub.hub_endpoint()
    try:
        hub.probe_repo(repo_id, repo_type="model", revision="main", endpoint=endpoint)
    except hub.Unreachable as e:
        return f"cannot reach the Hugging Face Hub at {endpoint} ({e})"
    except Exception as e:
        kind = hub.refusal(e)
        if kind == "denied":
            raise BadInput(
                f"{repo_id}: access denied by {endpoint} (gated model? accept its terms, set HF_TOKEN)"
            ) from None
        if kind is not None:
            raise BadInput(
                f"{repo_id}: no such model folder, and no such model on {endpoint} (private? set HF_TOKEN)"
            ) from None
        raise
    return None


def resolve_dtype(dtype):
    import torch

    if not isinstance(dtype, str):
        return dtype
    if dtype not in DTYPES:
        raise BadInput(f"dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    return "auto" if dtype == "auto" else getattr(torch, dtype)


@dataclass
class LoadedWeights:
    """What ``from_pretrained`` could not take from the checkpoint (transformers' own loading info)."""

    missing: set[str]
    unexpected: set[str]
    mismatched: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # key -> (checkpoint shape, model shape)
    held: list[logging.LogRecord] = field(default_factory=list)  # transformers' LOAD REPORT, not yet shown

    @property
    def fresh(self) -> set[str]:
        """The model's tensors that were initialised at random: missing or of another shape."""
        return self.missing | set(self.mismatched)

    def describe(self) -> str:
        """One line naming the fresh tensors, e.g. ``missing from the checkpoint: score.weight``."""
        parts = []
        if self.missing:
            parts.append(f"missing from the checkpoint: {listed(sorted(self.missing))}")
        if self.mismatched:
            items = [f"{k} (checkpoint {_dims(c)}, model {_dims(m)})" for k, (c, m) in sorted(self.mismatched.items())]
            parts.append(f"of another shape in the checkpoint: {listed(items)}")
        return "; ".join(parts)

    def replay(self) -> None:
        """Show transformers' held-back LOAD REPORT, as it would have been shown."""
        logger = logging.getLogger(_REPORT_LOGGER)
        for record in self.held:
            logger.handle(record)
        self.held.clear()


def listed(items: list[str], limit: int = 6) -> str:
    """``a, b, c and 4 more``: a list of tensor names short enough for a one-line message."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))  # (3, 32) -> 3x32


#: the logger transformers writes its LOAD REPORT table to (``utils.loading_report.log_state_dict_report``)
_REPORT_LOGGER = "transformers.modeling_utils"


@contextlib.contextmanager
def _hold_load_report(held: list[logging.LogRecord]) -> Iterator[None]:
    """Keep transformers' LOAD REPORT records out of the log while the block runs, in ``held``."""

    def hold(record: logging.LogRecord) -> bool:
        if "LOAD REPORT" in record.getMessage():
            held.append(record)
            return False
        return True

    logger = logging.getLogger(_REPORT_LOGGER)
    logger.addFilter(hold)
    try:
        yield
    finally:
        logger.removeFilter(hold)


def load_weights(cls, source: str, **kwargs):
    """``(cls.from_pretrained(source, **kwargs), LoadedWeights)``; nothing about missing keys is logged yet.

    A tensor of another shape is re-initialised and listed (``ignore_mismatched_sizes``), not raised
    as transformers' multi-line ``RuntimeError``; the caller refuses or accepts what ``fresh`` lists,
    and calls ``replay()`` to let transformers' report through when it neither refuses nor explains.
    """
    held: list[logging.LogRecord] = []
    try:
        with _hold_load_report(held):
            model, info = cls.from_pretrained(source, output_loading_info=True, ignore_mismatched_sizes=True, **kwargs)
    except Exception:
        LoadedWeights(set(), set(), {}, held).replay()  # the report a transformers error points to
        raise
    mismatched = {key: (tuple(ckpt), tuple(want)) for key, ckpt, want in info["mismatched_keys"]}
    return model, LoadedWeights(set(info["missing_keys"]), set(info["unexpected_keys"]), mismatched, held)


def _from_pretrained(source: str, *, local_only: bool, trust_remote_code: bool, dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    common = {"trust_remote_code": trust_remote_code, "local_files_only": local_only}
    tokenizer = AutoTokenizer.from_pretrained(source, **common)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, use_safetensors=True, **common)
    return model, tokenizer


def one_line_load_error(path: str, exc: Exception, *, local_only: bool, offline_reason: str | None):
    """Map a ``from_pretrained`` failure to ``BadInput``/``HubUnavailable``, or ``None`` to re-raise."""
    text = one_line(exc, limit=200)
    if "safetensors" in text and ("no file named" in text or "does not appear to have" in text):
        return BadInput(f"{path}: no safetensors weights (posttrainlab never unpickles .bin checkpoints)")
    if type(exc).__name__ == "SafetensorError":
        return BadInput(f"{path}: unreadable safetensors weights ({text})")
    if offline_reason is not None and (local_only or hub.is_network_error(exc)):
        return HubUnavailable(
            f"{path}: no such model folder; as a Hub id: {offline_reason} and it is not in the local "
            "Hugging Face cache (download it where the network works and pass the local folder)"
        )
    if isinstance(exc, (OSError, ValueError)) or hub.is_network_error(exc):
        return BadInput(f"{path}: cannot load the model ({text})")
    return None


def prepare_tokenizer(tokenizer, model=None):
    """Give ``tokenizer`` a pad token (its eos when missing) and left padding; tell ``model`` the pad id."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise BadInput(f"{tokenizer.name_or_path}: tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if model is not None:
        if model.generation_config.pad_token_id is None:
            model.generation_config.pad_token_id = tokenizer.pad_token_id
        if model.generation_config.eos_token_id is None:
            model.generation_config.eos_token_id = tokenizer.eos_token_id
    return tokenizer


def load_causal_lm(path: str | os.PathLike, *, trust_remote_code: bool = False, dtype="float32"):
    """``(model, tokenizer)`` for a local Hugging Face folder or a Hub id, in eval mode.

    ``dtype`` is one of ``DTYPES`` or a ``torch.dtype``. Errors: ``BadInput`` for a path that is not a
    model folder, a Hub repo that does not exist, or weights not in safetensors; ``HubUnavailable``
    for a Hub id that is neither reachable nor cached.
    """
    path = str(path)
    offline_reason = None
    if is_local(path):
        source, local_only = str(check_folder(path)), True
    else:
        source = path
        local_only = hub.offline_env()
        if local_only:
            offline_reason = "HF_HUB_OFFLINE is set"
        else:
            offline_reason = probe_model(path)
            local_only = offline_reason is not None  # unreachable: the cache is the only hope
    torch_dtype = resolve_dtype(dtype)
    try:
        model, tokenizer = _from_pretrained(
            source, local_only=local_only, trust_remote_code=trust_remote_code, dtype=torch_dtype
        )
    except Exception as e:
        mapped = one_line_load_error(path, e, local_only=local_only, offline_reason=offline_reason)
        if mapped is None:
            raise
        raise mapped from None
    model.eval()
    prepare_tokenizer(tokenizer, model)
    return model, tokenizer


def free_memory() -> None:
    """Release a sampling model's memory (CPU, and the CUDA cache when there is one) before a trainer loads."""
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
