"""envkit's modules form a layered graph: no import cycle, at module level or inside functions.

Built from the source (AST), not by importing: a lower module that reaches back into the
orchestrator (engines -> create, render -> resources -> render) shows up even when the import
sits inside a function, where Python would tolerate it at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import envkit

ROOT = Path(envkit.__file__).parent


def module_name(path: Path, root: Path) -> str:
    parts = ("envkit", *path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the envkit modules it imports (every import statement anywhere in the file)."""
    files = {module_name(p, root): p for p in root.rglob("*.py") if "_data" not in p.parts}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from envkit.render import mirrors` imports the submodule; `from x import name` the module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and target != "envkit":
                    graph[name].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_checker_finds_a_planted_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "envkit"
    (pkg / "engines").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engines" / "__init__.py").write_text("")
    (pkg / "create.py").write_text("from envkit.engines import conda_cli\n")
    (pkg / "engines" / "conda_cli.py").write_text("def f():\n    from envkit.create import OLD\n")
    (pkg / "lower.py").write_text("import envkit.engines.conda_cli\n")
    assert find_cycles(import_graph(pkg)) == [["envkit.create", "envkit.engines.conda_cli"]]


def test_envkit_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "envkit.cli" in graph and graph["envkit.cli"], "the graph was not built"
    cycles = find_cycles(graph)
    assert not cycles, "import cycles (move what both sides share into a lower module):\n" + "\n".join(
        " <-> ".join(group) for group in cycles)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that runs up a floor, every module no floor covers, every impure import of a pure package."""
    problems = []
    for module, targets in sorted(graph.items()):
        if module == "envkit":
            continue
        floor = envkit.floor_of(module)
        if floor is None:
            problems.append(f"{module} is on no floor (add it to envkit.LAYERS)")
            continue
        for target in sorted(targets):
            up = envkit.floor_of(target)
            if up is not None and up > floor:
                problems.append(f"{module} (floor {floor}) imports {target} (floor {up})")
            for pure, banned in envkit.PURE.items():
                if (module == pure or module.startswith(pure + ".")) and any(
                        target == b or target.startswith(b + ".") for b in banned):
                    problems.append(f"{module} is pure but imports {target}")
    return problems


def test_layering_checker_finds_an_import_up_a_floor(tmp_path: Path) -> None:
    pkg = tmp_path / "envkit"
    (pkg / "prefix").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "prefix" / "__init__.py").write_text("")
    (pkg / "prefix" / "records.py").write_text("def f():\n    from envkit.create import x\n")
    (pkg / "create.py").write_text("from envkit.prefix import records\n")
    (pkg / "render").mkdir()
    (pkg / "render" / "__init__.py").write_text("from envkit import proc\n")
    (pkg / "proc.py").write_text("")
    (pkg / "stray.py").write_text("")
    found = layering_violations(import_graph(pkg))
    assert "envkit.prefix.records (floor 1) imports envkit.create (floor 5)" in found
    assert "envkit.render is pure but imports envkit.proc" in found
    assert "envkit.stray is on no floor (add it to envkit.LAYERS)" in found
    assert not any(p.startswith("envkit.create") for p in found)


def test_no_import_runs_up_a_floor() -> None:
    graph = import_graph()
    assert len(graph) > 40, "the graph was not built"
    problems = layering_violations(graph)
    assert not problems, "imports against the layering rule in envkit/__init__.py:\n" + "\n".join(problems)


def test_the_top_level_stays_short() -> None:
    """A newcomer finds a concept's one owner by its folder: at most 14 modules directly under envkit/."""
    top = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= 14, top
    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "_data"):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "May import" in doc, f"{package.name}/__init__.py must say what it owns and what it may import"
