"""The quickstart's log (``StageLog``): the console lines, ``OUT/quickstart.log`` and ``OUT/run.json``.

The plan it numbers is ``plan.STAGES``'s, the one ``run.run_quickstart`` walks.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from posttrainlab.data.jsonl import json_object_or_empty
from posttrainlab.progress import clock
from posttrainlab.quickstart.config import QuickstartConfig
from posttrainlab.run_layout import RUN_JSON, STAGE_LOG


class StageLog:
    """Runs, numbers and records each stage (README "The main job").

    The console gets a ``stage 3/11: sft`` header and a ``stage 3/11: sft done in 2:29`` end line with the total
    so far, and how long the rest took when an earlier run timed every one of them (the latest "done" of each in
    ``OUT/quickstart.log``); a stage already done says ``cached``. ``OUT/quickstart.log`` gets a tab-separated
    line at each stage's start and end (UTC time, ``stage i/M``, name, start/done/cached/failed/interrupted,
    seconds), whatever the console is; ``OUT/run.json`` keeps each finished stage's time and status (the report
    reads it). M is the count of ``plan``, the names of the stages in the order they will run.
    """

    def __init__(self, out: Path, cfg: QuickstartConfig, plan: list[str] | None = None, log_name: str = STAGE_LOG):
        """``cfg``: any dataclass with a ``preset`` (the study's config too); ``log_name``: the log's file name."""
        from posttrainlab.quickstart.plan import planned_stages

        self.out, self.cfg = out, cfg
        self.path, self.log = out / RUN_JSON, out / log_name
        before = json_object_or_empty(self.path)  # the run.json an earlier invocation left
        stages = [s for s in before.get("stages", []) if isinstance(s, dict)]
        self.made = {s["name"]: s for s in stages if s.get("status") == "done"}  # what an earlier invocation made
        self.invocations = [i for i in before.get("invocations", []) if isinstance(i, dict)]
        if before and not self.invocations:  # a run.json from before invocations were kept: its run was the first
            self.invocations = [{"run": 1, "started": before.get("started"), "provenance": before.get("provenance")}]
        self.number = len(self.invocations) + 1
        self.invocation = {"run": self.number, "started": utc_now(), "ran": [], "provenance": None}
        self.invocations.append(self.invocation)
        self.state = {"preset": cfg.preset, "stages": [], "started": before.get("started", self.invocation["started"]),
                      "config": asdict(cfg), "invocations": self.invocations}  # fmt: skip
        if "provenance" in before:
            self.state["provenance"] = before["provenance"]
        self.plan = list(plan) if plan is not None else planned_stages(cfg, out)
        self.position, self.t0 = 0, time.time()
        self.earlier = _earlier_times(self.log)
        job = Path(log_name).stem
        self._append(f"# {utc_now()} {job} preset={cfg.preset}: {len(self.plan)} stages: {' '.join(self.plan)}")

    def stage(self, name: str, done: bool, fn, console) -> None:
        i, m = self._number(name)
        tag, t0 = f"stage {i}/{m}: {name}", time.time()
        if done:
            status = "cached"
            console.print(f"[dim]{tag} cached (already done, reusing it)[/dim]")
        else:
            console.rule(f"[bold]{tag}")
            self._record(i, m, name, "start", None)
            try:
                fn()
            except BaseException as e:
                failed = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
                self._record(i, m, name, failed, time.time() - t0)
                raise
            status = "done"
        seconds = time.time() - t0
        self._record(i, m, name, status, seconds)
        if status == "done":
            console.print(f"{tag} done in {clock(seconds)} ({self._elapsed()})")
        entry = {"name": name, "seconds": round(seconds, 1), "status": status, "run": self.number}
        if status == "done":
            self.invocation["ran"].append(name)
        elif name in self.made:  # reused: the time and run of the invocation that made it
            entry = {**self.made[name], "run": self.made[name].get("run", 1)}
        self.state["stages"].append(entry)
        self.save()

    def _number(self, name: str) -> tuple[int, int]:
        """``(i, M)`` of the stage now starting: the plan is walked in order, so ``name`` is the next one."""
        if self.position >= len(self.plan) or self.plan[self.position] != name:
            expected = self.plan[self.position] if self.position < len(self.plan) else "none"
            raise RuntimeError(f"stage {name} run out of the plan's order (next planned: {expected})")
        self.position += 1
        return self.position, len(self.plan)

    def _elapsed(self) -> str:
        total = f"total {clock(time.time() - self.t0)}"
        rest = self.plan[self.position :]
        if rest and all(name in self.earlier for name in rest):
            total += f"; rest ~{clock(sum(self.earlier[n] for n in rest))} by the last run"
        return total

    def _record(self, i: int, m: int, name: str, status: str, seconds: float | None) -> None:
        self._append(f"{utc_now()}\tstage {i}/{m}\t{name}\t{status}\t{'-' if seconds is None else f'{seconds:.1f}'}")

    def _append(self, line: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def record_invocation(self, provenance: dict) -> None:
        """This invocation's provenance, recorded before the report is rebuilt; it becomes the run's when the invocation
        made something (module docstring)."""
        self.invocation["provenance"] = provenance
        if self.invocation["ran"] or "provenance" not in self.state:
            self.state["provenance"] = provenance
        self.save()

    def save(self) -> None:
        from posttrainlab.data.atomic import write_text

        self.state["finished"] = utc_now()
        write_text(self.path, json.dumps(self.state, indent=2, allow_nan=False) + "\n")


def _earlier_times(log: Path) -> dict[str, float]:
    """Each stage's seconds at its latest "done" line in ``quickstart.log`` (every run appends to it)."""
    rows = [line.split("\t") for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []
    return {r[2]: float(r[4]) for r in rows if len(r) == 5 and r[3] == "done" and r[4].replace(".", "", 1).isdigit()}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
