"""The shape of the package: no import cycle, imports pointing down the layers, small modules and signatures.

The layers are README "Layout"'s and docs/design.md's "Layers", top to bottom::

    cli -> quickstart -> train, eval, runners, label, serve, report, prm -> models, generation -> data -> grading

with ``errors``, ``config``, ``paths`` and ``progress`` the shared ground floor under all of them. A
module may import from its own floor (no cycle allowed) or any floor below, never from one above.

The import graph is read from the source with ``ast``, every ``import`` and ``from ... import`` in a
module, function-level ones included (a function-level import is how a cycle hides: it runs later,
but the two modules still need each other). ``from posttrainlab.a import b`` counts as an import of
the module ``posttrainlab.a.b`` when there is one, else of ``posttrainlab.a``.

The metrics (``eval``) are pure: no module of it imports torch, transformers, TRL or matplotlib, or a module of
the package that loads models or reads and writes files, and none calls ``open`` or a file method
(``test_eval_holds_pure_metrics``); the runs that do are ``runners``.

Size: no module over 400 lines (``MAX_LINES``; none over 500 at all, ``HARD_MAX_LINES``) and no function with
more than 10 parameters (``MAX_PARAMS``: every name in its signature, ``self``, ``*args`` and ``**kwargs``
included). Names: no module imports a private name (``_x``) of another module.

The ``ALLOWED_*`` tables below list the violations known today, in modules other changes of issues #16 and #21
are reworking; each entry says why it is there. They only shrink: a new violation fails
``test_no_*``, and an entry whose violation is gone fails ``test_allow_lists_only_hold_live_violations``
until it is deleted.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "posttrainlab"
MAX_LINES = 400
HARD_MAX_LINES = 500  # not even an ALLOWED_LONG module may grow past it
MAX_PARAMS = 10

#: floor of each top-level name under posttrainlab (a module or a subpackage); higher floors import lower ones
FLOORS = {
    "__main__": 6,
    "cli": 6,
    **dict.fromkeys(["quickstart", "study"], 5),
    **dict.fromkeys(["train", "eval", "runners", "label", "serve", "report", "prm"], 4),
    **dict.fromkeys(["models", "generation"], 3),
    "data": 2,
    "grading": 1,
    **dict.fromkeys(["errors", "config", "paths", "progress", "provenance", "threads", "run_layout", "writer_lock"], 0),
}

# --------------------------------------------------------------------------------------------------
# Known violations (issue #16). Delete an entry when its violation is fixed; never add one to pass.

#: import cycles, each the set of modules in one strongly connected component
ALLOWED_CYCLES: dict[frozenset[str], str] = {}

#: modules over MAX_LINES lines (issue #21 lowered the limit from 500 to 400; these were over it then)
ALLOWED_LONG: dict[str, str] = {}

#: functions with more than MAX_PARAMS parameters (issue #21), by dotted name. Delete an entry when its function
#: takes a settings object (or otherwise fewer parameters). A CLI verb stays here: typer reads its flags from its
#: parameters, and it builds the settings object (``runners.settings``) its library function takes.
ALLOWED_MANY_PARAMS: dict[str, str] = {
    # CLI verbs: typer gives every flag its own parameter (each default read from the settings class it builds)
    "posttrainlab.cli.arith_prm.arith_prm": "a typer verb, one parameter per flag",
    "posttrainlab.cli.beam_search.beam_search": "a typer verb, one parameter per flag",
    "posttrainlab.cli.eval_prm.best_of_n": "a typer verb, one parameter per flag",
    "posttrainlab.cli.eval_prm.prm": "a typer verb, one parameter per flag",
    "posttrainlab.cli.evaluate.judge": "a typer verb, one parameter per flag",
    "posttrainlab.cli.evaluate.policy": "a typer verb, one parameter per flag",
    "posttrainlab.cli.pipeline.annotate": "a typer verb, one parameter per flag",
    "posttrainlab.cli.pipeline.generate": "a typer verb, one parameter per flag",
    "posttrainlab.cli.serve.serve": "a typer verb, one parameter per flag",
    # library functions
}

#: (importer, module, private name) imports of another module's private name
ALLOWED_PRIVATE: dict[tuple[str, str, str], str] = {}

#: (importer, imported) pairs that point up the layers
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    # config.save_config writes the run's YAML with data.atomic.write_text (a function-level import): the
    # ground floor reaching up to data. Fix: atomic writes move to the ground floor, or save_config up a floor.
    ("posttrainlab.config", "posttrainlab.data.atomic"): "config.py is another change's (issue #16)",
}


# --------------------------------------------------------------------------------------------------
# The graph


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``, which wins a name clash)."""
    found: dict[str, Path] = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        if is_init:
            parts.pop()
        name = ".".join(parts)
        if name not in found or is_init:
            found[name] = path
    return found


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _known(name: str) -> str | None:
    """``name`` or its nearest enclosing module of the package (``a.b.Thing`` -> ``a.b``)."""
    while name:
        if name in modules():
            return name
        name = name.rpartition(".")[0]
    return None


def imports_in(source: str, name: str) -> set[str]:
    """The package modules the source of module ``name`` imports, anywhere in it (functions included)."""
    here = name if name in modules() and _is_package(name) else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    targets.add(_known(alias.name) or ROOT)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != ROOT and not base.startswith(ROOT + "."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in modules() else (_known(base) or ROOT))
    targets.discard(name)
    return targets


@cache
def graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(imports_in(path.read_text(encoding="utf-8"), name)) for name, path in modules().items()}


def floor(name: str) -> int | None:
    parts = name.split(".")
    return FLOORS.get(parts[1]) if len(parts) > 1 else None


def strongly_connected(g: dict[str, frozenset[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of ``g`` with more than one node (each is a cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the module count (~150)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def cycle_path(component: list[str], g: dict[str, frozenset[str]]) -> str:
    """One cycle through the component's first module, as ``a -> b -> a`` (for the failure message)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g[v] & members):
                if w == start:
                    return " -> ".join(paths[v] + [start])
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return " <-> ".join(component)


def cycles() -> dict[frozenset[str], str]:
    g = graph()
    return {frozenset(c): cycle_path(c, g) for c in strongly_connected(g)}


def long_modules() -> dict[str, int]:
    counts = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    return {name: n for name, n in counts.items() if n > MAX_LINES}


def arity(args: ast.arguments) -> int:
    """How many parameters a signature names, ``self``, ``*args`` and ``**kwargs`` included."""
    return len(args.posonlyargs + args.args + args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def parameter_counts(source: str, name: str) -> dict[str, int]:
    """Every function and method of a module by dotted name (``module.Class.method``), with its parameter count."""
    counts: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                counts[f"{prefix}.{child.name}"] = arity(child.args)
                visit(child, f"{prefix}.{child.name}")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}")
            else:
                visit(child, prefix)

    visit(ast.parse(source), name)
    return counts


def many_params() -> dict[str, int]:
    found = {}
    for name, path in modules().items():
        counts = parameter_counts(path.read_text(encoding="utf-8"), name)
        found.update({f: n for f, n in counts.items() if n > MAX_PARAMS})
    return found


def private_imports() -> set[tuple[str, str, str]]:
    """``(importer, module, name)`` for every ``from posttrainlab.x import _name`` of another module's private name
    (``__dunder__`` names are not private)."""
    found = set()
    for importer, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(ROOT) and not node.level:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != importer:
                        found.add((importer, node.module, alias.name))
    return found


def upward_imports() -> set[tuple[str, str]]:
    bad = set()
    for importer, targets in graph().items():
        mine = floor(importer)
        for target in targets:
            theirs = floor(target)
            if mine is not None and theirs is not None and theirs > mine:
                bad.add((importer, target))
    return bad


# --------------------------------------------------------------------------------------------------
# The tests


def test_the_graph_sees_function_level_and_relative_imports():
    backend = graph()["posttrainlab.generation.transformers_backend"]
    assert "posttrainlab.models.loading" in backend  # imported inside TransformersBackend.__init__
    assert "posttrainlab.data.hub" in graph()["posttrainlab.data.loading"]  # `from posttrainlab.data import hub`
    source = "from . import hub\nfrom ..errors import BadInput\ndef f():\n    from .manifest import MANIFEST\n"
    expected = {"posttrainlab.data.hub", "posttrainlab.errors", "posttrainlab.data.manifest"}
    assert imports_in(source, "posttrainlab.data.loading") == expected
    tree = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert strongly_connected(tree) == [["a", "b", "c"]]
    assert cycle_path(["a", "b", "c"], tree) == "a -> b -> c -> a"


def test_every_top_level_module_has_a_floor():
    tops = {name.split(".")[1] for name in modules() if name != ROOT}
    assert sorted(tops - set(FLOORS)) == [], "add the new top-level module to FLOORS (README 'Layout')"


def test_no_import_cycle():
    new = {c: path for c, path in cycles().items() if c not in ALLOWED_CYCLES}
    assert not new, "import cycles: " + "; ".join(sorted(new.values()))


def test_no_module_over_400_lines():
    new = {name: n for name, n in long_modules().items() if name not in ALLOWED_LONG or n > HARD_MAX_LINES}
    assert not new, f"modules over {MAX_LINES} lines (split by job; none over {HARD_MAX_LINES}): " + ", ".join(
        f"{modules()[name].relative_to(SRC)} ({n})" for name, n in sorted(new.items())
    )


def test_no_function_over_10_parameters():
    assert parameter_counts(
        "def f(a, /, b, *c, d, **e):\n    def g(self): ...\nclass K:\n    def m(self, x): ...\n", "m"
    ) == {
        "m.f": 5,
        "m.f.g": 1,
        "m.K.m": 2,
    }
    new = {name: n for name, n in many_params().items() if name not in ALLOWED_MANY_PARAMS}
    assert not new, f"functions with more than {MAX_PARAMS} parameters (take a settings object): " + ", ".join(
        f"{name} ({n})" for name, n in sorted(new.items())
    )


def test_no_private_name_is_imported_from_another_module():
    new = sorted(private_imports() - set(ALLOWED_PRIVATE))
    assert not new, "private names imported from another module (make them public or move them): " + ", ".join(
        f"{a} imports {m}.{n}" for a, m, n in new
    )


def test_imports_point_down_the_layers():
    new = sorted(upward_imports() - set(ALLOWED_UPWARD))
    assert not new, "imports pointing up the layers (README 'Layout'): " + ", ".join(f"{a} -> {b}" for a, b in new)


#: what a pure metric module never imports: heavy libraries, and the package's modules that read or write files
#: or load models (any module under these names)
IMPURE_IMPORTS = ("torch", "transformers", "trl", "matplotlib", "safetensors", "peft", "datasets")
IMPURE_MODULES = (
    "posttrainlab.data.atomic", "posttrainlab.data.jsonl", "posttrainlab.data.loading", "posttrainlab.data.hub",
    "posttrainlab.data.runfile", "posttrainlab.data.problems", "posttrainlab.data.formats.readers",
    "posttrainlab.data.pool", "posttrainlab.data.manifest", "posttrainlab.models", "posttrainlab.prm",
    "posttrainlab.runners", "posttrainlab.generation.transformers_backend", "posttrainlab.generation.endpoint",
    "posttrainlab.report", "posttrainlab.progress", "posttrainlab.provenance",
)  # fmt: skip
#: calls that read or write files: builtins and ``Path`` methods
FILE_CALLS = frozenset(
    "open read_text read_bytes write_text write_bytes mkdir unlink rename rmdir touch iterdir glob "
    "rglob exists is_file is_dir stat".split()
)


def impurities(source: str, name: str) -> list[str]:
    """What makes module ``name`` more than pure functions: each heavy or file-touching import and file call."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            names = []
        for imported in names:
            if imported.split(".")[0] in IMPURE_IMPORTS or any(
                imported == m or imported.startswith(m + ".") for m in IMPURE_MODULES
            ):
                found.append(f"imports {imported}")
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in FILE_CALLS:
                found.append(f"calls {called}()")
    return sorted(set(found))


def test_eval_holds_pure_metrics():
    assert impurities("import torch\nfrom posttrainlab.data.jsonl import read_jsonl\nopen('f')\n", "m") == [
        "calls open()",
        "imports posttrainlab.data.jsonl",
        "imports posttrainlab.data.jsonl.read_jsonl",
        "imports torch",
    ]
    bad = {
        name: found
        for name, path in modules().items()
        if name == f"{ROOT}.eval" or name.startswith(f"{ROOT}.eval.")
        if (found := impurities(path.read_text(encoding="utf-8"), name))
    }
    assert not bad, "eval/ holds pure metric functions (runs that load models or touch files go in runners/): " + (
        "; ".join(f"{name}: {', '.join(found)}" for name, found in sorted(bad.items()))
    )


def test_allow_lists_only_hold_live_violations():
    stale = [" <-> ".join(sorted(c)) for c in ALLOWED_CYCLES if c not in cycles()]
    stale += [name for name in ALLOWED_LONG if name not in long_modules()]
    stale += [name for name in ALLOWED_MANY_PARAMS if name not in many_params()]
    stale += [f"{a} -> {m}.{n}" for a, m, n in ALLOWED_PRIVATE if (a, m, n) not in private_imports()]
    stale += [f"{a} -> {b}" for a, b in ALLOWED_UPWARD if (a, b) not in upward_imports()]
    assert not stale, "fixed, so delete from the ALLOWED_* tables of tests/test_layout.py: " + "; ".join(stale)
