"""docs/experiments.md keeps every measured run reproducible as one command: each block marked ``<!-- stages: NAME
-->`` must plan the stages, with the settings (``stages.json`` hashes), that NAME's runs were made with.

The hashes below were computed with the presets as they were when those runs were made (commit b04679d: ``stable``
is the fp32 default, ``default`` the old default, ``effects`` a retired preset; ``default-c6d5ced`` is the main job
before its PRM trained on length-grouped batches, ``default-rft`` the main job until it stopped training RFT and its
control, ``default-fp32`` the main job until its SFT and PRM trained under bf16 autocast). A change that moves one
of them changes what a reader of that page would run: either keep the hash (a new setting joins stage records only
when set: ``quickstart.plan``'s legacy tables) or measure again and update the page.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from posttrainlab.quickstart import place, quickstart_config
from posttrainlab.quickstart.plan import Run, plan
from posttrainlab.quickstart.record import StageRecords
from posttrainlab.run_layout import RunLayout

DOC = Path(__file__).resolve().parents[1] / "docs" / "experiments.md"

SHARED = {"prepare": "260ade5f9e70c742", "report": "35d6cbd33ccf5eb2"}
STABLE_BASE, OLD_BASE = {"pretrain": "f1b708d9558bfa23"}, {"pretrain": "62704744aa95afb2"}
POLICIES = {
    "sft": "eef20d97243080cd",
    "eval-sft": "3192e65fbe4165e9",
    "rft": "d33d4a6201a0982c",
    "eval-rft": "c17d20b2ab9d52a0",
    "sft-continued": "6d9c3042109af28e",
    "eval-sft-continued": "6378cc7615cbb667",
    "arith-prm": "96db7ef81449ce2d",
}
PRM = {"prm": "6721b142ab316c48", "eval-prm": "6021940e7f31b3ba", "best-of-n": "6e5e3c7c0ec0961b",
       "beam-search": "fc3acbcbfa368c0b"}  # fmt: skip
RFT = ("rft", "eval-rft", "sft-continued", "eval-sft-continued")
FP32 = SHARED | STABLE_BASE | {k: v for k, v in POLICIES.items() if k not in RFT} | PRM
EXPECTED = {
    "default": SHARED | STABLE_BASE | {
        "sft": "97ac4a0268bf37e7", "eval-sft": "3d1635d07bd6d0c3", "arith-prm": "6fdcc6bd5b1837c0",
        "prm": "64f21436ff1a4a32", "eval-prm": "e8af1392be3aceb1", "best-of-n": "6831ccd242859413",
        "beam-search": "a587bcdf4a6232ed"},
    "default-fp32": FP32,
    "default-rft": SHARED | STABLE_BASE | POLICIES | PRM,
    "default-c6d5ced": SHARED | STABLE_BASE | POLICIES | {
        "prm": "b2b5df13394286dd", "eval-prm": "19110d7a60fdb3f1", "best-of-n": "cbcab8afbe98d5d7",
        "beam-search": "18a2ebe9bf430a7b"},
    "scarce": SHARED | STABLE_BASE | {
        "sft": "33dc79b4e081b3d3", "eval-sft": "0e8c240414f6ba9e", "rft": "ace1e1a1bc1661d7",
        "eval-rft": "f5ad0da86b82dbbd", "sft-continued": "1ce871eec508ad9c", "eval-sft-continued": "537169abc5dc7c49"},
    "old-default": SHARED | OLD_BASE | {
        "sft": "49e372e1b4b46ce8", "eval-sft": "80c12081415703ae", "dpo": "46d49e0512a6e7a6",
        "eval-dpo": "13da5cfc2d542c21", "dpo-policy": "af9e684a089a8d08", "eval-dpo-policy": "645660e9e5459d41",
        "grpo": "ca126049edf12402", "eval-grpo": "d0ca2b611340529c", "arith-prm": "ffed09b4cc40c00a",
        "prm": "cc812cc78347af81", "eval-prm": "5ed51c8155b8514b", "best-of-n": "81fcb7302ca200c5",
        "beam-search": "62d8b434576197c8"},
    "effects": SHARED | OLD_BASE | {
        "sft": "49e372e1b4b46ce8", "eval-sft": "32ec87220354f429", "dpo": "46d49e0512a6e7a6",
        "eval-dpo": "bf473f524597040a", "dpo-policy": "af9e684a089a8d08", "eval-dpo-policy": "99c3af34a0000680",
        "grpo": "1ded409392c376b0", "eval-grpo": "26ead5ced924c0f3", "rft": "437bcdead5104331",
        "eval-rft": "a9cc80fc21c4160c", "sft-continued": "4c10aa401bc142bd", "eval-sft-continued": "a14308f054023686"},
}  # fmt: skip


def documented() -> dict[str, list[str]]:
    """``{name: argv}`` of every marked bash block (line continuations joined)."""
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- stages: ([\w-]+) -->\s*```bash\n(.*?)```", text, re.S)
    return {name: shlex.split(body.replace("\\\n", " ")) for name, body in blocks}


def stage_hashes(argv: list[str], tmp_path: Path) -> dict[str, str]:
    assert argv[:2] == ["posttrain", "quickstart"], argv
    args, preset, overrides = argv[2:], "default", []
    while args:
        arg = args.pop(0)
        if arg in ("--out", "--preset"):
            value = args.pop(0)
            preset = value if arg == "--preset" else preset
        else:
            overrides.append(arg)
    cfg = quickstart_config(preset, overrides)
    layout, base = RunLayout(tmp_path / "run"), tmp_path / "base"
    place(cfg, layout, base)
    records = StageRecords(layout)
    for stage in plan(Run(cfg, layout, base=base)):
        records.hashes[stage.name] = records.entry(stage)["hash"]
    return records.hashes


def test_every_experiment_is_documented():
    assert set(documented()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_documented_command_plans_the_measured_stages(name, tmp_path):
    assert stage_hashes(documented()[name], tmp_path) == EXPECTED[name]


def test_the_reports_reference_run_has_the_default_stages():
    """The report promises the README's numbers only to a run with the reference run's stage hashes
    (``report.results.base_note``): those are the default's."""
    from posttrainlab.report.results import reference

    expected = {k: v for k, v in EXPECTED["default"].items() if k != "report"}
    assert reference("default")["stages"] == expected
