"""One writer per output folder (issue #42): every verb that writes an ``--out`` folder takes its writer lock
(``cli.options.lock_out``) after its own checks and before it writes or loads anything.

Each case runs the verb in this process while ANOTHER process holds the lock of its ``--out`` (``lock_holder``):
exit 2, one line naming the holder's PID, and ``--out`` not created. The inputs are the cheapest that pass each
verb's checks (a folder with a config.json passes for a model, ``baseline:M`` for a PRM): a verb that took no lock
would go on to load them and fail otherwise, or write. ``test_every_out_folder_verb_is_covered`` keeps the table
complete: a new verb with ``parser=out_folder`` and no case here fails it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.utils import get_params_from_function

from cli_capture import cli
from lock_holder import free_elsewhere, held_elsewhere
from posttrainlab.cli.options import out_folder

REPO = Path(__file__).resolve().parents[2]

#: verb -> its arguments beside ``--out O``; {m} a folder with a config.json, {d} arith-v1, {a}/{b} two results files
#: of ``eval compare``, {ann} an annotation run file, {f} a Math-Shepherd file (read only after the lock)
CASES = {
    ("eval", "policy"): ["--model", "{m}", "--data", "{d}"],
    ("eval", "judge"): ["--data-file", "{f}", "--model-name", "judge"],
    ("eval", "prm"): ["--model", "baseline:{m}", "--data", "{d}"],
    ("eval", "best-of-n"): ["--policy", "{m}", "--prm", "baseline:{m}", "--data", "{d}"],
    ("eval", "beam-search"): ["--policy", "{m}", "--prm", "baseline:{m}", "--data", "{d}"],
    ("eval", "compare"): ["{a}", "{b}"],
    ("data", "prepare"): [],
    ("data", "arith-prm"): ["--policy", "{m}", "--data", "{d}"],
    ("data", "sharp-build"): ["--annotations", "{ann}"],
    ("generate",): ["--model", "{m}", "--data", "{d}:dev"],
    ("annotate",): ["--model-name", "judge", "--data", "{ann}"],
    ("label", "mc"): ["--policy", "{m}", "--data", "{d}:dev"],
    ("model", "init"): ["--config", f"{REPO}/configs/models/tiny.yaml"],
    ("model", "pretrain"): ["--config", f"{REPO}/configs/models/tiny-base.yaml"],
    ("model", "import"): ["smollm2-135m-instruct"],
}
#: verbs whose library run takes the lock of their run folder (tests/test_run_folder_safety.py runs two quickstarts)
LOCKED_IN_THE_LIBRARY = {("quickstart",), ("study", "label-sources")}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path / "cache"))  # the lock files; the holder inherits it


@pytest.fixture
def inputs(tmp_path, arith_dir) -> dict[str, str]:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    rows = [{"id": f"t-{i}", "category": "addition", "correct": i % 2 == 0} for i in range(4)]
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    record = {"index": 0, "id": "1", "status": "clean", "question": "q", "steps": ["a = 1"]}
    (tmp_path / "annotations.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "ms.jsonl").write_text("")
    return {"m": str(model), "d": str(arith_dir), "a": str(tmp_path / "a.jsonl"), "b": str(tmp_path / "b.jsonl"),
            "ann": str(tmp_path / "annotations.jsonl"), "f": str(tmp_path / "ms.jsonl")}  # fmt: skip


@pytest.mark.parametrize("verb", list(CASES), ids=" ".join)
def test_a_second_writer_of_an_out_folder_is_refused(verb, inputs, tmp_path, capsys):
    out = tmp_path / "out"
    args = [a.format(**inputs) for a in CASES[verb]]
    with held_elsewhere(out) as holder:
        code, _, err = cli(capsys, *verb, *args, "--out", str(out))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"posttrain: error: {out}: another posttrain is writing this ")
    assert f"(PID {holder.pid} since " in lines[0] and lines[0].endswith("or choose another --out")
    assert not out.exists()  # untouched: not even created


def test_label_mc_shards_run_in_parallel_but_not_twice(inputs, tmp_path, capsys):
    """``--shard I/K`` locks the shard's work file, not the folder: the K shards of one folder may run together
    (docs/mc-labelling.md), but one shard not twice at once."""
    from posttrainlab.label.mc import load_problems
    from posttrainlab.label.mc.work import in_shard

    out = tmp_path / "out"
    (problem,) = load_problems(f"{inputs['d']}:dev", limit=1)
    busy = next(i for i in range(4) if in_shard(problem.id, (i, 4)))  # the shard with the one problem
    other = (busy + 1) % 4  # has nothing to label: it runs to its end without calling the endpoint
    args = ["label", "mc", "--policy", "served", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
            "--data", f"{inputs['d']}:dev", "--limit", "1", "--val-problems", "0", "--out", str(out)]  # fmt: skip
    work = out / "work" / f"shard-{busy}-of-4.jsonl"
    with held_elsewhere(work) as holder:
        code, _, err = cli(capsys, *args, "--shard", f"{busy}/4")
        assert code == 2 and f"{work}: another posttrain is writing this shard's work file (PID {holder.pid} " in err
        assert not out.exists()
        code, printed, err = cli(capsys, *args, "--shard", f"{other}/4")
        assert code == 0, err
        assert f"shard {other}/4: done; 1 problems of other shards are not labelled yet" in printed
    with held_elsewhere(out):  # a run without --shard: the folder's lock
        code, _, err = cli(capsys, *args)
        assert code == 2 and "another posttrain is writing this label folder" in err


def test_a_lock_whose_holder_was_killed_is_taken_over(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    with held_elsewhere(out) as holder:
        assert cli(capsys, "eval", "compare", inputs["a"], inputs["b"], "--out", str(out))[0] == 2
        holder.kill()  # kill -9: the kernel drops its lock
        holder.wait()
        code, _, err = cli(capsys, "eval", "compare", inputs["a"], inputs["b"], "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "compare.json").read_text())["overall"]["n"] == 4
    assert free_elsewhere(out)  # and let go at the end of the verb


def out_folder_verbs(app, prefix: tuple[str, ...] = ()):
    """Every command of ``app`` (typer) with an option parsed by ``out_folder``, as its words."""
    for command in app.registered_commands:
        params = get_params_from_function(command.callback).values()
        if any(getattr(p.default, "parser", None) is out_folder for p in params):
            yield (*prefix, command.name or command.callback.__name__)
    for group in app.registered_groups:
        yield from out_folder_verbs(group.typer_instance, (*prefix, group.name))


def test_every_out_folder_verb_is_covered():
    from posttrainlab.cli import app

    verbs = set(out_folder_verbs(app))
    assert ("eval", "policy") in verbs and ("data", "prepare") in verbs and len(verbs) >= 15
    assert verbs - LOCKED_IN_THE_LIBRARY <= set(CASES), "a verb writes an --out folder without a lock test here"
