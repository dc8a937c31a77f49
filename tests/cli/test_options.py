"""``cli.options``: one spelling per concept across the verbs, choices from the library's tuples, the checks that run
before torch, and the refusal of an output folder that already holds results."""

from __future__ import annotations

import os
import typing
from datetime import datetime

import pytest
import typer

from cli_capture import cli
from posttrainlab.cli import app
from posttrainlab.cli.options import check_data, check_model, check_results, check_split, choice
from posttrainlab.errors import BadInput

# verbs whose --out is an output *file*, not a folder
FILE_OUTPUTS = ("data convert ", "data join", "eval judge-summary")
# serve takes no output folder or dataset; its own tests say what it takes
ELSEWHERE = ("serve",)


def _commands() -> dict[str, typer.core.TyperCommand]:
    """Every leaf command of ``posttrain`` by its path (``eval policy``)."""
    root = typer.main.get_command(app)
    found = {}

    def walk(group, path, ctx):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            sub = type(ctx)(command, parent=ctx, info_name=name)
            if hasattr(command, "list_commands"):
                walk(command, [*path, name], sub)
            else:
                found[" ".join([*path, name])] = command

    walk(root, [], type(root.context_class(root))(root, info_name="posttrain"))
    return found


def _options(command) -> list[list[str]]:
    return [list(p.opts) for p in command.params if getattr(p, "param_type_name", "") == "option"]


def test_each_concept_has_one_spelling_and_every_old_one_still_works():
    """--out/--output-dir, --data/--data-file: wherever one is taken, so is the other (both names kept); torch
    threads are --threads only; --num-threads is --concurrency's old name (annotate, eval judge), nothing else."""
    commands = _commands()
    assert {"generate", "annotate", "eval policy", "eval judge", "eval prm", "label mc"} <= set(commands)
    for path, command in commands.items():
        if path.startswith(ELSEWHERE):
            continue
        for opts in _options(command):
            if "--out" in opts and not path.startswith(FILE_OUTPUTS):
                assert "--output-dir" in opts, path
            if "--output-dir" in opts:
                assert "--out" in opts, path
            if "--data" in opts or "--data-file" in opts:
                assert opts[:2] == ["--data", "--data-file"], path
            if "--num-threads" in opts:
                assert opts == ["--concurrency", "--num-threads"] and path in {"annotate", "eval judge"}, path
            if "--threads" in opts:
                assert opts == ["--threads"], path


def test_choice_is_the_library_tuple():
    from posttrainlab.generation.factory import BACKENDS

    assert typing.get_args(choice(BACKENDS)) == ("transformers", "vllm", "vllm-server", "openai")


def test_check_data_refuses_a_missing_local_path_only(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"question": "q"}\n')
    check_data(str(tmp_path / "rows.jsonl"))
    check_data(f"{tmp_path}:test")  # DIR:SPLIT of a folder that exists: the split is the loader's business
    check_data("hf://owner/name:test")  # the Hub: not checked here (it may need the network)
    with pytest.raises(BadInput, match=r"^--data-file .*nope\.jsonl: no such file or folder$"):
        check_data(str(tmp_path / "nope.jsonl"), "--data-file")


def test_check_split_uses_the_loader(arith_dir):
    check_split(str(arith_dir), None, default="test")
    with pytest.raises(BadInput, match="unknown split 'tset'"):
        check_split(f"{arith_dir}:tset", None, default="test")


def test_check_model_refuses_a_missing_or_empty_local_folder(tmp_path):
    with pytest.raises(BadInput, match=r"^--policy .*nowhere: no such model folder$"):
        check_model(str(tmp_path / "nowhere"), "--policy")
    with pytest.raises(BadInput, match="no config.json in it"):
        check_model(str(tmp_path))
    check_model("Qwen/Qwen2.5-0.5B")  # a Hub id: left to the loader


def test_check_results_names_the_file_and_its_date(tmp_path):
    check_results(tmp_path, "metrics.json", overwrite=False)  # nothing there yet
    metrics = tmp_path / "metrics.json"
    metrics.write_text("{}")
    stamp = datetime(2024, 5, 6, 7, 8).timestamp()
    os.utime(metrics, (stamp, stamp))
    with pytest.raises(BadInput) as e:
        check_results(tmp_path, "metrics.json", overwrite=False)
    assert str(e.value) == (
        f"{tmp_path} already holds eval results (metrics.json from 2024-05-06 07:08); pass --overwrite to replace "
        "them, or choose another --out"
    )
    check_results(tmp_path, "metrics.json", overwrite=True)
    check_results(tmp_path, "bon.json", overwrite=False)  # another verb's results file: not this one's


# ---- issue #25: every --out is checked, parents included, before the verb starts (cli.options.check_out) ----


def _out_params(command) -> list:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option" and "--out" in p.opts]


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("{tmp}/notes.txt/sub", "{tmp}/notes.txt is a file, not a folder"),
        ("/proc/posttrain-x", "cannot write in /proc"),
        ("", "--out '': empty path"),
    ],
)
def test_every_verb_refuses_an_out_it_cannot_write_in_one_line(capsys, tmp_path, bad, fragment):
    """``eval compare A B --out FILE/sub`` was a NotADirectoryError traceback (exit 1) after the work, ``--out
    /proc/x`` a FileNotFoundError, and ``--out ''`` wrote into the current folder; now every verb with --out says so
    in one line, exit 2, as the flag is parsed (``out_folder`` / ``out_file``: no verb can forget the check, and
    this walks them all), and writes nothing."""
    found = [path for path, command in _commands().items() if _out_params(command)]
    assert {"eval compare", "eval beam-search", "quickstart", "model init", "data convert sharp"} <= set(found)
    (tmp_path / "notes.txt").write_text("mine")
    given = bad.format(tmp=tmp_path)
    for path in found:
        code, _, err = cli(capsys, *path.split(), "--out", given)
        assert code == 2 and err.count("\n") == 1 and fragment.format(tmp=tmp_path) in err, (path, err)
        assert err.startswith("posttrain: error: --out "), (path, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_check_out_refuses_a_folder_where_the_output_file_should_be(tmp_path):
    from posttrainlab.cli.options import check_out

    with pytest.raises(BadInput, match=r"^--out .*: is a folder, not a file$"):
        check_out(tmp_path, file=True)
    assert check_out(str(tmp_path / "new" / "rows.jsonl"), file=True) == tmp_path / "new" / "rows.jsonl"
    assert not (tmp_path / "new").exists()  # checked, not created


def test_label_mc_checks_its_out_setting_before_reading_anything(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    for bad, fragment in ((f"{tmp_path}/notes.txt/sub", "notes.txt is a file, not a folder"),
                          ("/proc/posttrain-x", "cannot write in /proc")):  # fmt: skip
        code, _, err = cli(capsys, "label", "mc", "--policy", "p", "--data", str(tmp_path / "nodata.jsonl"),
                           "--out", bad)  # fmt: skip
        assert code == 2 and err.count("\n") == 1 and fragment in err, err


def test_check_results_takes_several_result_files(tmp_path):
    (tmp_path / "outcomes.jsonl").write_text("")
    with pytest.raises(BadInput, match=r"already holds eval results \(outcomes\.jsonl from "):
        check_results(tmp_path, ("beam.json", "outcomes.jsonl"), overwrite=False)
    check_results(tmp_path, ("beam.json", "outcomes.jsonl"), overwrite=True)


def test_judge_summary_keeps_an_earlier_summary_unless_overwrite(capsys, tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("earlier")
    runs = [str(tmp_path / "r1_metric.json")]  # not read: the output is checked first
    code, _, err = cli(capsys, "eval", "judge-summary", *runs, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "already holds eval results (summary.json from " in err
    assert out.read_text() == "earlier"
    code, _, err = cli(capsys, "eval", "judge-summary", *runs, "--out", str(out), "--overwrite")
    assert code == 2 and "r1_metric.json: no such file" in err  # past the check, to the runs
