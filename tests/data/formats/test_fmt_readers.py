"""Reading rows from .jsonl / .json / .parquet / hf:// and writing .jsonl / .parquet atomically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from posttrainlab.data import hub
from posttrainlab.data.formats.readers import iter_rows
from posttrainlab.data.formats.writers import write_rows
from posttrainlab.errors import BadInput, HubUnavailable

ASSETS = Path(__file__).parents[2] / "assets" / "formats"
SPAN = ASSETS / "span_good.jsonl"


def rows(name: str) -> list[dict]:
    with open(ASSETS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_jsonl_streams_rows():
    it = iter_rows(SPAN)
    assert next(it)["question"].startswith("Tom has 3 apples")
    assert len(list(it)) == 6


@pytest.mark.parametrize(
    "text",
    [
        '[{"a": 1}, {"a": 2}]',
        '{\n  "rows": [\n    {"a": 1},\n    {"a": 2}\n  ]\n}\n',
        '{"a": 1}\n{"a": 2}\n',  # JSON Lines with a .json suffix, as `datasets` reads it
    ],
)
def test_json_forms(tmp_path, text):
    path = tmp_path / "rows.json"
    path.write_text(text, encoding="utf-8")
    assert list(iter_rows(path)) == [{"a": 1}, {"a": 2}]


def test_a_first_line_that_is_a_whole_object_means_json_lines(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text('{"data": [{"a": 1}]}\n', encoding="utf-8")
    assert list(iter_rows(path)) == [{"data": [{"a": 1}]}]


@pytest.mark.parametrize(
    ("name", "text", "fault"),
    [
        ("x.json", '{\n "a": 1,\n "b": [1, 2]\n}', "expected JSON Lines, an array of objects"),
        ("x.json", "[1, 2]", "item 0 is int, expected an object"),
        ("x.json", "[{", "not valid JSON"),
        ("x.jsonl", '{"a": 1}\n{"a": \n', "x.jsonl:2: not valid JSON"),
        ("x.parquet", "not parquet", "not a readable Parquet file"),
        ("x.csv", "a,b\n", "unknown file type '.csv'"),
    ],
)
def test_bad_files_name_the_file_and_the_fault(tmp_path, name, text, fault):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInput) as e:
        list(iter_rows(path))
    assert str(path) in str(e.value) and fault in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_file():
    with pytest.raises(BadInput, match="no such file"):
        list(iter_rows("does/not/exist.jsonl"))


def test_parquet_round_trip_in_small_batches(tmp_path):
    data = rows("span_good.jsonl")
    out = tmp_path / "span.parquet"
    assert write_rows(out, iter(data), batch_rows=3) == len(data)
    assert list(iter_rows(out, batch_rows=2)) == data


def test_mc_rows_survive_parquet(tmp_path):
    data = rows("mc_value.jsonl")
    write_rows(tmp_path / "mc.parquet", data)
    assert list(iter_rows(tmp_path / "mc.parquet")) == data


def test_a_failed_write_leaves_the_old_output(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"old": true}\n', encoding="utf-8")

    def rows_then_fail():
        yield {"a": 1}
        raise BadInput("boom")

    for target in (out, tmp_path / "out.parquet"):
        with pytest.raises(BadInput):
            write_rows(target, rows_then_fail())
    assert out.read_text(encoding="utf-8") == '{"old": true}\n'
    assert not (tmp_path / "out.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file left


def test_write_refuses_an_unknown_suffix(tmp_path):
    with pytest.raises(BadInput, match="use .jsonl or .parquet"):
        write_rows(tmp_path / "out.csv", [])


def test_parquet_rows_must_share_a_schema(tmp_path):
    with pytest.raises(BadInput, match="do not fit one Parquet schema"):
        write_rows(tmp_path / "out.parquet", [{"a": 1}, {"a": "x"}], batch_rows=1)


# --- hf:// paths (the Hub is never reached: download_dataset is replaced by a local folder) -------


def test_hub_path_with_a_manifest_reads_config_split_jsonl(tmp_path, monkeypatch):
    (tmp_path / "manifest.json").write_text("{}", encoding="utf-8")
    (tmp_path / "SHARP-Math-SPAN").mkdir()
    (tmp_path / "SHARP-Math-SPAN" / "test.jsonl").write_text(SPAN.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(hub, "download_dataset", lambda repo_id, *a, **k: tmp_path)
    assert list(iter_rows("hf://owner/sharp/SHARP-Math-SPAN:test")) == rows("span_good.jsonl")
    with pytest.raises(BadInput, match="has no file SHARP-Math-SPAN/train.jsonl"):
        list(iter_rows("hf://owner/sharp/SHARP-Math-SPAN:train"))


def test_hub_path_without_a_manifest_goes_through_datasets(tmp_path, monkeypatch):
    """The SHARP layout: a dataset card whose configs point at parquet shards, read in streaming mode."""
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n- config_name: SHARP-Math-SPAN\n  data_files:\n  - split: test\n"
        "    path: SHARP-Math-SPAN/test-*\n---\n# fixture\n",
        encoding="utf-8",
    )
    write_rows(tmp_path / "SHARP-Math-SPAN" / "test-00000-of-00001.parquet", rows("span_good.jsonl"))
    monkeypatch.setattr(hub, "download_dataset", lambda repo_id, *a, **k: tmp_path)
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")  # keep ~/.cache clean
    assert list(iter_rows("hf://owner/sharp/SHARP-Math-SPAN:test")) == rows("span_good.jsonl")


def test_hub_path_needs_a_split():
    with pytest.raises(BadInput, match="name a split"):
        list(iter_rows("hf://owner/sharp/SHARP-Math"))


def test_hub_unreachable_is_one_clean_error(monkeypatch):
    def offline(repo_id, *a, **k):
        raise HubUnavailable(f"hf://{repo_id}: the Hub cannot be reached")

    monkeypatch.setattr(hub, "download_dataset", offline)
    with pytest.raises(HubUnavailable, match="cannot be reached"):
        list(iter_rows("hf://ZaandaTeika/SHARP/SHARP-Math:test"))


def test_the_formats_layer_imports_no_heavy_library():
    code = (
        "import sys, posttrainlab.data.formats, posttrainlab.cli.formats; "
        "heavy = ('torch', 'transformers', 'trl', 'datasets', 'pyarrow'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
