"""``cli.settings``: the dataclass-settings flags of ``posttrain label mc`` take the shared second names
(``--output-dir``, ``--data-file``), list their choices in ``--help`` and refuse a value outside them before any
data is read or torch imported."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from fresh_cli import fresh

from cli_capture import cli
from posttrainlab.cli.settings import check_choices, flag_overrides, settings_help
from posttrainlab.errors import BadInput
from posttrainlab.label.mc.config import MCRunConfig


def test_the_shared_second_names_are_the_fields_own_flags():
    tokens = ["--output-dir", "o", "--data-file", "d.jsonl", "--out", "p"]
    assert flag_overrides(MCRunConfig, tokens, command="c") == ['out="o"', 'data="d.jsonl"', 'out="p"']


def test_help_lists_choices_and_second_names():
    text = settings_help(MCRunConfig, {"search": ("full", "binary")})
    assert '  --search <full|binary>  [search: "full"]' in text.splitlines()
    assert "  --out/--output-dir TEXT  [out: null]" in text.splitlines()


@dataclass
class Run:
    backend: str = "transformers"
    formats: tuple[str, ...] = ("jsonl",)
    split: str | None = None


def test_check_choices_refuses_any_value_outside_and_passes_unset():
    choices = {"backend": ("transformers", "openai"), "formats": ("jsonl", "parquet"), "split": ("test",)}
    check_choices(Run(), choices)
    with pytest.raises(BadInput, match=r"^--backend 'tgi': choose one of transformers, openai$"):
        check_choices(Run(backend="tgi"), choices)
    with pytest.raises(BadInput, match=r"^--formats 'csv': choose one of jsonl, parquet$"):
        check_choices(Run(formats=("jsonl", "csv")), choices)


def test_label_mc_help_shows_the_library_choices(capsys):
    code, out, _ = cli(capsys, "label", "mc", "--help")
    assert code == 0
    shown = ("--backend <transformers|vllm|vllm-server|openai>", "--search <full|binary>", "--dtype <float32|bfloat16")
    assert all(s in out for s in shown)


@pytest.mark.parametrize(
    "flag, line",
    [
        (["--dtype", "f8"], "posttrain: error: --dtype 'f8': choose one of float32, bfloat16, float16, auto"),
        (["--judge-relabel", "some"], "posttrain: error: --judge-relabel 'some': choose one of all, unparsed"),
        (
            ["--backend", "tgi"],
            "posttrain: error: --backend 'tgi': choose one of transformers, vllm, vllm-server, openai",
        ),  # fmt: skip
    ],
)
def test_label_mc_refuses_a_bad_choice_before_data_or_torch(tmp_path, flag, line):
    """The data file does not exist: the choice is refused first, and torch is never imported (--threads given)."""
    r = fresh("label", "mc", "--policy", "p", "--data-file", str(tmp_path / "nope.jsonl"),
              "--output-dir", str(tmp_path / "o"), "--threads", "1", *flag)  # fmt: skip
    assert r.code == 2 and r.line == line and not r.torch
    assert not (tmp_path / "o").exists()
