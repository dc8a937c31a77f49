"""End to end: generate -> annotate (``posttrain serve --judge arith``) -> views -> Step and Span PRMs -> held-out eval.

Two policies feed the annotator. The tiny model (untrained here) exercises the real generation path
through ``posttrain generate``; its solutions are all wrong, so on their own they would teach a PRM
nothing. ``MixedPolicy`` (tests/label/sharp/conftest.py) gives the mix of right and wrong solutions a PRM
needs, with arith-v1's controlled corruptions. Both are annotated by the program judge served by
``posttrain serve`` in a subprocess, as a user would run it; a Step PRM (``configs/prm/step.yaml``) and
a Span PRM (``configs/prm/span.yaml``) train on the mixed corpus's train split and are scored on its
held-out problems with ``posttrain eval prm``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_doubles import MixedPolicy

from posttrainlab.cli import main
from posttrainlab.data.jsonl import read_jsonl
from posttrainlab.label.annotate import load_solutions
from posttrainlab.label.generate import GenerateConfig, run_generate

ROOT = Path(__file__).resolve().parents[3]
PRM_FAST = ["optim.max_steps=40", "optim.batch_size=8", "optim.learning_rate=0.003", "optim.save_steps=1000"]


def cli(args: list[str]) -> None:
    """``posttrain ARGS`` in-process; a clean exit is fine, any other is a failure."""
    try:
        main(args)
    except SystemExit as e:
        assert e.code in (0, None), f"posttrain {' '.join(args[:2])} exited {e.code}"


def serve_judge():
    """``posttrain serve --judge arith --port 0`` in a subprocess: (process, url)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "posttrainlab", "serve", "--judge", "arith", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline()
    if " at http" not in line:
        proc.kill()
        raise RuntimeError(f"posttrain serve did not start: {line}{proc.stdout.read()}")
    return proc, line.split(" at ", 1)[1].split(" ", 1)[0]


@pytest.mark.slow
def test_generate_annotate_convert_train_compare(tmp_path, arith_dir, capsys):
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    tiny = init_model(
        TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                        num_key_value_heads=2),
        tmp_path / "tiny",
    )  # fmt: skip
    cli(["generate", "--model", str(tiny), "--data", f"{arith_dir}:test", "--k", "4", "--limit", "3",
          "--out", str(tmp_path / "gen-tiny"), "--max-new-tokens", "24", "--threads", "1"])  # fmt: skip
    run_generate(
        GenerateConfig(model="mixed", data=f"{arith_dir}:dev", out=tmp_path / "gen-mixed", limit=80), MixedPolicy()
    )
    proc, url = serve_judge()
    try:
        for name in ("tiny", "mixed"):
            cli(["annotate", "--model-name", "arith-judge", "--model-url", url, "--data", str(tmp_path / f"gen-{name}"),
                  "--out", str(tmp_path / f"ann-{name}"), "--num-threads", "4", "--test-share", "0.2"])  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    tiny_summary = json.loads((tmp_path / "ann-tiny/sharp/summary.json").read_text())
    rows, skipped = load_solutions(tmp_path / "gen-tiny")  # a random model may sample an empty solution
    assert len(rows) + skipped == 12 and len(rows) >= 9
    assert tiny_summary["annotated"] == len(rows) and tiny_summary["failed"] == 0
    sharp = tmp_path / "ann-mixed" / "sharp"
    summary = json.loads((sharp / "summary.json").read_text())
    assert summary["failed"] == 0 and summary["kept"] == 320 and not summary["warnings"]  # dev: no test split
    test_steps = read_jsonl(sharp / "test" / "step.jsonl")
    assert len(test_steps) == 64 and any(0 in r["step_labels"] for r in test_steps)

    metrics = {}
    for kind in ("step", "span"):
        out = tmp_path / f"prm-{kind}"
        cli(["train", "prm", "--config", str(ROOT / f"configs/prm/{kind}.yaml"), f"model={tiny}",
              f"output_dir={out}", f"dataset.path={sharp / 'train' / f'{kind}.jsonl'}", *PRM_FAST])  # fmt: skip
        cli(["eval", "prm", "--model", str(out), "--data", str(sharp / "test" / "step.jsonl"),
              "--out", str(tmp_path / f"eval-{kind}"), "--no-progress"])  # fmt: skip
        metrics[kind] = json.loads((tmp_path / f"eval-{kind}" / "metrics.json").read_text())
    from posttrainlab.eval.step_metrics import step_auroc

    for kind, m in metrics.items():
        assert m["solutions"] == 64, kind
        scored = read_jsonl(tmp_path / f"eval-{kind}" / "scores.jsonl")  # the AUROC is the one its scores give
        assert m["step"]["auroc"] == step_auroc([r["labels"] for r in scored], [r["scores"] for r in scored]), kind
    with capsys.disabled():
        print(
            "\nheld-out step AUROC: "
            + ", ".join(f"{k} PRM {m['step']['auroc']}" for k, m in metrics.items())
            + f"; clean share {summary['splits']['all']['clean_share']:.2f}"
        )
