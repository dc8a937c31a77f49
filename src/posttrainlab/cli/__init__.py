"""The ``posttrain`` command: one thin function per verb (DESIGN.md "CLI contract").

Each verb parses its flags, builds a config and calls the library; heavy libraries (torch,
transformers, TRL) are imported only inside the verbs that need them, so ``posttrain --help`` and
``posttrain data …`` start in a fraction of a second.

Exit codes: 0 success; 2 bad usage or bad input (one line naming the file and the fault); 1 any other
failure.
"""

from __future__ import annotations

import sys
import warnings

import typer

from posttrainlab import __version__
from posttrainlab.cli import pipeline, quickstart, report, serve
from posttrainlab.cli.data import data_app
from posttrainlab.cli.evaluate import eval_app
from posttrainlab.cli.label import label_app
from posttrainlab.cli.model import model_app
from posttrainlab.cli.train import train_app
from posttrainlab.errors import PosttrainError

app = typer.Typer(
    name="posttrain",
    help="posttrainlab: process supervision of math reasoning (data, graders, PRMs, judges, SFT/DPO/GRPO).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(data_app, name="data")
app.add_typer(model_app, name="model")
app.add_typer(eval_app, name="eval")
app.add_typer(train_app, name="train")
app.add_typer(label_app, name="label")
pipeline.register(app)  # generate, annotate
serve.register(app)
quickstart.register(app)
report.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"posttrain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """posttrainlab: process supervision of math reasoning."""


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app and turn ``PosttrainError`` into one line and its exit code."""
    # TRL 1.16 reads `model.is_gradient_checkpointing`, which transformers 5.24 deprecates: a warning at every
    # checkpoint save that no user of this CLI can act on
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
    try:
        app(args=argv, prog_name="posttrain")
    except PosttrainError as e:
        print(f"posttrain: error: {e}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except KeyboardInterrupt:
        print("posttrain: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
