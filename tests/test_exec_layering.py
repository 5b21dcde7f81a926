"""The executor layer stands on its own: nothing under synth/exec/ imports the command line, directly
or through another synth module (the CLI is a thin layer over the executors, never the other way
round). Read from the source with ``ast``, so imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO

PACKAGE = REPO / "synth"


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` inside the synth package, or None."""
    parts = name.split(".")
    if parts[0] != "synth":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, name: str, is_package: bool = False) -> set[str]:
    """Every synth module the source of module ``name`` imports (absolute or relative, anywhere)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if _module_file(f"{module}.{alias.name}"))
    return {m for m in found if m == "synth" or m.startswith("synth.")}


def _import_chains(start: list[Path], extra: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Every synth module reachable from the modules ``start`` (and ``extra``: name -> source),
    with the chain of imports that reaches it."""
    sources = dict(extra or {})
    chains: dict[str, list[str]] = {name: [name] for name in [*map(_module_name, start), *sources]}
    todo = list(chains)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in sources:
            imports = _imports(sources[name], name)
        elif path is not None:
            imports = _imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        else:
            continue
        for imported in sorted(imports):
            # importing synth.a.b runs synth/__init__ and synth/a/__init__ too
            parts = imported.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target not in chains and _module_file(target) is not None:
                    chains[target] = [*chains[name], target]
                    todo.append(target)
    return chains


def test_nothing_under_synth_exec_imports_the_cli():
    sources = sorted((PACKAGE / "exec").rglob("*.py"))
    chains = _import_chains(sources)
    assert "synth.exec.mp" in chains and "synth.verify" in chains  # the walk follows imports
    reaching_cli = [" -> ".join(chain) for name, chain in sorted(chains.items()) if name.split(".")[:2] == ["synth", "cli"]]
    assert reaching_cli == []


def test_the_walk_sees_a_cli_import():
    """The check can fail: a module importing the CLI, even inside a function, or through a
    relative import, is caught."""
    inside_a_function = "def f():\n    from synth.cli.run import run_cmd\n    return run_cmd\n"
    assert _import_chains([], {"synth.exec.probe": inside_a_function})["synth.cli.run"] == ["synth.exec.probe", "synth.cli.run"]
    relative = _import_chains([], {"synth.exec.mpi.probe": "from ...cli import _util\n"})
    assert relative["synth.cli._util"] == ["synth.exec.mpi.probe", "synth.cli._util"]
    assert "synth.cli" not in _import_chains([], {"synth.exec.probe": "import synth.exec.data\n"})
