"""``posttrain quickstart --preset smollm2``: every stage on the real model (SmolLM2-135M-Instruct), shrunk to a
few problems and steps with ``key=value`` overrides, so the whole real-model pipeline runs in the suite.

It covers the real-model paths of ``data arith-prm`` (sampled from the SFT policy), ``train prm`` from a LoRA-merged
policy, ``eval prm`` and ``eval best-of-n``; the full-size preset is measured in the README.
"""

from __future__ import annotations

import json
import subprocess
import sys

SHRINK = [
    *("sft.dataset.limit=8", "sft.optim.max_steps=2", "sft.optim.batch_size=4"),
    *("dpo.dataset.limit=4", "dpo.optim.max_steps=1", "dpo.optim.batch_size=4"),
    *("grpo.dataset.limit=2", "grpo.optim.max_steps=1", "grpo.optim.batch_size=4", "grpo.max_completion_length=8"),
    *("eval.limit=4", "eval.max_new_tokens=24"),
    *("process.limit=2", "process.prm.optim.max_steps=2", "process.bon_limit=2", "process.bon_n=2"),
]


def test_every_stage_runs_on_the_real_model(smollm2, tmp_path):
    out = tmp_path / "run"
    r = subprocess.run(
        [sys.executable, "-m", "posttrainlab", "quickstart", "--preset", "smollm2", "--out", str(out), *SHRINK],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    state = json.loads((out / "run.json").read_text())
    names = [s["name"] for s in state["stages"]]
    assert names == [
        *("prepare", "import", "eval-base", "sft", "eval-sft", "dpo", "eval-dpo", "grpo", "eval-grpo"),
        *("arith-prm", "prm", "eval-prm", "best-of-n", "report"),
    ]
    assert str(smollm2) in state["base_model"] and (out / "base").resolve() == smollm2.resolve()
    base = json.loads((out / "eval" / "base" / "metrics.json").read_text())
    assert base["n"] == 4
    for method in ("sft", "dpo", "grpo"):
        assert (out / method / "config.json").is_file() and not (out / method / "adapter_config.json").exists()
    assert json.loads((out / "prm-eval" / "metrics.json").read_text())["solutions"] > 0
    assert json.loads((out / "best-of-n" / "bon.json").read_text())["problems"] == 2
    assert "smollm2" in (out / "report.md").read_text()
