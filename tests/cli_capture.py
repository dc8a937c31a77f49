"""Run the ``posttrain`` CLI in-process and capture what it printed (importable from any test folder)."""

from __future__ import annotations

from posttrainlab.cli import main


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``posttrain ARGS`` run through ``main`` with pytest's ``capsys``."""
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err
