"""The layering of docs/architecture.md, checked on the code: the import graph of the whole
``synth`` package (read with `ast`, nothing imported) has no cycle, imports of synth modules sit
at module level (a function-local one is allowed only where the list below says why), no private
name crosses from one module to another, and the key layers import only downwards."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "synth"

#: (importing module, imported module) -> why the import is inside a function
FUNCTION_LOCAL_ALLOWED = {
    ("synth", "synth.exec.api"): "`synth.run` is imported on first use, so that `import synth` stays light",
    ("synth.exec", "synth.exec.api"): "`synth.exec.run`/`verified` are imported on first use, so that importing one executor "
    "module (layout, program) does not start the shared-memory backend and the verifier",
}

#: edges left out of the cycle check, each an allowed function-local import that closes a cycle
#: only until the work named in its reason is merged
CYCLE_EXEMPT: set[tuple[str, str]] = set()

#: The layers of docs/architecture.md, from the bottom: (level, group, module-name prefixes). A
#: module-level import goes to a lower level, or stays inside its own group; two groups on one
#: level (ilp and selection, say) do not import each other.
LAYERS = (
    (
        0,
        "foundation",
        (
            "synth",
            "synth.errors",
            "synth.units",
            "synth.canonical",
            "synth.fileio",
            "synth.progress",
            "synth.limits",
            "synth.text",
            "synth.solver_output",
        ),
    ),
    (
        1,
        "data model",
        ("synth.topology", "synth.collective", "synth.schedule", "synth.schedule_npz", "synth.generators", "synth.builtin"),
    ),
    (2, "analysis", ("synth.routing", "synth.verify", "synth.transform", "synth.simulate", "synth.bounds")),
    (3, "method", ("synth.method",)),
    (3, "exec", ("synth.exec",)),
    (3, "interop", ("synth.interop",)),
    (4, "engines", ("synth.algorithms.engines",)),
    (5, "methods", ("synth.algorithms",)),
    (5, "nccl model", ("synth.nccl_model",)),
    (6, "ilp", ("synth.ilp",)),
    (6, "selection", ("synth.selection",)),
    (7, "registry", ("synth.registry",)),
    (8, "compare", ("synth.compare",)),
    (8, "generated", ("synth.generated",)),
    (8, "schedule set", ("synth.schedule_set_build",)),
    (9, "msccl set", ("synth.interop.msccl_set",)),
    (9, "plot", ("synth.plot",)),
    (9, "torch", ("synth.torch",)),
    (10, "report", ("synth.report",)),
    (11, "cli", ("synth.cli", "synth.__main__")),
)


def layer_of(module: str) -> tuple[int, str]:
    """The (level, group) of the longest prefix of ``module`` in `LAYERS` (``synth`` itself only
    for the package's ``__init__``)."""
    best: tuple[int, int, str] | None = None
    for level, group, prefixes in LAYERS:
        for prefix in prefixes:
            matches = module == prefix or (prefix != "synth" and module.startswith(prefix + "."))
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), level, group)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and to docs/architecture.md")
    return best[1], best[2]


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    local: bool  # deferred: inside a function (or under the ``__main__`` guard)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _imports(tree: ast.AST):
    """(import node, deferred) for every import that runs (not under TYPE_CHECKING); deferred:
    inside a function, or under ``if __name__ == "__main__"`` (run as a script only)."""

    def walk(node: ast.AST, local: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk(other, local)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, local
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            inner = inner or (isinstance(child, ast.If) and _is_main_guard(child.test))
            yield from walk(child, inner)

    yield from walk(tree, False)


def import_graph() -> tuple[list[Edge], list[tuple[str, int, str]]]:
    """Every import of a synth module by a synth module, and every private name imported from
    another module (importer, line, what)."""
    modules = all_modules()
    edges: list[Edge] = []
    private: list[tuple[str, int, str]] = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, local in _imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
                names: list[tuple[str, str]] = []
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets, names = [], []
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in modules:
                        targets.append(sub)
                    else:
                        targets.append(source)
                        names.append((source, alias.name))
            for target in targets:
                if target in modules:
                    edges.append(Edge(name, target, node.lineno, local))
                    hidden = [p for p in target.split(".")[1:] if p.startswith("_") and not p.startswith("__")]
                    outside = not name.startswith(target.rpartition(".")[0] + ".") and name != target.rpartition(".")[0]
                    if hidden and outside:
                        private.append((name, node.lineno, f"module {target}"))
            for source, what in names:
                if source in modules and what.startswith("_") and not what.startswith("__"):
                    private.append((name, node.lineno, f"{source}.{what}"))
    return edges, private


def find_cycle(edges: list[Edge]) -> list[str] | None:
    """One cycle of the graph (modules in order, the first repeated at the end), or None."""
    graph: dict[str, list[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e.imported)
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(set(graph.get(node, ()))):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_code():
    """The reader finds what it must: both kinds of import, submodules named in a ``from``."""
    edges, _ = import_graph()
    pairs = {(e.importer, e.imported, e.local) for e in edges}
    assert ("synth.registry", "synth.algorithms.ring", False) in pairs  # from synth.algorithms import ring
    assert ("synth", "synth.exec.api", True) in pairs  # the lazy synth.run
    assert ("synth.verify", "synth.schedule", False) in pairs
    assert find_cycle([Edge("a", "b", 1, False), Edge("b", "c", 1, True), Edge("c", "a", 1, False)]) == ["a", "b", "c", "a"]
    assert find_cycle([Edge("a", "b", 1, False), Edge("a", "c", 1, False), Edge("b", "c", 1, False)]) is None


def test_no_import_cycle():
    edges, _ = import_graph()
    assert set(FUNCTION_LOCAL_ALLOWED) >= CYCLE_EXEMPT
    cycle = find_cycle([e for e in edges if (e.importer, e.imported) not in CYCLE_EXEMPT])
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_synth_modules_are_imported_at_module_level():
    edges, _ = import_graph()
    local = sorted({(e.importer, e.imported): e.line for e in edges if e.local}.items())
    unexplained = [
        f"{a} imports {b} inside a function (line {line})" for (a, b), line in local if (a, b) not in FUNCTION_LOCAL_ALLOWED
    ]
    assert not unexplained, "\n".join(unexplained)
    stale = sorted(set(FUNCTION_LOCAL_ALLOWED) - {pair for pair, _ in local})
    assert not stale, f"allowed function-local imports that no longer exist: {stale}"


def test_no_private_name_crosses_modules():
    _, private = import_graph()
    assert not private, "\n".join(f"{importer} (line {line}) imports {what}" for importer, line, what in private)


def test_layers_import_downwards():
    """Every module-level import goes down the layers (or stays in its group): nothing below the
    registry imports it, the methods and the ILP know nothing of choosing among methods, the
    data model knows nothing of what is built on it."""
    edges, _ = import_graph()
    wrong = []
    for e in edges:
        if e.local:
            continue  # deferred imports are listed, each with its reason, in FUNCTION_LOCAL_ALLOWED
        (a_level, a_group), (b_level, b_group) = layer_of(e.importer), layer_of(e.imported)
        if b_level > a_level or (b_level == a_level and a_group != b_group):
            wrong.append(f"{e.importer} ({a_group}) imports {e.imported} ({b_group}), line {e.line}")
    assert not wrong, "\n".join(wrong)
    for module in all_modules():
        layer_of(module)  # every module has its place
    assert layer_of("synth.algorithms.ring") == (5, "methods") and layer_of("synth.algorithms.engines.lowering")[1] == "engines"
