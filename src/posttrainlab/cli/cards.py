"""``posttrain data card DIR``: (re)write the dataset card of a folder the lab wrote.

    posttrain data card runs/mc            # kind detected: arith-v1, arith-prm, sharp, mc-values, …
    posttrain data card runs/x --kind sharp

A thin verb over ``posttrainlab.data.cards.kinds.write_folder_card`` (docs/formats.md "Dataset cards"): the
provenance of the card already in the folder is kept; a folder of no known kind is refused (exit 2), and so is one
whose files no longer match its ``manifest.json`` or its card's Files table (``kinds.check_recorded``), unless
``--rehash`` records the files as they are now.
``register(data_app)`` adds it to the ``data`` group. Nothing here imports torch.
"""

from __future__ import annotations

from pathlib import Path

import typer

from posttrainlab.data.cards.kinds import KINDS


def card(
    folder: Path = typer.Argument(..., help="A dataset folder written by the lab."),
    kind: str | None = typer.Option(None, "--kind", help=f"The folder's kind ({', '.join(KINDS)}); default: detected."),
    rehash: bool = typer.Option(
        False, "--rehash", help="Files changed since manifest.json / the card: record them as they are now."
    ),
) -> None:
    """Write FOLDER/README.md: a dataset card in the Hub's form, its numbers recounted from the files."""
    from posttrainlab.data.cards.kinds import check_recorded, detect_kind, write_folder_card
    from posttrainlab.data.cards.render import parse_files_table
    from posttrainlab.errors import BadInput

    if kind is not None and kind not in KINDS:
        raise BadInput(f"--kind {kind!r}: choose one of {', '.join(KINDS)}")
    kind = kind or detect_kind(folder)
    for problem in check_recorded(folder, rehash):  # refused without --rehash
        typer.echo(f"rehashed {problem}")
    path = write_folder_card(folder, kind, keep=True)
    files = parse_files_table(path.read_text(encoding="utf-8"))
    typer.echo(f"wrote {path} ({kind}; {len(files)} files hashed)")


def register(data_app: typer.Typer) -> None:
    """Add ``card`` to the ``posttrain data`` group."""
    data_app.command("card")(card)
