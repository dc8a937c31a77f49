"""The README a user reads in five minutes: two set-up commands first, at most 250 lines, and a results table that
is the report's own (``report.results`` rendered from the reference run's summary), so it cannot drift from the
code."""

from __future__ import annotations

import re
from pathlib import Path

from posttrainlab.report.render import to_markdown
from posttrainlab.report.results import reference, results_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_two_commands_first_and_short():
    text = README.read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    assert [line.split("#")[0].strip() for line in first.strip().splitlines()] == ["make quickstart", "make test"]
    assert len(text.splitlines()) <= 250
    assert not re.search(r"RESULTS_|NEIGHBOUR_RESULT|TEST_TIME|SUITE_MINUTES", text), "a placeholder is left"


def test_the_results_table_is_the_reports():
    text = README.read_text(encoding="utf-8")
    found = re.findall(r"<!-- results: ([\w-]+) -->\n(.*?)\n<!-- /results -->", text, re.S)
    assert [preset for preset, _ in found] == ["default"]
    summary = reference("default")
    shown = found[0][1].strip()
    assert shown == to_markdown(results_blocks(summary)[1:]).strip()  # the table and its note, without the heading
    assert summary["base_sha256"][:8] in text and summary["commit"] in text
