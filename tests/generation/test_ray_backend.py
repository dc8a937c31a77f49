"""``posttrain eval best-of-n --ray R`` on a local Ray cluster (2 CPUs): the samples of R = 2 and of R = 1 are the
single-process run's, byte for byte (the same prefill batches, one seed per prompt, one torch thread each); bad
settings are one-line errors before anything is sampled."""

from __future__ import annotations

import sys

import pytest

from cli_capture import cli

BASE = ["--n", "4", "--limit", "6", "--max-new-tokens", "12", "--batch-size", "4", "--threads", "1", "--no-progress"]


def files(out) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in ("samples.jsonl", "scores.jsonl")}


@pytest.mark.ray
@pytest.mark.slow
def test_best_of_n_on_ray_replicas_samples_what_one_process_samples(arith_dir, tiny_policy, tiny_prm, tmp_path, capsys):
    from posttrainlab.generation.ray_backend import RayBackend, cluster
    from posttrainlab.generation.shared_prefix import PrefixRequest

    args = ["eval", "best-of-n", "--policy", str(tiny_policy), "--prm", str(tiny_prm), "--data", f"{arith_dir}:test"]
    code, _, err = cli(capsys, *args, *BASE, "--out", str(tmp_path / "single"))
    assert code == 0, err
    with cluster(cpus=2):  # the verb finds it running and uses it
        for r in (2, 1):
            code, printed, err = cli(capsys, *args, *BASE, "--out", str(tmp_path / f"ray{r}"), "--ray", str(r))
            assert code == 0, err
            assert files(tmp_path / f"ray{r}") == files(tmp_path / "single"), f"R = {r}"
        assert "24 samples sampled in" in printed
        # two prefill batches of 4 and 2 prompts (longest first), as one TransformersBackend batches them
        backend = RayBackend(str(tiny_policy), replicas=2, batch_size=4)
        prompts = [[{"role": "user", "content": " ".join(["seven"] * k)}] for k in (1, 9, 5, 9, 3, 2)]
        assert backend.batches([PrefixRequest(p, "", 0) for p in prompts]) == [[1, 3, 2, 4], [5, 0]]
        texts = backend.generate(prompts, n=3, temperature=1.0, max_new_tokens=6, seed=5)
        assert [len(t) for t in texts] == [3] * 6 and len({t for per in texts for t in per}) > 1


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--ray", "0"], "--ray 0: need at least one replica"),
        (["--ray-address", "auto"], "--ray-address needs --ray R"),
        (["--ray", "1", "--backend", "vllm-server"], "--ray runs the transformers or vllm backend on its replicas"),
    ],
)
def test_bad_ray_settings_are_one_line_errors_before_sampling(arith_dir, tiny_policy, tiny_prm, tmp_path, capsys,
                                                              extra, message):  # fmt: skip
    out = tmp_path / "out"
    args = ["eval", "best-of-n", "--policy", str(tiny_policy), "--prm", str(tiny_prm), "--data", f"{arith_dir}:test"]
    code, _, err = cli(capsys, *args, "--out", str(out), *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() or not any(out.iterdir())


def test_a_missing_ray_is_one_line(arith_dir, tiny_policy, tiny_prm, tmp_path, capsys, monkeypatch):
    from posttrainlab.generation.ray_backend import MISSING

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where the extra is not installed
    args = ["eval", "best-of-n", "--policy", str(tiny_policy), "--prm", str(tiny_prm), "--data", f"{arith_dir}:test"]
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "out"), "--ray", "2")
    assert code == 2 and err.strip().endswith(MISSING) and len(err.strip().splitlines()) == 1
