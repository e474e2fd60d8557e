"""No import cycle in teamd/ and teamctl/, counting the imports inside functions.

The graph is built with `ast` from the sources, so an import a function makes lazily (to
dodge a cycle at load time) counts like one at the top of the module: a cycle hidden that
way is still two modules that cannot be understood, or split, one without the other.
Imports under `if TYPE_CHECKING:` are left out: they never run, they only name types.

The one edge a cycle may go through is listed below, with why; the test fails on any other
cycle, and on an allowed edge that no longer exists or closes no cycle (so the list cannot
go stale).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("teamd", "teamctl")

#: the one lazy import a cycle may go through: the supervisor's preload. `teamd run` imports
#: everything a teammate runs once, in the parent, before it forks any member
#: (`model.preload`, called from `Supervisor.run`, itself a lazy import so that `teamctl`
#: never loads the SDK); the agent loop, which that import names, calls the model module
ALLOWED: dict[tuple[str, str], str] = {
    ("teamd.agent.model", "teamd.agent.loop"): "the supervisor's preload, in model.preload",
}

def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(node: ast.Import | ast.ImportFrom, name: str, modules: dict[str, Path]) -> set[str]:
    """The project modules one import statement loads (a package's submodule when
    `from package import submodule`, else the module named)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:  # relative: resolve against the importing module's package
        package = name.split(".")
        if modules[name].name != "__init__.py":
            package.pop()  # a module's package is its parent; a package's is itself
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    out: set[str] = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:
            out.add(f"{base}.{alias.name}")
        elif base in modules:
            out.add(base)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges: set[str] = set()
        for node in _imports(tree):
            edges |= _targets(node, name, modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
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

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _path(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    """One cycle through `start` inside `members` (breadth first), to show in a failure."""
    paths = {w: [start, w] for w in graph[start] if w in members}
    queue = list(paths)
    while queue:
        v = queue.pop(0)
        if v == start:
            return paths[v]
        for w in sorted(graph[v]):
            if w in members and w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return [start]


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # `Supervisor.run` imports the model lazily: the graph must count it, or the test
    # could pass over every cycle hidden the same way
    assert "teamd.agent.model" in graph["teamd.supervisor"]
    assert "teamd.scripted.server" in graph["teamctl.demo"]  # inside a function too
    # ... and leave out what only a type checker reads
    assert "teamd.scripted.server" not in graph["teamd.scripted.handler"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert _path(graph, "a", {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_every_allowed_edge_is_an_import_that_closes_a_cycle() -> None:
    graph = import_graph()
    for (importer, imported), why in ALLOWED.items():
        assert imported in graph[importer], f"{importer} → {imported} is gone ({why}): " \
            "take it off the list"
        # needed: without it on the list, the test below would fail
        assert any({importer, imported} <= set(c) for c in cycles(graph)), \
            f"{importer} → {imported} closes no cycle ({why}): take it off the list"


def test_no_import_cycle() -> None:
    graph = import_graph()
    for (importer, imported) in ALLOWED:
        graph[importer].discard(imported)
    found = cycles(graph)
    shown = "\n".join(" → ".join(_path(graph, c[0], set(c))) for c in found)
    assert not found, f"import cycles (counting imports inside functions):\n{shown}"
