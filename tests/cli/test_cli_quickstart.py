"""``posttrain quickstart``'s ``--verbose``: the libraries are quiet by default and loud with it, before any stage."""

from __future__ import annotations

import pytest

from cli_capture import cli
from posttrainlab import progress, quickstart
from posttrainlab.data.jsonl import write_json
from posttrainlab.report import results
from posttrainlab.run_layout import RESULTS_JSON, RunLayout


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """``run_quickstart`` replaced: it records whether the libraries were left loud (``--verbose``) and writes a
    one-table report."""
    seen: list[bool] = []

    def run(out, cfg, console=None, rerun=True):
        seen.append(progress._verbose[0])
        layout = RunLayout(out)
        layout.report_files.mkdir(parents=True)  # the console shows the report's base note and Results table
        summary = {"preset": "default", "base_sha256": results.reference("default")["base_sha256"],
                   "policies": [{"method": "sft", "accuracy": 0.416, "n": 500}], "search": {}}  # fmt: skip
        write_json(layout.report_files / RESULTS_JSON, summary)
        layout.report_md.write_text("## Overall accuracy\n| SFT | 0% |\n")
        return layout.report_html

    monkeypatch.setattr(quickstart, "run_quickstart", run)
    yield seen
    progress.quiet_libraries(True)  # the libraries as they start: bars on, nothing silenced
    progress._verbose[0] = False


@pytest.mark.parametrize("flags,verbose", [([], False), (["--verbose"], True)])
def test_verbose_reaches_the_libraries_before_the_stages(fake_run, capsys, tmp_path, flags, verbose):
    code, out, err = cli(capsys, "quickstart", "--out", str(tmp_path / "run"), *flags)
    assert code == 0, err
    assert fake_run == [verbose]
    flat = out.replace("\n", "")  # rich wraps a long path at the console's width (a long tmp path under xdist)
    assert f"report: {tmp_path / 'run' / 'report.md'}" in flat
    assert "| SFT | 0% |" not in out  # the report's other sections stay in report.md


def test_the_console_ends_with_the_base_note_and_the_results_table(fake_run, capsys, tmp_path):
    code, out, err = cli(capsys, "quickstart", "--out", str(tmp_path / "run"))
    assert code == 0, err
    flat = " ".join(out.split())
    assert "the README's reference base, so every number below should equal the README's" in flat
    # rendered as a table (not Markdown source), at 120 columns in a log: the row's label whole, on one line
    row = next(line for line in out.splitlines() if "SFT (greedy, n=500)" in line)
    assert "41.6%" in row and "|" not in row
    assert out.index("reference base") < out.index("SFT (greedy, n=500)")
