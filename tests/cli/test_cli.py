"""``posttrain``'s entry point: a usage error (unknown flag, a value outside an option's choices, a missing option) is
one line and exit 2, like every other bad input; help and ``--version`` are as click shows them."""

from __future__ import annotations

import pytest

from cli_capture import cli


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["train", "sft", "--config", "x.yaml", "--bogus"],
            "posttrain: error: No such option: --bogus",
        ),
        (
            ["generate", "--model", "m", "--data", "d", "--out", "o", "--backend", "bogus"],
            "posttrain: error: Invalid value for '--backend': 'bogus' is not one of 'transformers', 'vllm', "
            "'vllm-server', 'openai'. (`posttrain generate --help` lists them)",
        ),
        (
            ["annotate", "--model-name", "j", "--data", "d", "--out", "o", "--select", "best"],
            "posttrain: error: Invalid value for '--select': 'best' is not one of 'all', 'one-per-problem'. "
            "(`posttrain annotate --help` lists them)",
        ),
        (
            ["eval", "policy", "--data", "d", "--out", "o"],
            "posttrain: error: Missing option '--model'. (`posttrain eval policy --help` lists them)",
        ),
    ],
)
def test_usage_errors_are_one_line_exit_2(capsys, tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.strip().splitlines()[0].startswith(line) and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []  # refused while parsing: nothing written


def test_a_group_without_a_verb_shows_its_help(capsys):
    code, out, err = cli(capsys, "train")
    assert code == 2 and "Commands:" in out + err and "sft" in out + err


def test_version_and_help_exit_0(capsys):
    from posttrainlab import __version__

    assert cli(capsys, "--version")[:2] == (0, f"posttrain {__version__}\n")
    code, out, _ = cli(capsys, "eval", "policy", "--help")
    assert code == 0 and "--output-dir" in out and "<float32|bfloat16|float16|auto>" in out
