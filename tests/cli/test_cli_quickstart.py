"""``posttrain quickstart``'s ``--verbose``: the libraries are quiet by default and loud with it, before any stage."""

from __future__ import annotations

import pytest

from cli_capture import cli
from posttrainlab import progress, quickstart


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """``run_quickstart`` replaced: it records whether the libraries were left loud (``--verbose``) and writes a
    one-table report."""
    seen: list[bool] = []

    def run(out, cfg, console=None, rerun=True):
        seen.append(progress._verbose[0])
        (tmp_path / "report.md").write_text(  # the console shows the report's Results table
            "## Results\n| method | accuracy |\n|:---|---:|\n| SFT | 41.6% |\n## Overall accuracy\n| SFT | 0% |\n"
        )
        return tmp_path / "report.html"

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
    assert "| SFT | 41.6% |" in out and f"report: {tmp_path / 'report.md'}" in flat
    assert "| SFT | 0% |" not in out
