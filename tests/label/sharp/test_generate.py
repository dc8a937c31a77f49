"""The generation runner (label/generate.py) and ``posttrain generate``."""

from __future__ import annotations

import json

import pytest
from pipeline_doubles import MixedPolicy
from typer.testing import CliRunner

from posttrainlab.data.jsonl import read_jsonl, write_jsonl
from posttrainlab.errors import BadInput
from posttrainlab.label.generate import (
    SYSTEM_PROMPT,
    GenerateConfig,
    load_problems,
    read_generations,
    run_generate,
    split_solution,
)


@pytest.mark.parametrize(
    ("text", "mode", "steps", "used"),
    [
        ("12 * 4 = 48\nAnswer: 48\n", "auto", ["12 * 4 = 48", "Answer: 48"], "lines"),
        ("First 12 * 4 = 48.\n\nSo the answer is 48.", "auto", ["First 12 * 4 = 48.", "So the answer is 48."], "blank"),
        ("a\nb\n \nc", "auto", ["a\nb", "c"], "blank"),
        ("a\nb\n\nc", "lines", ["a", "b", "c"], "lines"),
        ("a\nb", "blank", ["a\nb"], "blank"),
        ("   \n", "auto", [], "lines"),
    ],
)
def test_split_solution(text, mode, steps, used):
    assert split_solution(text, mode) == (steps, used)


def test_load_problems_from_arith_v1(arith_dir):
    problems = load_problems(f"{arith_dir}:test", limit=3)
    assert [p["id"] for p in problems] == ["test-0000", "test-0001", "test-0002"]
    assert {(p["source"], p["source_split"]) for p in problems} == {("arith-v1", "test")}
    assert problems[0]["question"].endswith("?") and isinstance(problems[0]["answer"], int)
    assert load_problems(str(arith_dir / "eval" / "dev.jsonl"), limit=1)[0]["source_split"] == "dev"


def test_load_problems_from_any_file(tmp_path):
    write_jsonl(tmp_path / "test.jsonl", [{"problem": "What is 2 + 3?", "unique_id": 7}])
    (p,) = load_problems(str(tmp_path / "test.jsonl"))
    assert (p["id"], p["source"], p["source_split"], p["question"]) == ("7", "test", "test", "What is 2 + 3?")
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 4 * 5?"}]
    write_jsonl(tmp_path / "mine.jsonl", [{"prompt": chat, "source": "x", "split": "train"}])
    (p,) = load_problems(str(tmp_path / "mine.jsonl"))
    assert (p["id"], p["source"], p["source_split"], p["question"]) == ("row-0", "x", "train", "What is 4 * 5?")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"question": ["What is 1 + 1?"]}), tmp_path / "q.parquet")
    assert load_problems(str(tmp_path / "q.parquet"))[0]["source_split"] is None
    write_jsonl(tmp_path / "bad.jsonl", [{"text": "x"}])
    with pytest.raises(BadInput, match="no question text"):
        load_problems(str(tmp_path / "bad.jsonl"))
    write_jsonl(tmp_path / "dup.jsonl", [{"id": 1, "question": "a"}, {"id": 1, "question": "b"}])
    with pytest.raises(BadInput, match="repeats"):
        load_problems(str(tmp_path / "dup.jsonl"))


def test_run_generate_writes_k_rows_per_problem(tmp_path, arith_dir):
    policy = MixedPolicy()
    cfg = GenerateConfig(model="mixed", data=f"{arith_dir}:test", out=tmp_path / "gen", limit=5, chunk=2)
    run_file, written, resumed = run_generate(cfg, policy)
    rows = read_jsonl(run_file)
    assert written == 20 and resumed == 0 and len(rows) == 20
    assert [(r["id"], r["sample_index"]) for r in rows[:5]] == [("test-0000", j) for j in range(4)] + [("test-0001", 0)]
    call = policy.calls[0]
    assert (call["n"], call["temperature"], call["top_p"]) == (4, 0.7, 0.8)
    assert call["prompts"][0][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert all(r["step_split"] == "lines" and r["steps"] == r["text"].splitlines() for r in rows)
    assert list(rows[0]) == [
        "id",
        "source",
        "source_split",
        "sample_index",
        "question",
        "answer",
        "text",
        "steps",
        "step_split",
    ]


def test_run_generate_resumes_and_refuses_other_settings(tmp_path, arith_dir):
    cfg = GenerateConfig(model="mixed", data=f"{arith_dir}:test", out=tmp_path / "gen", limit=4, k=2, chunk=1)

    class Dies(MixedPolicy):
        def generate(self, prompts, **kw):
            if len(self.calls) == 2:
                raise RuntimeError("killed")
            return super().generate(prompts, **kw)

    with pytest.raises(RuntimeError):
        run_generate(cfg, Dies())
    run_file = tmp_path / "gen" / "generations.jsonl"
    with open(run_file, "a", encoding="utf-8") as f:  # half a problem, then a line cut by the kill
        f.write(json.dumps({**read_jsonl(run_file)[0], "id": "test-0002"}) + "\n")
        f.write('{"id": "test-0003", "sam')
    policy = MixedPolicy()
    _, written, resumed = run_generate(cfg, policy)
    assert resumed == 2 and written == 4 and len(policy.calls) == 2
    rows = read_generations(run_file)
    assert len(read_jsonl(run_file)) == 8 and len(rows) == 8
    assert sorted((r["id"], r["sample_index"]) for r in rows) == [
        (f"test-000{i}", j) for i in range(4) for j in range(2)
    ]
    with pytest.raises(BadInput, match="temperature differ"):
        run_generate(GenerateConfig(**{**cfg.__dict__, "temperature": 1.0}), MixedPolicy())


def test_cli_generate_with_a_tiny_model(tmp_path, arith_dir):
    """The real path: a tiny (untrained) model through the transformers backend."""
    from posttrainlab.cli import app
    from posttrainlab.models.tiny import TinyModelConfig, init_model

    model = init_model(
        TinyModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                        num_key_value_heads=2),
        tmp_path / "tiny",
    )  # fmt: skip
    args = ["generate", "--model", str(model), "--data", f"{arith_dir}:test", "--k", "2", "--limit", "2"]
    args += ["--out", str(tmp_path / "gen"), "--max-new-tokens", "12", "--threads", "1", "--system-prompt", ""]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "wrote 4 solutions" in res.output and "test split" in res.output
    rows = read_jsonl(tmp_path / "gen" / "generations.jsonl")
    assert len(rows) == 4 and all(r["source_split"] == "test" for r in rows)


def test_cli_generate_through_an_openai_endpoint(tmp_path, arith_dir):
    """``--backend openai`` (generation.factory) against ``posttrain serve``'s app serving a policy double."""
    pytest.importorskip("fastapi")
    from posttrainlab.cli import app
    from posttrainlab.serve.app import ServerThread, create_app

    policy = MixedPolicy()
    with ServerThread(create_app(policy, "mixed")) as server:
        args = ["generate", "--model", "mixed", "--backend", "openai", "--model-url", server.url]
        args += ["--data", f"{arith_dir}:dev", "--k", "3", "--limit", "4", "--out", str(tmp_path / "gen")]
        res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = read_jsonl(tmp_path / "gen" / "generations.jsonl")
    assert len(rows) == 12 and {r["source_split"] for r in rows} == {"dev"}
    assert all(r["steps"] and r["step_split"] == "lines" for r in rows)
    assert {(c["temperature"], c["top_p"]) for c in policy.calls} == {(0.7, 0.8)}
