"""MC-value rows into PRM items: the step_idx convention is never guessed, inferred values are opt-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posttrainlab.errors import BadInput
from posttrainlab.prm.examples import read_items
from posttrainlab.prm.losses import IGNORE
from posttrainlab.train.prm_recipe import PRMDataConfig

ROOT = Path(__file__).resolve().parents[2]
MC_STEPS = ROOT / "tests" / "prm" / "assets" / "mc_value_steps.jsonl"  # count convention: step_idx 0..num_steps


def _rows() -> list[dict]:
    return [json.loads(line) for line in MC_STEPS.read_text().splitlines() if line.strip()]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _targets(items) -> dict[tuple[str, int], float]:
    """{(question, number of steps in the prefix): V} over grouped items."""
    return {(it.question, j + 1): t for it in items for j, t in enumerate(it.targets) if t != IGNORE}


def test_a_file_without_a_step_idx_num_steps_row_is_refused_under_auto(tmp_path):
    """Band filtering (0.1 <= V <= 0.9) drops every whole-trace row: auto must not read the rest as `last`."""
    band = [r for r in _rows() if 0.1 <= r["reward"] <= 0.9]
    assert band and not any(r["step_idx"] == r["num_steps"] for r in band)
    path = _write(tmp_path / "band.jsonl", band)
    for mc_rows in ("grouped", "prefix"):
        with pytest.raises(BadInput) as e:
            read_items(PRMDataConfig(path=str(path), format="mc-value", mc_rows=mc_rows), soft=True)
        message = str(e.value)
        assert "\n" not in message and message.startswith(f"{path}: ")
        for needle in (
            "step_idx == num_steps",
            "count",
            "last",
            "dataset.mc_step_idx=count",
            "dataset.mc_step_idx=last",
        ):
            assert needle in message
    # Picking the convention reads the file: `count` puts each V where the unfiltered file puts it.
    full = _targets(read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value"), soft=True))
    got = _targets(read_items(PRMDataConfig(path=str(path), format="mc-value", mc_step_idx="count"), soft=True))
    assert got and all(full[k] == v for k, v in got.items())
    # The card's judge-prompt rows do not use step_idx: nothing to decide.
    assert len(read_items(PRMDataConfig(path=str(path), format="mc-value", mc_rows="messages"), soft=True)) == len(band)


def test_auto_still_reads_a_file_that_shows_its_convention():
    items = read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value"), soft=True)
    explicit = read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value", mc_step_idx="count"), soft=True)
    assert items == explicit


def test_inferred_rows_are_skipped_unless_asked_for(tmp_path):
    rows = _rows()
    for r in rows:  # the whole-trace rows measured, the rest inferred; rows without the column count as measured
        r["value_source"] = "measured" if r["step_idx"] == r["num_steps"] else "inferred"
    rows[1].pop("value_source")  # p1 trace 0, 1 step: no column = measured
    path = _write(tmp_path / "mixed.jsonl", rows)
    skip = read_items(PRMDataConfig(path=str(path), format="mc-value"), soft=True)
    assert skip[0].targets == [0.875, IGNORE, 1.0]
    assert all(t == IGNORE for it in skip for t in it.targets[1:-1])
    use = read_items(PRMDataConfig(path=str(path), format="mc-value", mc_use_inferred=True), soft=True)
    assert use == read_items(PRMDataConfig(path=str(MC_STEPS), format="mc-value"), soft=True)
    hard = read_items(PRMDataConfig(path=str(path), format="mc-value", mc_rows="messages"), soft=False)
    assert len(hard) == sum(r.get("value_source") != "inferred" for r in rows)


def test_a_bad_value_source_is_a_row_fault(tmp_path):
    rows = _rows()
    rows[2]["value_source"] = "guessed"
    path = _write(tmp_path / "bad.jsonl", rows)
    with pytest.raises(
        BadInput, match=r"bad\.jsonl: row 2: value_source is 'guessed', expected 'measured' or 'inferred'"
    ):
        read_items(PRMDataConfig(path=str(path), format="mc-value"), soft=True)


def test_the_soft_recipe_skips_inferred_rows_by_default():
    from posttrainlab.config import load_config
    from posttrainlab.train.prm_recipe import PRMRecipe

    recipe = load_config(PRMRecipe, ROOT / "configs" / "prm" / "soft.yaml", [])
    assert recipe.dataset.mc_use_inferred is False and PRMDataConfig().mc_use_inferred is False
    recipe = load_config(PRMRecipe, ROOT / "configs" / "prm" / "soft.yaml", ["dataset.mc_use_inferred=true"])
    assert recipe.dataset.mc_use_inferred is True


@pytest.mark.parametrize(
    ("source", "edit", "message"),
    [
        ("measured", [], "cannot tell what step_idx means (no row has step_idx == num_steps)"),
        ("inferred", ["dataset.mc_step_idx=last"], "no training rows: all 4 rows have value_source inferred"),
    ],
)
def test_train_prm_refuses_before_loading_a_model_exit_2(tmp_path, capsys, tiny_model, source, edit, message):
    from posttrainlab.cli import main

    band = [r | {"value_source": source} for r in _rows() if 0.1 <= r["reward"] <= 0.9][:4]
    path = _write(tmp_path / "band.jsonl", band)
    out = tmp_path / "prm"
    with pytest.raises(SystemExit) as e:
        # model= a local folder: the refusal must not depend on whether this machine has cached the tiny base
        main(["train", "prm", "--config", str(ROOT / "configs/prm/soft.yaml"), f"dataset.path={path}",
              f"model={tiny_model}", f"output_dir={out}", *edit])  # fmt: skip
    err = capsys.readouterr().err
    assert e.value.code == 2 and message in err and err.count("\n") == 1 and not out.exists()
