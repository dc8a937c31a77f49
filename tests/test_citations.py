"""Every file and every posttrainlab name that the source, docs/ and the README cite exists.

A docstring or a page that cites ``tests/prm/test_losses.py`` or ``models.prm.two_class_logits`` after the
file was renamed or the function folded into another sends a reader nowhere. Checked here, on the text:

- **File paths**: every ``src/…``, ``tests/…``, ``docs/…``, ``configs/…`` and ``bench/…`` path (not inside a
  longer path such as ``posttrainlab/configs/…``) names a file or folder of the repository. A ``*`` is a glob that
  must match something, an all-capitals part (``configs/quickstart/NAME.yaml``) a placeholder read as ``*``, and a
  path holding ``{`` or ``<`` (an f-string, ``<config>``) is a pattern, not checked. ``::test`` and ``#anchor``
  tails are dropped.
- **Names**: every name in backticks (``…`` in docstrings, `…` in Markdown) that starts with ``posttrainlab.`` or
  with one of the package's top-level modules (``data.loading``, ``prm.format.format_solution``) names a module,
  and what follows the module a name it defines (a function, class, constant or import), and what follows a class
  one of its attributes (its own or a base class's in the same module). Read with ``ast``, nothing is imported. A
  name followed by ``[`` or ``=`` is a key path (``label.steps[]``, ``eval.limit=100``), not a citation.

``NOT_NAMES`` and ``EXTERNAL_PATHS`` list the few backticked texts that look like citations and are not, each with
what it is.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "posttrainlab"

#: backticked dotted texts that are no posttrainlab name (a variable's attribute, a field of a JSON file)
NOT_NAMES = {
    "config.architectures": "docs/prm.md: the field of a model's config.json",
    "config.check": "config.py: the check() of a dataclass held in a variable named config",
    "config.timeout": "grading/math.py: a field of the math grader's settings, held in self.config",
    "data.card_check": "docs/judge.md: a field of the judge's metric file",
}
#: paths of other repositories that a citation names as theirs
EXTERNAL_PATHS = {
    "src/sal/search/beam_search.py": "search-and-learn's beam search (runners/beam_algorithm.py, docs/prm-eval.md)",
}

PATH = re.compile(r"(?<![\w/.~-])(?:src|tests|docs|configs|bench)/[\w./*{}<>-]*[\w*}>/]")
SPAN = re.compile(r"``([^`\n]+)``|`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
#: a dotted text ending in one of these is a file name (``train.jsonl``), not a module path
FILE_SUFFIXES = frozenset(
    "json jsonl yaml yml md py parquet png html txt csv safetensors bin toml log gz zip pt".split()
)


def cited_texts() -> list[Path]:
    return [*sorted(PACKAGE.rglob("*.py")), *sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
            found[".".join(parts)] = path
        else:
            found.setdefault(".".join(parts), path)
    return found


@cache
def top_level() -> frozenset[str]:
    return frozenset(name.split(".")[1] for name in modules() if "." in name)


@cache
def module_tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


def defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a block of statements binds: functions, classes, assignments, imports (through ``if``/``try``)."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update({n.id: node for n in ast.walk(target) if isinstance(n, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update({(a.asname or a.name).split(".")[0]: node for a in node.names})
        elif isinstance(node, (ast.If, ast.Try)):
            for block in (node.body, node.orelse, *[h.body for h in getattr(node, "handlers", [])]):
                names.update(defined(block))
    return names


def class_has(cls: ast.ClassDef, attr: str, module: str) -> bool:
    """Whether the class (or a base class defined in the same module) binds ``attr``; a base from elsewhere is
    not followed and counts as having it."""
    if attr in defined(cls.body):
        return True
    local = defined(module_tree(module).body)
    for base in cls.bases:
        found = local.get(base.id) if isinstance(base, ast.Name) else None
        if not isinstance(found, ast.ClassDef) or class_has(found, attr, module):
            return True
    return False


def name_exists(dotted: str) -> bool:
    """Whether ``posttrainlab.a.b.c`` (or ``a.b.c``) names a module and something that module defines."""
    parts = dotted.split(".")
    if parts[0] != "posttrainlab":
        parts = ["posttrainlab", *parts]
    for i in range(len(parts), 1, -1):
        module = ".".join(parts[:i])
        if module in modules():
            break
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    node = defined(module_tree(module).body).get(rest[0])
    if node is None:
        return False
    if len(rest) > 1 and isinstance(node, ast.ClassDef):
        return class_has(node, rest[1], module)
    return True


def cited_names(text: str) -> set[str]:
    """The backticked dotted texts of ``text`` that start like a posttrainlab name (module docstring)."""
    names = set()
    for match in SPAN.finditer(text):
        span = (match.group(1) or match.group(2)).strip()
        dotted = DOTTED.match(span)
        if dotted is None or span[dotted.end() : dotted.end() + 1] in ("[", "="):
            continue
        name = dotted.group(0)
        first, last = name.split(".")[0], name.split(".")[-1]
        if (first == "posttrainlab" or first in top_level()) and last not in FILE_SUFFIXES:
            names.add(name)
    return names


def cited_paths(text: str) -> set[str]:
    return {m.group(0).rstrip(".").split("::")[0].split("#")[0] for m in PATH.finditer(text)}


def path_exists(path: str) -> bool:
    if "{" in path or "<" in path:
        return True
    pattern = re.sub(r"\b[A-Z][A-Z0-9_]+\b", "*", path)  # NAME, DIR, SPLIT: placeholders
    if "*" in pattern:
        return any(ROOT.glob(pattern.rstrip("/")))
    return (ROOT / path).exists()


def where(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --------------------------------------------------------------------------------------------------


def test_the_checker_finds_what_is_missing():
    assert name_exists("posttrainlab.data.loading.split_file") and name_exists("data.loading")
    assert name_exists("eval.counts.Confusion.precision") and name_exists("posttrainlab.prm.PRM")
    assert not name_exists("models.prm.two_class_logits") and not name_exists("eval.nothing_here")
    assert not name_exists("eval.counts.Confusion.nothing")
    text = "see ``prm.format.format_solution`` and `label.steps[]`, `eval.limit=100`, ``train.jsonl``, ``x.y``"
    assert cited_names(text) == {"prm.format.format_solution"}
    text = "tests/prm/test_losses.py, (docs/design.md), runs/configs/x and configs/quickstart/NAME.yaml."
    assert cited_paths(text) == {"tests/prm/test_losses.py", "docs/design.md", "configs/quickstart/NAME.yaml"}
    assert not path_exists("tests/prm/test_losses.py") and path_exists("configs/quickstart/NAME.yaml")


def test_every_cited_file_exists():
    missing = [
        f"{where(source)}: {path}"
        for source in cited_texts()
        for path in sorted(cited_paths(source.read_text(encoding="utf-8")))
        if path not in EXTERNAL_PATHS and not path_exists(path)
    ]
    assert not missing, "cited files that do not exist: " + "; ".join(missing)


def test_every_cited_name_exists():
    missing = [
        f"{where(source)}: {name}"
        for source in cited_texts()
        for name in sorted(cited_names(source.read_text(encoding="utf-8")))
        if name not in NOT_NAMES and not name_exists(name)
    ]
    assert not missing, "cited posttrainlab names that do not exist: " + "; ".join(missing)


def test_the_exception_lists_hold_only_what_is_cited():
    texts = [source.read_text(encoding="utf-8") for source in cited_texts()]
    names = set().union(*(cited_names(t) for t in texts))
    paths = set().union(*(cited_paths(t) for t in texts))
    stale = sorted(set(NOT_NAMES) - names) + sorted(set(EXTERNAL_PATHS) - paths)
    assert not stale, "no longer cited, so delete from tests/test_citations.py: " + ", ".join(stale)
