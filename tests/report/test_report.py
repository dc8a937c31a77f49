"""The quickstart report on synthetic run folders: numbers formatted right, HTML self-contained, PNGs valid.

Fixtures have the exact shape ``posttrain quickstart`` writes (``posttrainlab.report.build`` docstring).
Hand-checked numbers: SFT accuracy 0.43 with interval [0.387, 0.474] reads ``43.0% [38.7, 47.4]``;
GRPO multiplication 0.62 [0.52, 0.71] against SFT's 0.40 [0.31, 0.50] is +22.0 points with intervals
that do not overlap (0.52 > 0.50); DPO's multiplication 0.44 [0.35, 0.54] overlaps SFT's.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from posttrainlab.cli.report import register
from posttrainlab.errors import BadInput
from posttrainlab.report import build_report, load_run, plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CATS = ("addition", "subtraction", "multiplication", "multi_step", "word_problem")


def acc(value: float, lo: float, hi: float, n: int = 100) -> dict:
    return {"value": value, "ci95": [lo, hi], "correct": round(value * n), "n": n}


def metrics(method: str, overall: tuple, per_cat: dict, outcomes: dict, preference: bool = False) -> dict:
    m = {
        "model": f"runs/x/{method}",
        "data": "data/arith-v1",
        "split": "test",
        "n": 500,
        "accuracy": acc(*overall, n=500),
        "per_category": {c: acc(*per_cat[c]) for c in CATS},
        "outcomes": outcomes,
        "format_rate": 0.98,
        "generation": {"seconds": 12.5, "requests_per_s": 40.0},
    }
    if preference:
        m["preference"] = {
            "method": "implicit_reward",
            "accuracy": acc(0.81, 0.77, 0.84, n=400),
            "per_corruption": {
                "arithmetic_slip": acc(0.66, 0.57, 0.74),
                "operand_error": acc(0.72, 0.63, 0.80),
                "inconsistent_answer": acc(0.90, 0.83, 0.94),
                "missing_answer": acc(0.96, 0.90, 0.98),
            },
        }
    return m


SFT_CATS = {c: (0.44, 0.35, 0.54) for c in CATS} | {"multiplication": (0.40, 0.31, 0.50)}
OUTCOMES = {"correct": 0.43, "wrong_answer": 0.47, "missing_answer": 0.06, "malformed": 0.04}


def write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")


def write_log(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_run(root: Path, full: bool = True) -> Path:
    """A run folder: SFT only, or the full run (pretrain, SFT, DPO, GRPO, base eval, preference, pass@k)."""
    stages = [("prepare", 3.2, "done"), ("pretrain", 0.0, "cached"), ("sft", 245.0, "done"), ("eval-sft", 30.1, "done")]
    stages += [("dpo", 130.0, "done"), ("grpo", 610.0, "done")] if full else [("dpo", 0, "skipped")]
    write(
        root / "run.json",
        {
            "preset": "smoke",
            "stages": [{"name": n, "seconds": s, "status": st} for n, s, st in stages],
            "base_model": "cache/base-1a2b",
            "started": "2025-01-01T10:00:00",
            "finished": "2025-01-01T10:17:00",
        },
    )
    write_log(
        root / "sft" / "train_log.jsonl",
        [{"step": 5 * i, "epoch": i / 10, "loss": 2.0 / i, "learning_rate": 1e-4} for i in range(1, 9)]
        + [{"train_loss": 0.9, "train_runtime": 245.0}],
    )
    sft = metrics("sft", (0.43, 0.387, 0.474), SFT_CATS, OUTCOMES)
    write(root / "eval" / "sft" / "metrics.json", sft)
    if not full:
        return root
    write(
        root / "base" / "pretrain.json",
        {
            "heldout_accuracy": {"+": 0.97, "-": 0.71, "*": 0.99},
            "parameters": 3_400_000,
            "log_history": [{"step": 50 * i, "loss": 3.0 / i} for i in range(1, 12)],
            "contamination": {"checked_against": ["test", "dev"], "overlap": 0, "corpus_items": 2500},
        },
    )
    dpo_log = [
        {"step": i, "loss": 0.69 - 0.02 * i, "rewards/accuracies": 0.5 + 0.03 * i, "rewards/margins": 0.1 * i}
        for i in range(1, 12)
    ]
    write_log(root / "dpo" / "train_log.jsonl", dpo_log)
    grpo_log = [
        {"step": i, "reward": 0.4 + 0.01 * i, "kl": 0.001 * i, "frac_reward_zero_std": 0.6 - 0.01 * i, "loss": 0.01}
        for i in range(1, 31)
    ]
    write_log(root / "grpo" / "train_log.jsonl", grpo_log)
    write(
        root / "eval" / "base" / "metrics.json",
        metrics(
            "base",
            (0.05, 0.034, 0.073),
            {c: (0.05, 0.02, 0.11) for c in CATS},
            {"correct": 0.05, "wrong_answer": 0.15, "missing_answer": 0.3, "malformed": 0.5},
        ),
    )
    dpo = metrics(
        "dpo", (0.45, 0.407, 0.494), SFT_CATS | {"multiplication": (0.44, 0.35, 0.54)}, OUTCOMES, preference=True
    )
    write(root / "eval" / "dpo" / "metrics.json", dpo)
    grpo = metrics(
        "grpo",
        (0.51, 0.466, 0.554),
        SFT_CATS | {"multiplication": (0.62, 0.52, 0.71)},
        {"correct": 0.51, "wrong_answer": 0.47, "missing_answer": 0.01, "malformed": 0.01},
    )
    grpo["pass_at_k"] = {"k": 8, "value": 0.72, "per_category": {c: 0.7 for c in CATS}}
    write(root / "eval" / "grpo" / "metrics.json", grpo)
    return root


@pytest.fixture(scope="module")
def full_report(tmp_path_factory) -> tuple[Path, str, str]:
    run = make_run(tmp_path_factory.mktemp("full") / "run")
    md_path, html_path = build_report(run)
    return run, md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")


def test_markdown_has_the_fixture_numbers(full_report):
    run, md, _ = full_report
    # overall accuracy with interval, count, format rate and eval speed
    assert "| SFT | 43.0% [38.7, 47.4] | 215 / 500 | 98.0% | 40.0 |" in md
    # per-category: methods side by side, in base, SFT, DPO, GRPO order
    assert "| multiplication | 5.0% [2.0, 11.0] | 40.0% [31.0, 50.0] | 44.0% [35.0, 54.0] | 62.0% [52.0, 71.0] |" in md
    assert "| category | base | SFT | DPO | GRPO |" in md
    # outcome shares
    assert "| GRPO | 51.0% | 47.0% | 1.0% | 1.0% |" in md
    # preference accuracy, with how it was measured
    assert "| arithmetic_slip | 66.0% [57.0, 74.0] |" in md and "DPO by implicit_reward" in md
    # pass@k (bare numbers per category)
    assert "| GRPO | 8 | 72.0% | 70.0% |" in md
    # base model and stage timings
    assert (
        "| - | 71.0% |" in md
        and "3.4M parameters" in md
        and "no overlap (checked against: test, dev; corpus items: 2500)" in md
    )
    assert "| sft | done | 4 min 05 s |" in md and "| pretrain | cached | 0.0 s |" in md
    assert "| total |  | 16 min 58 s |" in md  # 3.2 + 245 + 30.1 + 130 + 610 = 1018.3 s


def test_what_changed_states_only_separated_intervals(full_report):
    _, md, _ = full_report
    grpo = next(line for line in md.splitlines() if line.startswith("GRPO vs SFT:"))
    assert "multiplication 40.0% → 62.0% (+22.0 points, intervals do not overlap)" in grpo
    assert "overall 43.0% → 51.0% (+8.0 points, intervals overlap)" in grpo and grpo.endswith("others within noise.")
    dpo = next(line for line in md.splitlines() if line.startswith("DPO vs SFT:"))
    assert "all categories within noise" in dpo and "multiplication" not in dpo
    assert "base vs SFT" not in md


def test_png_files_beside_markdown(full_report):
    run, md, _ = full_report
    refs = re.findall(r"!\[[^\]]*\]\((report_files/[^)]+\.png)\)", md)
    names = {Path(r).stem for r in refs}
    assert {"category_accuracy", "outcome_shares", "preference_accuracy"} <= names
    assert {"training_pretrain", "training_sft", "training_dpo", "training_grpo"} <= names
    for ref in refs:
        assert (run / ref).read_bytes().startswith(PNG_MAGIC)
    pngs = sorted(p.name for p in (run / "report_files").iterdir() if p.suffix == ".png")
    assert pngs == sorted(Path(r).name for r in refs)
    assert (run / "report_files" / "results.json").is_file()  # the headline numbers (report.results)


def test_html_is_self_contained(full_report):
    _, md, page = full_report
    for external in ('src="http', "<link", "<script src", "url(http", "@import"):
        assert external not in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 3 and page.count("data:image/png;base64,") == md.count("](report_files/")
    assert all(base64.b64decode(data).startswith(PNG_MAGIC) for data in images)
    assert "<td>43.0% [38.7, 47.4]</td>" in page and "intervals do not overlap" in page


def test_sft_only_run_skips_what_is_missing(tmp_path):
    run = make_run(tmp_path / "run", full=False)
    md_path, html_path = build_report(run)
    md = md_path.read_text(encoding="utf-8")
    assert "| SFT | 43.0% [38.7, 47.4] | 215 / 500 | 98.0% | 40.0 |" in md
    for absent in ("What changed", "Preference accuracy", "pass@k", "Base model", "GRPO", "DPO |"):
        assert absent not in md
    assert "| dpo | skipped |" in md
    assert html_path.read_text(encoding="utf-8").count("data:image/png;base64,") == 3  # accuracy, outcomes, sft


def test_metrics_only_run_and_rebuild_drops_stale_plots(tmp_path):
    run = make_run(tmp_path / "run")
    build_report(run)
    assert (run / "report_files" / "training_grpo.png").exists()
    for name in (
        "run.json",
        "base/pretrain.json",
        "sft/train_log.jsonl",
        "dpo/train_log.jsonl",
        "grpo/train_log.jsonl",
    ):
        (run / name).unlink()
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "Training curves" not in md and "Stage timings" not in md and "GRPO vs SFT" in md
    assert not (run / "report_files" / "training_grpo.png").exists()


def test_a_user_file_in_report_files_is_refused_and_kept(tmp_path):
    """The plots folder is replaced whole: a file the report did not write stops it (it used to be deleted)."""
    run = make_run(tmp_path / "run")
    build_report(run)
    (run / "report_files" / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match=r"notes\.txt"):
        build_report(run)
    assert (run / "report_files" / "notes.txt").read_text() == "mine"


def test_partial_and_odd_inputs_do_not_crash(tmp_path):
    run = tmp_path / "run"
    write(run / "run.json", {"stages": [{"name": "sft"}, "junk"]})
    write(run / "eval" / "sft" / "metrics.json", {"accuracy": 0.4, "per_category": [], "outcomes": None})
    write(run / "eval" / "grpo" / "metrics.json", {"accuracy": {"value": 0.5}, "per_category": {"addition": {}}})
    write_log(run / "grpo" / "train_log.jsonl", [{"step": 1, "train_runtime": 2.0}])
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "| SFT | 40.0% | – |" in md and "| sft | ? | – |" in md
    assert "GRPO vs SFT: overall 40.0% → 50.0% (+10.0 points, no intervals)." in md
    assert "Training curves" not in md


@pytest.mark.parametrize("setup", ["missing", "empty", "bad_json"])
def test_bad_run_folder_is_one_line_bad_input(tmp_path, setup):
    run = tmp_path / "run"
    if setup != "missing":
        run.mkdir()
    if setup == "bad_json":
        (run / "eval" / "sft").mkdir(parents=True)
        (run / "eval" / "sft" / "metrics.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(BadInput) as err:
        build_report(run)
    assert "\n" not in str(err.value) and str(run) in str(err.value)
    assert not (run / "report.md").exists()


def test_plots_are_pngs_or_none():
    run_metrics = {"sft": metrics("sft", (0.43, 0.387, 0.474), SFT_CATS, OUTCOMES, preference=True)}
    for png in (
        plots.category_accuracy(run_metrics),
        plots.outcome_shares(run_metrics),
        plots.preference_accuracy(run_metrics),
    ):
        assert png.startswith(PNG_MAGIC)
    assert plots.training_curves("grpo", [{"step": 1, "reward": 0.5}]).startswith(PNG_MAGIC)
    assert plots.training_curves("grpo", [{"step": 1, "train_runtime": 3.0}]) is None
    assert plots.category_accuracy({}) is None and plots.outcome_shares({"sft": {}}) is None
    assert plots.preference_accuracy({"sft": {"accuracy": 0.5}}) is None


def test_cli_verb(tmp_path):
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """posttrain"""

    register(app)
    run = make_run(tmp_path / "run", full=False)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert "report.html" in result.output and (run / "report.html").is_file()
    result = CliRunner().invoke(app, ["report", str(tmp_path / "nope")])
    assert isinstance(result.exception, BadInput) and "no such run folder" in str(result.exception)
    assert load_run(run).metrics.keys() == {"sft"}


def test_importing_the_report_does_not_import_matplotlib():
    code = "import sys, posttrainlab.report, posttrainlab.cli.report; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_prm_section_names_the_head_the_prm_was_trained_with(tmp_path):
    from posttrainlab.report.build import HEAD_WORDS, _head_words

    (tmp_path / "prm_config.json").write_text(json.dumps({"head": "result"}))
    assert _head_words(tmp_path) == HEAD_WORDS["result"] and "own probability" in HEAD_WORDS["result"]
    assert _head_words(tmp_path / "missing") == HEAD_WORDS["token-cls"]  # a Qwen layout without prm_config.json
