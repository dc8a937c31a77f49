"""One line for every input fault of issue #42 (each was a traceback, or a refusal after the work):

bytes that are not UTF-8 in a jsonl (``data validate``, ``data stats``, ``eval compare``, ``train prm``: a
``UnicodeDecodeError``); ``eval judge --timeout nan`` (and the empty ``--out`` it left); ``eval policy --temperature
nan``; a truncated PRM in ``eval best-of-n`` (refused after every problem was sampled); a full disk
(``OSError``); SIGTERM (no "interrupted" record: now it takes Ctrl-C's path)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_capture import cli
from posttrainlab.errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
GOOD = json.dumps({"question": "1 + 1 = ?", "steps": ["1 + 1 = 2"], "step_labels": [1]}).encode()
BAD = b'{"question": "caf\xe9", "steps": ["1 + 1 = 2"], "step_labels": [1]}'


@pytest.fixture
def latin1(tmp_path) -> Path:
    """A step file whose third line holds a Latin-1 byte (0xe9 at column 18, after `{"question": "caf`)."""
    path = tmp_path / "rows.jsonl"
    path.write_bytes(GOOD + b"\n" + GOOD + b"\n" + BAD + b"\n")
    return path


def _bad_bytes_line(code: int, err: str, path: Path) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}:3: not valid UTF-8 (byte 0xe9 at column 18)" in err, err


@pytest.mark.parametrize("verb", [("data", "validate", "--format", "step"), ("data", "stats", "--format", "step")])
def test_bad_bytes_name_the_file_and_line_in_data_verbs(capsys, latin1, verb):
    code, _, err = cli(capsys, *verb, str(latin1))
    _bad_bytes_line(code, err, latin1)


def test_bad_bytes_in_eval_compare(capsys, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rows = [{"id": f"t-{i}", "category": "addition", "correct": True} for i in range(2)]
    a.write_bytes("".join(json.dumps(r) + "\n" for r in rows).encode() + b'{"id": "t-\xff", "correct": true}\n')
    b.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = cli(capsys, "eval", "compare", str(a), str(b))
    assert code == 2 and err.count("\n") == 1 and f"{a}:3: not valid UTF-8 (byte 0xff at column 11)" in err, err


def test_bad_bytes_in_train_prm(capsys, latin1, tiny_model, tmp_path):
    code, _, err = cli(capsys, "train", "prm", "--config", str(ROOT / "configs/prm/step.yaml"), f"model={tiny_model}",
                       f"dataset.path={latin1}", f"output_dir={tmp_path / 'prm'}", "optim.max_steps=1")  # fmt: skip
    _bad_bytes_line(code, err, latin1)
    assert not (tmp_path / "prm" / "model.safetensors").exists()


def test_a_json_file_with_bad_bytes_is_one_line(tmp_path):
    from posttrainlab.data.formats.readers import iter_rows

    path = tmp_path / "rows.json"
    path.write_bytes(b'[{"a": "caf\xe9"}]')
    with pytest.raises(BadInput, match=r"rows.json:1: not valid UTF-8 \(byte 0xe9"):
        list(iter_rows(path))


def test_judge_timeout_nan_is_refused_before_anything_is_written(capsys, tmp_path):
    out = tmp_path / "judge"
    code, _, err = cli(capsys, "eval", "judge", "--data-file", str(tmp_path / "rows.jsonl"), "--model-name", "m",
                       "--timeout", "nan", "--out", str(out))  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "--timeout nan: must be a finite number greater than 0" in err, err
    assert not out.exists()
    code, _, err = cli(capsys, "eval", "judge", "--data-file", "x", "--model-name", "m", "--timeout", "inf")
    assert code == 2 and "--timeout inf: must be a finite number" in err


@pytest.mark.parametrize("flag", ["--temperature", "--sample-temperature", "--top-p"])
def test_eval_policy_nan_is_refused_before_anything_is_written(capsys, tmp_path, flag):
    out = tmp_path / "eval"
    code, _, err = cli(capsys, "eval", "policy", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "d"),
                       "--out", str(out), flag, "nan")  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and f"{flag} nan: must be a finite number" in err, err
    assert not out.exists()


def test_a_truncated_prm_is_refused_before_any_sampling(arith_dir, tiny_prm, tmp_path):
    from posttrainlab.runners.best_of_n import run
    from posttrainlab.runners.settings import BestOfNSettings
    from prm_eval_fakes import FakeBackend

    prm = tmp_path / "prm"
    prm.mkdir()
    for f in Path(tiny_prm).iterdir():
        data = f.read_bytes()
        (prm / f.name).write_bytes(data[: len(data) // 2] if f.name == "model.safetensors" else data)
    backend = FakeBackend()
    with pytest.raises(BadInput, match="prm"):
        run("fake-policy", prm, arith_dir, tmp_path / "o", BestOfNSettings(n=2, limit=3), backend=backend,
            progress=False)  # fmt: skip
    assert backend.calls == [] and not (tmp_path / "o" / "samples.jsonl").exists()


def test_a_full_disk_is_one_line_and_nothing_half_written(capsys, tmp_path, monkeypatch):
    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)  # what the build writes its files with, in its staging folder
    out = tmp_path / "arith-v1"
    code, _, err = cli(capsys, "data", "prepare", "--out", str(out))
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("posttrain: error: No space left on device (errno 28); outputs written before it are kept")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name != "arith-v1"]  # no staged leftovers


def test_a_program_error_is_still_a_traceback(capsys, monkeypatch, tmp_path):
    """Only the machine's errors (a full disk...) become one line: a bug's ``FileNotFoundError`` keeps its traceback."""

    def bug(*args, **kwargs):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", "tensorboard/events")

    monkeypatch.setattr("posttrainlab.data.arith.prepare", bug)
    with pytest.raises(FileNotFoundError):
        cli(capsys, "data", "prepare", "--out", str(tmp_path / "x"))


def test_sigterm_takes_the_path_of_ctrl_c(tmp_path):
    """A real SIGTERM to a running ``posttrain``: the verb sees ``KeyboardInterrupt`` (what records "interrupted"),
    then one line and exit 143."""
    record = tmp_path / "record.txt"
    code = (
        "import signal\n"
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})\n"
        "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "import time\n"
        "import posttrainlab.data.arith as r\n"
        "def slow(*a, **k):\n"
        "    try:\n"
        "        print('ready', flush=True); time.sleep(60)\n"
        "    except KeyboardInterrupt:\n"
        f"        open({str(record)!r}, 'w').write('interrupted')\n"
        "        raise\n"
        "r.prepare = slow\n"
        "from posttrainlab.cli import main\n"
        f"main(['data', 'prepare', '--out', {str(tmp_path / 'x')!r}])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip().splitlines() == [
        "posttrain: terminated (SIGTERM); earlier outputs are untouched and nothing half-written was left in place"
    ]
    assert record.read_text() == "interrupted"
