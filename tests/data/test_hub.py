"""Hub paths: parsing, downloads through a fake Hub on 127.0.0.1, and fast clear failures offline.

Nothing here reaches the internet: the "online" Hub is ``tests/fakehub.py``; the offline cases point
``HF_ENDPOINT`` at a closed local port or at a ``.invalid`` host, which never resolves.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakehub import FakeHub
from posttrainlab.data.hub import HubRef, download_dataset, looks_like_hub_id, parse_hub_spec
from posttrainlab.data.manifest import sha256_file, verify_dir
from posttrainlab.errors import BadInput, HubUnavailable

REPO = "owner/arith-mini"
ROWS = [{"id": f"test-{i}", "prompt": f"What is {i} + 1?", "answer": i + 1} for i in range(3)]
HANG_GUARD_S = 15  # a hang guard, not a performance assertion


@pytest.fixture(autouse=True)
def hub_env(tmp_path, monkeypatch):
    """A private HF cache, no endpoint/offline/token settings, no telemetry call to huggingface.co."""
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for var in ("HF_ENDPOINT", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("HF_HUB_ETAG_TIMEOUT", raising=False)
    # huggingface_hub fetches an "agent harness" list from constants.ENDPOINT (huggingface.co) when it
    # builds its user agent; telemetry off skips it. Offline mode read at import must not leak in.
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def make_dataset(root: Path) -> Path:
    """A manifest-backed dataset folder: README.md, eval/test.jsonl, manifest.json."""
    (root / "eval").mkdir(parents=True)
    data = root / "eval" / "test.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    (root / "README.md").write_text("---\nconfigs: []\n---\n# arith-mini\n", encoding="utf-8")
    manifest = {"files": {"eval/test.jsonl": {"sha256": sha256_file(data), "records": len(ROWS)}}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return root


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --------------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize(
    "spec, ref",
    [
        ("hf://ZaandaTeika/SHARP/SHARP-Math:test", HubRef("ZaandaTeika/SHARP", "SHARP-Math", "test")),
        (
            "hf://OverwhelmingFit/SOPO-Math-Shepherd-614:test",
            HubRef("OverwhelmingFit/SOPO-Math-Shepherd-614", None, "test"),
        ),
        ("hf://M-amir1998/arith-v1", HubRef("M-amir1998/arith-v1")),
        (
            "hf://M-amir1998/arith-v1/preference:preference_train",
            HubRef("M-amir1998/arith-v1", "preference", "preference_train"),
        ),
        ("hf://trl-lib/math_shepherd/default", HubRef("trl-lib/math_shepherd", "default", None)),
        ("hf://a/b.c:validation", HubRef("a/b.c", None, "validation")),
    ],
)
def test_parse_valid(spec, ref):
    assert parse_hub_spec(spec) == ref
    assert ref.spec == spec
    # Hugging Face's own form of a dataset path names the same dataset
    assert parse_hub_spec(spec.replace("hf://", "hf://datasets/", 1)) == ref


@pytest.mark.parametrize("spec", ["data/arith-v1", "/abs/path/x.jsonl", "M-amir1998/arith-v1", "", "s3://a/b"])
def test_parse_not_a_hub_path(spec):
    assert parse_hub_spec(spec) is None


@pytest.mark.parametrize(
    "spec, fault",
    [
        ("hf://", "no '/name'"),
        ("hf://owner", "no '/name'"),
        ("hf:///name", "empty owner"),
        ("hf://owner/", "empty dataset name"),
        ("hf://owner//cfg", "empty dataset name"),
        ("hf://a/b/c/d", "too many"),
        ("hf://a/b/c/d:test", "too many"),
        ("hf://a/b:", "empty split"),
        ("hf://a/b:te st", "bad split"),
        ("hf://a:b/c", "bad split"),
        ("hf://a/b/:test", "empty configuration"),
        ("hf://a/b/c fg", "bad configuration"),
        ("hf://own er/name", "bad owner"),
        ("hf://-owner/name", "bad owner"),
        ("hf://owner/na--me", "bad dataset name"),
        ("hf://owner/name.", "bad dataset name"),
        ("hf://owner/na..me", "bad dataset name"),
    ],
)
def test_parse_invalid(spec, fault):
    with pytest.raises(BadInput) as info:
        parse_hub_spec(spec)
    message = str(info.value)
    assert message.startswith(spec + ":") and fault in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("M-amir1998/arith-v1", True),
        ("trl-lib/math_shepherd", True),
        ("data/test.jsonl", False),
        ("out/results.json", False),
        ("arith-v1", False),
        ("a/b/c", False),
        ("./a/b", False),
        ("hf://a/b", False),
        ("own er/name", False),
    ],
)
def test_looks_like_hub_id(spec, expected):
    assert looks_like_hub_id(spec) is expected


# --------------------------------------------------------------------------------------------------
# Downloads through the fake Hub


def test_download_manifest_backed(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    hub = FakeHub({REPO: src})
    with hub as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        root = download_dataset(REPO)
    assert root.is_dir()
    for rel in ("manifest.json", "README.md", "eval/test.jsonl"):
        assert (root / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert verify_dir(root) == []
    expected = json.loads((src / "manifest.json").read_text())["files"]["eval/test.jsonl"]["sha256"]
    assert sha256_file(root / "eval" / "test.jsonl") == expected
    assert str(root).startswith(str(tmp_path / "hf_home" / "hub"))  # HF_HOME read at call time
    assert hub.requests[0] == ("GET", f"/api/datasets/{REPO}/revision/main")  # the fast probe first


def test_download_to_explicit_cache_dir(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    with FakeHub({REPO: src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        root = download_dataset(REPO, revision="main", cache_dir=tmp_path / "cache")
    assert str(root).startswith(str(tmp_path / "cache"))
    assert verify_dir(root) == []


def test_cached_copy_is_used_offline_and_still_verified(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    with FakeHub({REPO: src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        root = download_dataset(REPO)
    # The Hub is gone: the cached, verified copy is used, whether the network fails or is switched off.
    monkeypatch.setenv("HF_ENDPOINT", closed_port_url())
    assert download_dataset(REPO) == root
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert download_dataset(REPO) == root
    # An edited cached file is refused on the next load.
    (root / "eval" / "test.jsonl").write_text('{"id": "forged"}\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"eval/test\.jsonl: checksum mismatch"):
        download_dataset(REPO)


def test_tampered_file_is_refused(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    forged = b'{"id": "test-0", "answer": 999}\n'
    expected = sha256_file(src / "eval" / "test.jsonl")
    with FakeHub({REPO: src}, tamper={REPO: {"eval/test.jsonl": forged}}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(BadInput) as info:
            download_dataset(REPO)
    message = str(info.value)
    assert "eval/test.jsonl" in message and f"hf://{REPO}" in message
    assert expected in message and hashlib.sha256(forged).hexdigest() in message
    assert "\n" not in message


def test_unknown_repo_is_bad_input(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    with FakeHub({REPO: src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(BadInput) as info:
            download_dataset("owner/no-such-set")
    assert str(info.value) == f"hf://owner/no-such-set: no such dataset on {endpoint}"


def test_unknown_revision_is_bad_input(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    with FakeHub({REPO: src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(BadInput, match="no revision 'v9'"):
            download_dataset(REPO, revision="v9")


def test_manifest_listing_a_missing_file_is_bad_input(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    (src / "eval" / "test.jsonl").unlink()
    with FakeHub({REPO: src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(BadInput, match=r"lists eval/test\.jsonl, which the repo"):
            download_dataset(REPO)


def test_repo_without_manifest_is_a_snapshot(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "data").mkdir(parents=True)
    (src / "data" / "train.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    (src / "README.md").write_text("# plain\n", encoding="utf-8")
    with FakeHub({"owner/plain": src}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        root = download_dataset("owner/plain")
    assert (root / "data" / "train.jsonl").read_text() == '{"x": 1}\n'
    assert (root / "README.md").is_file()


def test_bad_repo_id_and_bad_endpoint(monkeypatch):
    with pytest.raises(BadInput, match="not a Hub dataset id"):
        download_dataset("just-a-name")
    monkeypatch.setenv("HF_ENDPOINT", "localhost:8000")
    with pytest.raises(BadInput, match="HF_ENDPOINT"):
        download_dataset(REPO)


# --------------------------------------------------------------------------------------------------
# Offline: at once, one line


@pytest.mark.parametrize("kind", ["refused", "no-dns"])
def test_unreachable_hub_fails_at_once(kind, monkeypatch):
    endpoint = closed_port_url() if kind == "refused" else "http://nonexistent.invalid"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    start = time.monotonic()
    with pytest.raises(HubUnavailable) as info:
        download_dataset(REPO)
    elapsed = time.monotonic() - start
    assert elapsed < HANG_GUARD_S
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach the Hugging Face Hub at {endpoint} for hf://{REPO} (offline?")
    assert "pass the local folder" in message


def test_hf_hub_offline_with_empty_cache(tmp_path, monkeypatch):
    src = make_dataset(tmp_path / "src")
    hub = FakeHub({REPO: src})
    with hub as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        start = time.monotonic()
        with pytest.raises(HubUnavailable, match="HF_HUB_OFFLINE is set") as info:
            download_dataset(REPO)
        assert time.monotonic() - start < HANG_GUARD_S
    assert "\n" not in str(info.value)
    assert hub.requests == []  # offline means no request at all


def test_import_is_cheap():
    code = (
        "import sys, posttrainlab.data.hub; "
        "print(sorted(m for m in ('huggingface_hub', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
