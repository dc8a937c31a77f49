"""``posttrain model init --out`` never deletes a user's files, and replaces its own earlier output."""

from __future__ import annotations

from pathlib import Path

from cli_capture import cli

ROOT = Path(__file__).resolve().parents[2]
SMALL_ARGS = ["hidden_size=32", "intermediate_size=64", "num_hidden_layers=1", "num_attention_heads=2",
              "num_key_value_heads=2"]  # fmt: skip


def init(capsys, out: Path, *extra: str):
    return cli(capsys, "model", "init", "--config", str(ROOT / "configs/models/tiny.yaml"), "--out", str(out),
               *SMALL_ARGS, *extra)  # fmt: skip


def test_init_refuses_a_folder_with_user_files(tmp_path, capsys):
    out = tmp_path / "m"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    (out / "results.csv").write_text("a,b\n1,2\n")
    code, _, err = init(capsys, out)
    assert code == 2, err
    line = err.strip()
    assert "\n" not in line and "notes.txt" in line and "results.csv" in line and "holds other files" in line
    assert (out / "notes.txt").read_text() == "my notes" and (out / "results.csv").read_text() == "a,b\n1,2\n"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv"]  # nothing written either


def test_init_replaces_its_own_earlier_output(tmp_path, capsys):
    from safetensors.torch import load_file

    out = tmp_path / "m"
    assert init(capsys, out)[0] == 0
    first = load_file(str(out / "model.safetensors"))
    code, stdout, err = init(capsys, out, "seed=5")  # an earlier init output: re-running works
    assert code == 0, err
    assert "parameters" in stdout
    second = load_file(str(out / "model.safetensors"))
    assert any(not (first[k] == second[k]).all() for k in first)  # the new seed's weights replaced the old ones


def test_init_refuses_an_earlier_output_with_a_user_file_added(tmp_path, capsys):
    out = tmp_path / "m"
    assert init(capsys, out)[0] == 0
    (out / "notes.txt").write_text("my notes")
    code, _, err = init(capsys, out)
    assert code == 2 and "notes.txt" in err and "config.json" not in err
    assert (out / "notes.txt").read_text() == "my notes"
