"""Run ``posttrain ARGS`` in a fresh interpreter and report whether it imported torch (importable from tests/cli).

A check that must run before torch is imported can only be tested in a process that has not imported it yet: in
the test process itself, an earlier test (or a fixture) usually has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_CODE = """
import json, sys
from posttrainlab.cli import main
try:
    main(sys.argv[1:])
    code = 0
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


@dataclass
class Ran:
    code: int
    torch: bool  # whether torch was imported by the time the command ended
    out: str
    err: str

    @property
    def line(self) -> str:
        """stderr, which must be one line."""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


def fresh(*args: str, cwd: Path | None = None) -> Ran:
    proc = subprocess.run([sys.executable, "-c", _CODE, *args], capture_output=True, text=True, cwd=cwd, timeout=300)
    *printed, last = proc.stdout.strip().splitlines() or [""]
    result = json.loads(last)
    return Ran(result["code"], result["torch"], "\n".join(printed), proc.stderr)
