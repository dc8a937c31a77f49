"""Every JSON the lab writes is strict JSON (issue #42): no ``NaN`` or ``Infinity`` token in any file or response.

``json.dumps`` writes them by default, so the package writes JSON only through ``posttrainlab.data.jsonl``
(``strict_json``, ``write_json``, ``dumps``, ``write_jsonl``: a NaN or an infinity becomes ``null``). The source
is read with ``ast``: a call of ``json.dump``/``json.dumps`` (however ``json`` or the function was imported)
outside ``data/jsonl.py`` fails unless it passes ``allow_nan=False`` or its function is in one of the tables
below. Both tables only shrink: an entry whose function no longer calls ``json.dump(s)`` fails
``test_exception_lists_only_hold_live_calls`` until it is deleted.

Then the behaviour: writers fed a NaN write ``null`` and, for finite values, the same bytes as before.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "posttrainlab"
#: the one module that calls json.dumps itself (with allow_nan=False)
HOME = "data/jsonl.py"

#: (file below src/posttrainlab, function) -> why its json.dumps may stay: a string that is never written to a file or
#: a response and whose input is strings or settings, where a NaN cannot occur or is better kept as ``NaN``
ALLOWED: dict[tuple[str, str], str] = {
    ("label/annotate_prompt.py", "row_key"): "a hash key of a question and its steps (strings only)",
    ("label/mc/problems.py", "MCProblem.fingerprint"): "a hash key of a prompt, an answer and traces (strings)",
    ("runners/judge.py", "row_key"): "a hash key of a row's prompt, completions and labels",
    ("train/policy_samples.py", "settings_of"): "a hash of records' fields; a NaN stays NaN (null would equal None)",
    ("train/pretrain.py", "config_hash"): "the tiny base's cache key, a hash of its config",
    ("runners/judge_client.py", "parse_hallucination_list"): "an error message quoting the judge's (parsed) answer",
    ("serve/program_judge.py", "ArithProgramJudge.answer"): "the program judge's answer text: a list of strings",
    ("quickstart/record.py", "_digest"): "a stage's settings hash (checked settings: finite); must not move",
    ("cli/settings.py", "flag_overrides"): "a key=value override's text, parsed back by the config loader",
    ("cli/settings.py", "settings_help"): "--help's display of a field's default",
}

#: calls not yet moved to data.jsonl (empty: keep it so; a hash key or a display string goes to ALLOWED with its reason)
PENDING_LEAD: dict[tuple[str, str], str] = {}


def _json_calls(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, enclosing function, strict)`` of every call of json.dump/json.dumps in the module at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules, functions = set(), set()  # names bound to the json module / to json.dump(s)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "json"}
        elif isinstance(node, ast.ImportFrom) and node.module == "json":
            functions |= {a.asname or a.name for a in node.names if a.name in ("dump", "dumps")}
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{where}.{child.name}" if where else child.name
            if isinstance(child, ast.Call):
                f = child.func
                by_module = (
                    isinstance(f, ast.Attribute)
                    and f.attr in ("dump", "dumps")
                    and isinstance(f.value, ast.Name)
                    and f.value.id in modules
                )
                if by_module or (isinstance(f, ast.Name) and f.id in functions):
                    strict = any(
                        k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                        for k in child.keywords
                    )
                    found.append((child.lineno, where or "<module>", strict))
            visit(child, inner)

    visit(tree, "")
    return found


def _lax_calls() -> dict[tuple[str, str], list[int]]:
    """``{(file, function): [lines]}`` of every json.dump(s) call without ``allow_nan=False``, outside HOME."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == HOME:
            continue
        for line, where, strict in _json_calls(path):
            if not strict:
                out.setdefault((rel, where), []).append(line)
    return out


def test_json_is_written_only_through_data_jsonl():
    lax = _lax_calls()
    bad = [
        f"src/posttrainlab/{rel}:{line} ({where})"
        for (rel, where), lines in sorted(lax.items())
        if (rel, where) not in ALLOWED and (rel, where) not in PENDING_LEAD
        for line in lines
    ]
    assert not bad, (
        "json.dump/json.dumps may write NaN or Infinity (not JSON); write through posttrainlab.data.jsonl "
        "(strict_json(obj, indent=..., ensure_ascii=...), write_json, dumps, write_jsonl) instead:\n  "
        + "\n  ".join(bad)
    )


def test_exception_lists_only_hold_live_calls():
    lax = _lax_calls()
    stale = sorted(k for k in (*ALLOWED, *PENDING_LEAD) if k not in lax)
    assert not stale, f"no json.dump(s) left there: delete these entries: {stale}"
    assert not set(ALLOWED) & set(PENDING_LEAD)


def test_the_scan_finds_every_spelling(tmp_path):
    # the detector itself: each way of calling json.dumps without allow_nan=False is seen, a strict one is not
    src = tmp_path / "m.py"
    src.write_text(
        "import json\nimport json as j\nfrom json import dumps as d, dump\n"
        "def a(x, f):\n    json.dumps(x)\n    j.dump(x, f)\n    d(x)\n    dump(x, f)\n"
        "class C:\n    def b(self, x):\n        return json.dumps(x, allow_nan=False)\n"
        "def c(x):\n    return json.dumps(x, allow_nan=True)\n"
    )
    assert _json_calls(src) == [(5, "a", False), (6, "a", False), (7, "a", False), (8, "a", False),
                                (11, "C.b", True), (13, "c", False)]  # fmt: skip


# ---- behaviour: a NaN is written null, finite values as before ------------------------------------------------


def _strict_load(text: str):
    def refuse(token: str):
        raise AssertionError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_eval_policy_outputs_write_nan_as_null(tmp_path):
    from posttrainlab.runners.policy import write_outputs

    metrics = {"accuracy": float("nan"), "by_category": {"add": float("inf"), "mul": 0.5}, "n": 2}
    write_outputs(tmp_path, metrics, [{"id": "a-0", "logprob": float("-inf"), "text": "é"}])
    assert _strict_load((tmp_path / "metrics.json").read_text(encoding="utf-8")) == {
        "accuracy": None,
        "by_category": {"add": None, "mul": 0.5},
        "n": 2,
    }
    line = (tmp_path / "samples.jsonl").read_text(encoding="utf-8")
    assert line == '{"id": "a-0", "logprob": null, "text": "é"}\n'


def test_eval_policy_metrics_keep_their_bytes_for_finite_values(tmp_path):
    from posttrainlab.runners.policy import write_outputs

    metrics = {"accuracy": 0.25, "model": "tiny-é", "by_category": {"add": 1.0}, "n": [1, 2]}
    write_outputs(tmp_path, metrics, [])
    # what json.dumps wrote before (indent 2, non-ASCII kept, a final newline)
    assert (tmp_path / "metrics.json").read_bytes() == (
        json.dumps(metrics, indent=2, ensure_ascii=False) + "\n"
    ).encode("utf-8")


def test_stream_events_are_strict_json():
    from posttrainlab.serve.streaming import events

    envelope = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m"}
    sent = list(events(envelope, [], chat=False, usage={"prompt_tokens": float("nan")}, include_usage=True))
    assert sent == [
        'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],'
        '"usage":{"prompt_tokens":null}}\n\n',
        "data: [DONE]\n\n",
    ]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_card_provenance_block_is_strict_json(value):
    from posttrainlab.data.cards.render import parse_provenance, provenance_section

    text = provenance_section({"sampling": {"temperature": value, "top_p": 0.9}}, {})
    assert "NaN" not in text and "Infinity" not in text
    assert '`{"temperature": null, "top_p": 0.9}`' in text  # the table cell
    assert parse_provenance(text) == {"sampling": {"temperature": None, "top_p": 0.9}}
