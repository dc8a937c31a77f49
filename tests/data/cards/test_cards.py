"""Every dataset the lab writes carries a card that ``datasets`` and ``huggingface_hub`` accept offline, whose
numbers equal a recount of the files (``folders``: one folder of each kind, each made by its own writer)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from importlib import metadata
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.data.cards.check import check_card
from posttrainlab.data.cards.kinds import detect_kind, verify_folder, write_folder_card
from posttrainlab.data.cards.render import parse_files_table, parse_provenance
from posttrainlab.errors import BadInput

KINDS = ("arith-v1", "arith-prm", "generations", "annotations", "sharp", "mc-values", "preference-pairs")
SAMPLED = KINDS[1:]  # every kind but arith-v1 was sampled from the policy


def card_text(folder: Path) -> str:
    return (folder / "README.md").read_text(encoding="utf-8")


def card_data(folder: Path) -> dict:
    from huggingface_hub import DatasetCard

    return DatasetCard.load(folder / "README.md", ignore_metadata_errors=False).data.to_dict()


def recount(path: Path) -> int:
    """Rows of a data file, counted without the lab's readers."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_metadata(path).num_rows
    return sum(1 for line in path.read_bytes().splitlines() if line.strip())


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


# ---- what every card is -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_the_hub_libraries_accept_the_card_offline(folders, kind):
    assert detect_kind(folders[kind]) == kind
    assert check_card(folders[kind]) == []


@pytest.mark.parametrize("kind", KINDS)
def test_load_dataset_reads_every_config_and_split_with_the_rows_the_card_states(folders, kind, offline):
    from datasets import load_dataset

    folder = folders[kind]
    data = card_data(folder)
    stated = {c["config_name"]: {s["name"]: s["num_examples"] for s in c["splits"]} for c in data["dataset_info"]}
    features = {c["config_name"]: [f["name"] for f in c["features"]] for c in data["dataset_info"]}
    loaded = 0
    for config in data["configs"]:
        name = config["config_name"]
        for entry in config["data_files"]:
            ds = load_dataset(str(folder), name, split=entry["split"])
            assert len(ds) == recount(folder / entry["path"]) == stated[name][entry["split"]] > 0, (name, entry)
            assert ds.column_names == features[name]
            loaded += 1
    assert loaded == sum(len(splits) for splits in stated.values()) >= 1


@pytest.mark.parametrize("kind", KINDS)
def test_the_files_table_hashes_and_counts_every_file(folders, kind):
    folder = folders[kind]
    text = card_text(folder)
    listed = parse_files_table(text)
    declared = {e["path"] for c in card_data(folder)["configs"] for e in c["data_files"]}
    assert declared <= set(listed)
    for rel, sha in listed.items():
        assert hashlib.sha256((folder / rel).read_bytes()).hexdigest() == sha, rel
        if rel.endswith((".jsonl", ".parquet")):
            assert f"| `{rel}` | {recount(folder / rel)} |" in text, rel
    checked, problems = verify_folder(folder)
    assert problems == [] and any(line == f"all {len(listed)} files match README.md" for line in checked)


def model_hash(folder: Path) -> str:
    lines = "".join(f"{n} {hashlib.sha256((folder / n).read_bytes()).hexdigest()}\n" for n in sorted(
        ["config.json", "model.safetensors"]))  # fmt: skip
    return hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.parametrize("kind", SAMPLED)
def test_provenance_names_the_policy_its_hash_the_settings_and_the_lab(folders, kind):
    record = parse_provenance(card_text(folders[kind]))
    assert record["kind"] == kind
    assert record["policy"] == str(folders["policy"]) and record["policy_sha256"] == model_hash(folders["policy"])
    assert record["sampling"] and record["seeds"]
    assert record["lab_version"] == metadata.version("posttrainlab") and record["command"]
    if kind in ("annotations", "sharp"):
        assert record["judge"]["model"] == "arith-judge" and record["judge"]["prompt_version"]
    else:
        assert record["grader"]


def test_the_arith_v1_card_keeps_its_release_record(folders):
    record = parse_provenance(card_text(folders["arith-v1"]))
    assert record["generator"] == "arith-v1.3" and record["seeds"] == {"build": 20251018}
    assert record["policy"] is None  # no model wrote any text


# ---- the seeds' sections, recounted ------------------------------------------------------------------


def test_arith_prm_label_counts_equal_a_recount(folders):
    folder, text = folders["arith-prm"], card_text(folders["arith-prm"])
    for split in ("train", "heldout", "preference_test"):
        rows = jsonl(folder / "step" / f"{split}.jsonl")
        labels = [x for r in rows for x in r["step_labels"]]
        errors = sum(0 in r["step_labels"] for r in rows)
        row = f"| {split} | {len(rows):,} | {len(labels):,} | {labels.count(1):,} | {labels.count(0):,} | {errors:,} | "
        assert row + f"{len(rows) - errors:,} |" in text
        ms = [x for r in jsonl(folder / "math_shepherd" / f"{split}.jsonl") for x in r["labels"]]
        assert f"`{split}`: {ms.count(True):,} correctly and {ms.count(False):,} incorrectly labelled steps" in text
        assert ms.count(False) == labels.count(0)


def test_sharp_view_counts_equal_a_recount(folders):
    folder, text = folders["sharp"], card_text(folders["sharp"])
    for split in ("train", "test"):
        steps = jsonl(folder / split / "step.jsonl")
        spans = jsonl(folder / split / "span.jsonl")
        meta = jsonl(folder / split / "meta.jsonl")
        assert len(steps) == len(spans) == len(meta) > 0
        hal = sum(len(re.findall("<HAL>", "\n\n".join(r["hallucination_annotation"]))) for r in spans)
        pieces = sum(len(r["model_answer"]) for r in spans)
        problems = len({(m["source"], m["id"]) for m in meta})
        assert f"| {split} | {len(spans):,} | {pieces:,} | {hal:,} |" in text and f" | {problems:,} |\n" in text
        first = Counter(r["step_labels"].index(0) for r in steps if 0 in r["step_labels"])
        assert first == Counter(m["first_error"] for m in meta if m["first_error"] >= 0)
    hist = re.search(r"First error:\n\n(.*?)\n\n", text, re.S).group(1)
    for position, n in Counter(
        r["step_labels"].index(0) for r in jsonl(folder / "train" / "step.jsonl") if 0 in r["step_labels"]
    ).items():
        assert re.search(rf"^\| step {position} \| {n:,} \|", hist, re.M)


def test_mc_value_distribution_equals_a_recount(folders):
    folder, text = folders["mc-values"], card_text(folders["mc-values"])
    columns = {"train": "train.jsonl", "validation": "val.jsonl", "band-0.1-0.9/train": "band-0.1-0.9/train.jsonl"}
    values = {name: [r["reward"] for r in jsonl(folder / rel)] for name, rel in columns.items()}

    def pct(k: int, n: int) -> str:
        return f"{100 * k / n:.1f}%"

    for label, test in (
        ("V == 0", lambda v: v == 0),
        ("V == 1", lambda v: v == 1),
        ("0 < V < 1", lambda v: 0 < v < 1),
        ("V in [0.1, 0.9]", lambda v: 0.1 <= v <= 0.9),
        ("correct (V >= 0.5)", lambda v: v >= 0.5),
    ):
        cells = " | ".join(pct(sum(map(test, vs)), len(vs)) for vs in values.values())
        assert f"| {label} | {cells} |" in text
    means = " | ".join(f"{sum(vs) / len(vs):.3f}" for vs in values.values())
    assert f"| mean V | {means} |" in text
    for column in ("messages", "reward", "correct", "step_idx", "value_source"):
        assert f"| `{column}` |" in text


def test_generation_annotation_and_pair_counts_equal_a_recount(folders):
    rows = jsonl(folders["generations"] / "generations.jsonl")
    problems = len({r["id"] for r in rows})
    assert f"| {len(rows):,} | {problems:,} | 2 |" in card_text(folders["generations"])
    records = jsonl(folders["annotations"] / "annotations.jsonl")
    text = card_text(folders["annotations"])
    for status, n in Counter(r["status"] for r in records).items():
        assert f"| `{status}` | {n:,} |" in text
    pairs = jsonl(folders["preference-pairs"] / "train.jsonl")
    assert pairs == jsonl(folders["preference-pairs"].parent / "preference_pairs.jsonl")
    assert f"| {len(pairs):,} | {len({p['source_id'] for p in pairs}):,} |" in card_text(folders["preference-pairs"])


# ---- data verify and data card --------------------------------------------------------------------------


def first_data_file(folder: Path) -> Path:
    entry = card_data(folder)["configs"][0]["data_files"][0]
    return folder / entry["path"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_tampered_file_fails_verify(folders, kind, tmp_path, capsys):
    copy = tmp_path / kind
    shutil.copytree(folders[kind], copy)
    victim = first_data_file(copy)
    victim.write_bytes(victim.read_bytes() + b"\n")  # even a blank line changes the hash
    _, problems = verify_folder(copy)
    assert problems and all(p.path == victim and "checksum mismatch" in p.fault for p in problems)
    code, _, err = cli(capsys, "data", "verify", str(copy))
    assert code == 2 and victim.name in err.strip().splitlines()[-1] and "checksum mismatch" in err


def test_a_card_stating_another_row_count_does_not_load(folders, tmp_path, offline):
    from datasets import load_dataset
    from datasets.exceptions import NonMatchingSplitsSizesError

    copy = tmp_path / "gen"
    shutil.copytree(folders["generations"], copy)
    n = recount(copy / "generations.jsonl")
    card = copy / "README.md"
    card.write_text(card.read_text().replace(f"num_examples: {n}\n", f"num_examples: {n + 1}\n", 1))
    with pytest.raises(NonMatchingSplitsSizesError):
        load_dataset(str(copy), "default", split="train")


@pytest.mark.parametrize("kind", KINDS)
def test_data_card_rewrites_the_same_card(folders, kind, tmp_path, capsys):
    copy = tmp_path / kind
    shutil.copytree(folders[kind], copy)
    code, out, err = cli(capsys, "data", "card", str(copy))
    assert code == 0, err
    assert f"({kind};" in out
    assert card_text(copy) == card_text(folders[kind])


def test_data_card_without_a_card_reads_the_provenance_from_the_folder(folders, tmp_path):
    copy = tmp_path / "mc"
    shutil.copytree(folders["mc-values"], copy)
    (copy / "README.md").unlink()
    write_folder_card(copy, keep=True)
    record = parse_provenance(card_text(copy))
    assert record["policy"] == str(folders["policy"]) and record["sampling"]["n"] == 4 and record["seeds"] == {"run": 5}
    assert check_card(copy) == [] and verify_folder(copy)[1] == []


def test_data_prepare_check_accepts_the_rewritten_arith_v1_card(folders):
    from posttrainlab.data.arith.release import check

    assert check("1.3.0", folders["arith-v1"]) == []


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda d: (d / "notes.txt").write_text("x"), "not a dataset folder of a known kind"),
        (lambda d: (d / "preference_pairs.jsonl").write_text("{}\n"), "a DPO run folder"),
        (None, "no such folder"),
    ],
)
def test_data_card_refuses_an_unknown_folder_in_one_line(tmp_path, capsys, setup, fragment):
    folder = tmp_path / "x"
    if setup is not None:
        folder.mkdir()
        setup(folder)
    code, out, err = cli(capsys, "data", "card", str(folder))
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err
    assert not (folder / "README.md").exists()


def test_data_card_refuses_a_missing_file_and_an_unknown_kind(folders, tmp_path, capsys):
    copy = tmp_path / "aprm"
    shutil.copytree(folders["arith-prm"], copy)
    (copy / "math_shepherd" / "heldout.jsonl").unlink()
    before = card_text(copy)
    with pytest.raises(BadInput, match="heldout.jsonl: missing"):
        write_folder_card(copy)
    assert card_text(copy) == before  # the old card is left as it was
    code, _, err = cli(capsys, "data", "card", str(copy), "--kind", "bogus")
    assert code == 2 and "--kind 'bogus'" in err


def test_verify_refuses_a_folder_with_neither_manifest_nor_card(tmp_path, capsys):
    (tmp_path / "plain").mkdir()
    code, _, err = cli(capsys, "data", "verify", str(tmp_path / "plain"))
    assert code == 2 and "no manifest.json" in err and "README.md" in err


def test_an_empty_sharp_build_gets_no_card_and_data_card_says_why(folders, tmp_path, capsys):
    from posttrainlab.label.sharp_build import build_sharp

    records = [
        {**r, "status": "failed", "hallucination_annotation": None}
        for r in jsonl(folders["annotations"] / "annotations.jsonl")
    ]
    out = tmp_path / "sharp"
    build_sharp(records, out)
    assert (out / "train" / "step.jsonl").read_text() == "" and not (out / "README.md").exists()
    code, _, err = cli(capsys, "data", "card", str(out))
    assert code == 2 and "holds a row" in err and not (out / "README.md").exists()


def test_the_policy_hash_names_the_weights_not_the_folder_it_was_trained_in(tmp_path):
    """``training_args.bin`` holds ``output_dir``: two folders with the same weights hash the same."""
    from posttrainlab.data.cards.card import model_sha256

    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "qwen2"}')
        (folder / "model.safetensors").write_bytes(b"weights")
        (folder / "training_args.bin").write_bytes(f"output_dir={folder}".encode())
    assert model_sha256(a) == model_sha256(b) == model_hash(a)
    (b / "model.safetensors").write_bytes(b"other weights")
    assert model_sha256(a) != model_sha256(b)
