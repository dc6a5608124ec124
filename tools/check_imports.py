"""Check elical's import graph: no import cycles, and the declared layering holds (stdlib only).

Every module under ``src/elical`` is parsed with :mod:`ast`; every ``import`` / ``from ... import`` of
an elical module counts, at module level and inside functions alike (a cycle hidden by a function-level
import is still a cycle). Only imports under ``if TYPE_CHECKING:`` are left out: they never run.

``from elical.pkg import Name`` is an edge to ``elical.pkg.Name`` when that is a module, else to
``elical.pkg`` (its ``__init__``). A package ``__init__`` that exports names lazily (PEP 562)
declares them in a ``_LAZY = {"Name": "elical.pkg.sub", ...}`` dict literal: importing ``Name`` from it
is then an edge to ``elical.pkg.sub``, and the ``__init__`` itself imports nothing. Importing
``elical.a.b`` also runs ``elical/__init__`` and ``elical/a/__init__``; those implicit parent imports
are not counted (a package ``__init__`` that imports its own submodules would otherwise be a cycle).

Usage: ``python tools/check_imports.py [--graph]``; exit status 1 on a cycle or a layering violation.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "elical"

# The layering, bottom first. A module may import modules of its own layer or of lower layers only.
# A layer is a list of module prefixes ("elical.records" covers elical.records and elical.records.*);
# the longest matching prefix decides a module's layer. Every elical module must match one.
LAYERS: list[tuple[str, list[str]]] = [
    ("base", [  # values, formats and files: the core modules, records, QA data, metrics, judge declarations
        "elical.core", "elical.annotate.judge_registry", "elical.model.key", "elical.model.packed_mask",
        "elical.records", "elical.data", "elical.metrics",
        "elical.run.folder",  # the run folder's paths: the label audit (a workflow) reads run folders too
    ]),
    ("scoring", [  # numbers from records and scores, no model: estimators, evaluation, reports, the gate, the world
        "elical.confidence", "elical.model.predictions", "elical.model.gate", "elical.data.synthetic",
        "elical.evaluation", "elical.report", "elical.world",
    ]),
    ("models", [  # loading, training and applying the confidence model (elical.model: its package __init__)
        "elical.model", "elical.train",
    ]),
    ("workflows", [  # annotation, adaptive retrieval, honesty methods, label audits
        "elical.annotate", "elical.retrieval", "elical.honesty", "elical.audit",
    ]),
    ("apps", ["elical.run", "elical.serve", "elical.cli"]),  # experiments, the server, the command line
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import node of ``tree``, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """The ``_LAZY = {name: module}`` table of a lazily exporting package ``__init__`` (empty if none)."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "_LAZY" and isinstance(node.value, ast.Dict):
            return {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(node.value.keys, node.value.values)
                    if k is not None}
    return {}


def build_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the elical modules it imports (anywhere in its code but TYPE_CHECKING blocks)."""
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in mods.items()}
    lazy = {name: _lazy_table(tree) for name, tree in trees.items() if mods[name].name == "__init__.py"}

    def existing(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, tree in trees.items():
        package = name if mods[name].name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if not (base == PACKAGE or base.startswith(PACKAGE + ".")):
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in mods:  # a submodule (its package: an implicit parent import)
                        targets.append(f"{base}.{alias.name}")
                    elif alias.name in lazy.get(base, {}):  # a lazy export: the module that defines it
                        targets.append(lazy[base][alias.name])
                    else:  # a name the module (or package __init__) defines or imports
                        targets.append(base)
            for target in targets:
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    found = existing(target)
                    if found and found != name:
                        graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
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

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(found)


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for level, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level)
    return None if best is None else best[1]


def layering_problems(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module in sorted(graph):
        if module == PACKAGE:
            continue  # the top package only re-exports lazily
        level = layer_of(module)
        if level is None:
            problems.append(f"{module}: in no layer (add it to LAYERS in tools/check_imports.py)")
            continue
        for target in sorted(graph[module]):
            other = layer_of(target) if target != PACKAGE else None
            if other is not None and other > level:
                problems.append(f"{module} ({LAYERS[level][0]}) imports {target} ({LAYERS[other][0]}), a higher layer")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print every module's elical imports")
    args = parser.parse_args(argv)
    graph = build_graph(modules())
    if args.graph:
        for module in sorted(graph):
            print(f"{module}: {' '.join(sorted(graph[module]))}")
    found = cycles(graph)
    problems = layering_problems(graph)
    for component in found:
        print(f"cycle: {' <-> '.join(component)}")
    for problem in problems:
        print(f"layering: {problem}")
    edges = sum(len(targets) for targets in graph.values())
    print(f"{len(graph)} modules, {edges} imports, {len(found)} cycles, {len(problems)} layering violations")
    return 1 if found or problems else 0


if __name__ == "__main__":
    sys.exit(main())
