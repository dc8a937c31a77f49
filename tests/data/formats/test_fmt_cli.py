"""``posttrain data convert|validate|stats|join`` through a typer app built with ``register``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from posttrainlab.cli.formats import FormatName, register
from posttrainlab.data.formats import FORMATS
from posttrainlab.data.formats.mc_value import STATS_KEYS
from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.errors import BadInput

ASSETS = Path(__file__).parents[2] / "assets" / "formats"
REPO = Path(__file__).parents[3]


def rows(path: Path) -> list[dict]:
    return list(iter_rows(path))


def make_app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    data = typer.Typer()
    register(data)
    app.add_typer(data, name="data")
    return app


APP = make_app()


def run(*args: str):
    return CliRunner().invoke(APP, ["data", *map(str, args)])


def bad_input(result) -> str:
    """The one-line message of the ``BadInput`` a verb raised (``posttrain`` prints it and exits 2)."""
    assert isinstance(result.exception, BadInput), (result.exception, result.output)
    message = str(result.exception)
    assert "\n" not in message
    return message


def test_format_choices_are_the_registry():
    assert (
        [f.value for f in FormatName] == list(FORMATS) == ["step", "span", "math-shepherd", "mc-value", "processbench"]
    )


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_convert_sharp(tmp_path, suffix):
    out = tmp_path / f"step{suffix}"
    result = run("convert", "sharp", "--span", ASSETS / "span_good.jsonl", "--out", out)
    assert result.exit_code == 0, result.output
    assert "wrote 7 rows" in result.output
    assert rows(out) == rows(ASSETS / "span_good_step.jsonl")
    assert run("validate", "--format", "step", out).exit_code == 0


def test_convert_sharp_stops_at_a_bad_row_and_keeps_the_old_output(tmp_path):
    out = tmp_path / "step.jsonl"
    out.write_text("previous good output\n", encoding="utf-8")
    # --overwrite: an existing --out is refused without it (issue #42); with it, a bad row still keeps the old output
    result = run("convert", "sharp", "--span", ASSETS / "span_bad.jsonl", "--out", out, "--overwrite")
    message = bad_input(result)
    assert message.startswith(f"{ASSETS / 'span_bad.jsonl'}: row 0: unclosed <HAL> at char 2 of piece 0")
    assert out.read_text(encoding="utf-8") == "previous good output\n"


def test_validate_good_file():
    result = run("validate", "--format", "span", ASSETS / "span_good.jsonl")
    assert result.exit_code == 0
    assert result.output.strip() == f"OK {ASSETS / 'span_good.jsonl'}: 7 rows, format span"


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("step", "step_bad.jsonl"),
        ("span", "span_bad.jsonl"),
        ("math-shepherd", "ms_bad.jsonl"),
        ("processbench", "pb_bad.jsonl"),
        ("mc-value", "mc_value_bad.jsonl"),
    ],
)
def test_validate_prints_every_bad_row_and_fails(fmt, name):
    path = ASSETS / name
    expected = [(i, r["expect"]) for i, r in enumerate(rows(path)) if r["expect"] is not None]
    result = run("validate", "--format", fmt, path)
    assert result.output.splitlines() == [f"{path}: row {i}: {reason}" for i, reason in expected]
    n = len(rows(path))
    assert bad_input(result) == f"{path}: {len(expected)} of {n} rows break the {fmt} format"


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("step", "span_good_step.jsonl"),
        ("math-shepherd", "ms_ki.jsonl"),
        ("math-shepherd", "ms_list.jsonl"),
        ("mc-value", "mc_value.jsonl"),
        ("processbench", "pb.jsonl"),
        ("processbench", "prm800k.jsonl"),
    ],
)
def test_validate_good_fixtures(fmt, name):
    assert run("validate", "--format", fmt, ASSETS / name).exit_code == 0


def test_validate_the_wrong_format_is_not_ok():
    result = run("validate", "--format", "step", ASSETS / "span_good.jsonl")
    assert "missing key(s) steps, step_labels" in result.output
    bad_input(result)


def test_validate_mc_splits_disjoint_by_id():
    train = ASSETS / "mc_value.jsonl"
    ok = run("validate", "--format", "mc-value", train, "--disjoint", ASSETS / "mc_value_val.jsonl")
    assert ok.exit_code == 0 and "no id shared with" in ok.output
    other = ASSETS / "mc_value_val_overlap.jsonl"
    result = run("validate", "--format", "mc-value", train, "--disjoint", other)
    assert f"id 'p2' is in {train}, {other}" in result.output
    assert bad_input(result) == f"{train}: 1 id(s) shared with {other}"
    assert "mc-value only" in bad_input(run("validate", "--format", "step", train, "--disjoint", other))


def test_stats_json_for_mc_values_has_exactly_the_card_keys():
    result = run("stats", "--format", "mc-value", "--json", ASSETS / "mc_value.jsonl")
    assert result.exit_code == 0
    stats = json.loads(result.output)
    assert list(stats) == list(STATS_KEYS) == ["rows", "v_eq_0", "v_eq_1", "v_mid", "v_10_90", "correct", "mean_v"]
    assert stats["rows"] == 8 and stats["v_eq_0"] == 0.25


def test_stats_table():
    result = run("stats", "--format", "mc-value", ASSETS / "mc_value.jsonl")
    assert result.exit_code == 0
    assert "v_eq_0" in result.output and "25.0%" in result.output and "mean_v" in result.output
    result = run("stats", "--format", "math-shepherd", ASSETS / "ms_ki.jsonl")
    assert "steps_incorrect" in result.output and "error_share" in result.output


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_stats_refuse_a_bad_file(fmt):
    name = {"mc-value": "mc_value_bad.jsonl", "math-shepherd": "ms_bad.jsonl", "processbench": "pb_bad.jsonl"}
    path = ASSETS / name.get(fmt, f"{fmt}_bad.jsonl")
    assert "row 0:" in bad_input(run("stats", "--format", fmt, "--json", path))


def test_join(tmp_path):
    step, span = ASSETS / "span_good_step.jsonl", ASSETS / "span_good.jsonl"
    out = tmp_path / "joined.jsonl"
    result = run("join", "--step", step, "--span", span, "--out", out)
    assert result.exit_code == 0 and "OK 7 rows" in result.output
    joined = rows(out)
    assert [r["steps"] for r in joined] == [r["steps"] for r in rows(step)]
    assert [r["hallucination_annotation"] for r in joined] == [r["hallucination_annotation"] for r in rows(span)]


def test_join_reports_each_mismatch_and_writes_nothing(tmp_path):
    data = rows(ASSETS / "span_good_step.jsonl")
    data[1]["step_labels"] = [1, 1, 1]
    data[4]["question"] = "Something else?"
    step = tmp_path / "step.jsonl"
    step.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    out = tmp_path / "joined.jsonl"
    result = run("join", "--step", step, "--span", ASSETS / "span_good.jsonl", "--out", out)
    assert result.output.splitlines() == [
        "row 1: step_labels [1, 1, 1] differ from those the <HAL> spans give, [1, 1, 0]",
        "row 4: the questions differ",
    ]
    assert "2 of 7 rows are not the same solution" in bad_input(result)
    assert not out.exists()


def test_convert_math_shepherd_round_trips(tmp_path):
    as_list = tmp_path / "list.jsonl"
    assert run("convert", "math-shepherd", ASSETS / "ms_ki.jsonl", "--to", "list", "--out", as_list).exit_code == 0
    assert rows(as_list) == rows(ASSETS / "ms_list.jsonl")
    as_ki = tmp_path / "ki.jsonl"
    assert run("convert", "math-shepherd", as_list, "--to", "ki", "--out", as_ki).exit_code == 0
    assert rows(as_ki) == rows(ASSETS / "ms_ki.jsonl")
    step = tmp_path / "step.jsonl"
    assert run("convert", "math-shepherd", as_ki, "--to", "step", "--out", step).exit_code == 0
    assert rows(step) == rows(ASSETS / "ms_step.jsonl")


def test_convert_step_and_processbench(tmp_path):
    pb = tmp_path / "pb.jsonl"
    assert run("convert", "step", ASSETS / "pb_step.jsonl", "--to", "processbench", "--out", pb).exit_code == 0
    back = tmp_path / "step.jsonl"
    assert run("convert", "processbench", pb, "--out", back).exit_code == 0
    assert rows(back) == rows(ASSETS / "pb_step.jsonl")
    ms = tmp_path / "ms.jsonl"
    assert run("convert", "step", back, "--to", "math-shepherd", "--out", ms).exit_code == 0
    assert [r["labels"] for r in rows(ms)] == [[True, False], [True, True], [False]]


def test_convert_ratings_with_neutral(tmp_path):
    out = tmp_path / "step.jsonl"
    assert run("convert", "processbench", ASSETS / "prm800k.jsonl", "--neutral", "0", "--out", out).exit_code == 0
    assert [r["step_labels"] for r in rows(out)] == [[1, 0], [1, 1]]
    out_pb = tmp_path / "pb.jsonl"
    result = run("convert", "processbench", ASSETS / "ratings.jsonl", "--to", "processbench", "--out", out_pb)
    assert result.exit_code == 0
    assert [r["label"] for r in rows(out_pb)] == [2, -1]


def test_convert_mc_value_traces_and_back(tmp_path):
    traces, back = tmp_path / "traces.jsonl", tmp_path / "rows.parquet"
    assert run("convert", "mc-value", ASSETS / "mc_value.jsonl", "--to", "traces", "--out", traces).exit_code == 0
    assert len(rows(traces)) == 3
    assert run("convert", "mc-value", traces, "--to", "rows", "--out", back).exit_code == 0
    assert rows(back) == rows(ASSETS / "mc_value.jsonl")


def test_unknown_input_suffix_is_bad_input(tmp_path):
    (tmp_path / "x.txt").write_text("hi", encoding="utf-8")
    assert "unknown file type" in bad_input(run("validate", "--format", "step", tmp_path / "x.txt"))


def _wired() -> bool:
    data_cli = REPO / "src" / "posttrainlab" / "cli" / "data.py"
    return data_cli.is_file() and "register(" in data_cli.read_text(encoding="utf-8")


@pytest.mark.skipif(not _wired(), reason="cli/data.py does not call formats.register yet")
def test_posttrain_main_exit_codes(tmp_path):
    def posttrain(*args: str) -> subprocess.CompletedProcess:
        code = "import sys; from posttrainlab.cli import main; main(sys.argv[1:])"
        env = {**os.environ, "COLUMNS": "200"}
        return subprocess.run(
            [sys.executable, "-c", code, "data", *map(str, args)], capture_output=True, text=True, env=env
        )

    ok = posttrain("convert", "sharp", "--span", ASSETS / "span_good.jsonl", "--out", tmp_path / "s.jsonl")
    assert ok.returncode == 0, ok.stderr
    bad = posttrain("validate", "--format", "step", ASSETS / "step_bad.jsonl")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"posttrain: error: {ASSETS / 'step_bad.jsonl'}: 9 of 9 rows break the step format"
    ]
    assert len(bad.stdout.splitlines()) == 9
    usage = posttrain("validate", "--format", "nope", ASSETS / "step_bad.jsonl")
    assert usage.returncode == 2
