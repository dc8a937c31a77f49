"""``posttrain eval compare A B``: the table and verdict, ``--json``, ``--out DIR/compare.json``, bad input, no torch.

The two files: 50 problems, 30 both right, 8 both wrong, 10 right only in A (b), 2 right only in B (c);
A's accuracy 40/50 = 80.0%, B's 32/50 = 64.0%, B − A = -16.0 points; McNemar p = 2 · 79 / 4096 = 0.039
(tests/eval/test_compare.py). The ten ``addition`` problems are the ten A-only ones (b = 10, c = 0:
p = 2 / 1024 = 0.002); ``subtraction`` holds the rest (b = 0, c = 2: p = 0.5).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cli_capture import cli
from posttrainlab.cli.compare import register


def write_pair(root: Path) -> tuple[Path, Path]:
    a_rows, b_rows = [], []
    kinds = [(True, False)] * 10 + [(False, True)] * 2 + [(True, True)] * 30 + [(False, False)] * 8
    for i, (x, y) in enumerate(kinds):
        cat = "addition" if i < 10 else "subtraction"
        a_rows.append({"id": f"test-{i:04d}", "category": cat, "prompt": "q", "correct": x})
        b_rows.append({"id": f"test-{i:04d}", "category": cat, "correct": y})
    (root / "sft").mkdir(parents=True)
    a = root / "sft" / "samples.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in a_rows), encoding="utf-8")
    b = root / "grpo.jsonl"
    b.write_text("".join(json.dumps(r) + "\n" for r in b_rows), encoding="utf-8")
    return a.parent, b


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """posttrain eval (test)."""

    register(app)
    return app


def test_table_and_verdict(app, tmp_path):
    a, b = write_pair(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    overall = next(line for line in lines if "overall" in line and "│" in line)
    cells = [c.strip() for c in overall.split("│")[1:-1]]
    assert cells[1:] == ["50", "80.0%", "64.0%", cells[4], "10", "2", "0.039"]
    assert cells[4].startswith("-16.0 [")
    addition = [c.strip() for c in next(line for line in lines if "addition" in line).split("│")[1:-1]]
    assert addition[1:3] == ["10", "100.0%"] and addition[5:] == ["10", "0", "0.002"]
    text = " ".join(result.output.split())
    assert "B − A overall = -16.0 points [" in text and "p = 0.039: significant at 0.05" in text
    assert "Significant at 0.05: overall, addition. Not significant: subtraction." in text
    assert not (tmp_path / "compare.json").exists()


def test_json_and_out(app, tmp_path):
    a, b = write_pair(tmp_path)
    out = tmp_path / "cmp"
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output)
    assert printed == json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert list(printed) == ["a", "b", "overall", "categories", "provenance"]
    assert printed["a"] == str(a) and printed["b"] == str(b)
    o = printed["overall"]
    assert (o["n"], o["b"], o["c"], o["significant"]) == (50, 10, 2, True)
    assert o["acc_a"] == 0.8 and o["acc_b"] == 0.64 and o["mcnemar_p"] == pytest.approx(2 * 79 / 4096)
    assert list(printed["categories"]) == ["addition", "subtraction"]
    assert printed["categories"]["subtraction"]["mcnemar_p"] == 0.5
    assert {"commit", "dirty", "versions", "device", "argv", "time"} <= set(printed["provenance"])


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["{tmp}/sft", "{tmp}/nowhere.jsonl"], "nowhere.jsonl: no such file or folder"),
        (["{tmp}/sft", "{tmp}/short.jsonl"], "cover different problems: 49 only in"),
        (["{tmp}/sft", "{tmp}/grpo.jsonl", "--out", "{tmp}/grpo.jsonl"], "grpo.jsonl: exists and is not a folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, fragment):
    write_pair(tmp_path)
    (tmp_path / "short.jsonl").write_text(json.dumps({"id": "test-0000", "category": "addition", "correct": True}))
    code, _, err = cli(capsys, "eval", "compare", *[a.format(tmp=tmp_path) for a in args])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("posttrain: error: ") and fragment in err


def test_compare_does_not_import_torch(tmp_path):
    a, b = write_pair(tmp_path)
    code = (
        "import sys\nfrom posttrainlab.cli import main\n"
        f"try:\n    main(['eval', 'compare', {str(a)!r}, {str(b)!r}, '--out', {str(tmp_path / 'o')!r}])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o" / "compare.json").is_file()


def test_an_earlier_compare_json_is_kept_unless_overwrite(capsys, tmp_path):
    """One overwrite rule for every eval verb (cli.options.check_results): compare.json used to be replaced silently."""
    a, b = write_pair(tmp_path)
    out = tmp_path / "cmp"
    assert cli(capsys, "eval", "compare", str(a), str(b), "--out", str(out), "--json")[0] == 0
    (out / "compare.json").write_text("earlier")
    code, _, err = cli(capsys, "eval", "compare", str(a), str(b), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "already holds eval results (compare.json from" in err
    assert (out / "compare.json").read_text() == "earlier"
    assert cli(capsys, "eval", "compare", str(a), str(b), "--out", str(out), "--overwrite")[0] == 0
    assert json.loads((out / "compare.json").read_text())["overall"]["n"] == 50
