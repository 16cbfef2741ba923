"""No import cycles in `migrate` or `neuroncompat`, and no `migrate` module importing one above it.

`neuroncompat_report`, what the three commands share in how they report, lies below both packages: it imports
neither (`neuroncompat`'s `__init__` starts the shim, which `neuron-migrate` must never do).

The check is an AST walk, independent of any structure tool: every `import`/`from ... import` in
every module of both packages (including imports inside functions, which still make a loop for
a reader and for tools such as pydeps) becomes an edge to the project module it names, and the
test fails when any strongly connected component has more than one module, naming the modules.
A package's `__init__` is reached only when a module imports the package itself, so the usual
"package re-exports its submodules" is not a cycle; a submodule that imports its own package is.

`MIGRATE_LAYERS` names migrate's layers, top first, and every migrate module's place in them: an import
may stay in its layer (the cycle test keeps that loop-free) or go down, never up. So the report formats
and the config-file migrators, which only need a result type, cannot reach the libcst pipeline again.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("migrate", "neuroncompat", "neuroncompat_report")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges[name].update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:
                        edges[name].add(f"{target}.{alias.name}")
                    elif target in modules:
                        edges[name].add(target)
    return edges


# Top first. A name stands for the module and everything under it; the longest matching name places a module.
MIGRATE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("command line", ("migrate.__main__", "migrate.cli")),
    ("run over files", ("migrate.runner", "migrate.dispatch", "migrate.notebook", "migrate.stdin")),
    ("python pipeline", ("migrate.engine", "migrate.transform")),
    ("reports", ("migrate.report", "migrate.formats", "migrate.docs", "migrate.rule_sources")),
    ("rule table", ("migrate.rule_families",)),
    ("rules", ("migrate.rules", "migrate.configs")),
    ("file context", ("migrate.context",)),
    (
        "records and text helpers",
        (
            "migrate",
            "migrate.results",
            "migrate.options",
            "migrate.registry",
            "migrate.config",
            "migrate.discover",
            "migrate.facts",
            "migrate.flow",
            "migrate.imports",
            "migrate.kernel_repos",
            "migrate.markers",
            "migrate.names",
            "migrate.parser_limits",
            "migrate.prefilter",
            "migrate.statement_lines",
            "migrate.writer",
            "migrate.rules.references",
            "migrate.configs.cores",
            "migrate.configs.shell_syntax",
        ),
    ),
)


def _layer(module: str) -> int:
    """Index of `module`'s layer in MIGRATE_LAYERS (0 = top), by the longest name that contains it."""
    best: tuple[int, int] | None = None
    for depth, (_, names) in enumerate(MIGRATE_LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > best[0]):
                best = (len(name), depth)
    if best is None:
        raise AssertionError(f"{module} is in no layer of MIGRATE_LAYERS: add it where it belongs")
    return best[1]


def _upward(edges: dict[str, set[str]]) -> list[str]:
    """Every migrate import that goes to a higher layer, as `importer (layer) -> imported (layer)`."""
    found = []
    for name in sorted(edges):
        if not name.startswith("migrate"):
            continue
        for target in sorted(edges[name]):
            if target.startswith("migrate") and _layer(target) < _layer(name):
                found.append(
                    f"{name} ({MIGRATE_LAYERS[_layer(name)][0]}) -> {target} ({MIGRATE_LAYERS[_layer(target)][0]})"
                )
    return found


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges[node]:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return cycles


def test_the_walk_sees_the_project_imports() -> None:
    edges = _edges(_modules())
    assert "migrate.rules.base" in edges["migrate.rule_families"]  # the families themselves are imported lazily
    assert "migrate.registry" in edges["migrate.rules.device"]
    assert "neuroncompat.patches" in edges["neuroncompat.shim"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_import_cycles() -> None:
    assert _cycles(_edges(_modules())) == []


def test_every_migrate_module_has_a_layer() -> None:
    for name in _modules():
        if name == "migrate" or name.startswith("migrate."):
            _layer(name)  # raises naming the module that is in no layer


def test_the_layer_check_catches_an_upward_import() -> None:
    assert _layer("migrate.rules.references") > _layer("migrate.context") > _layer("migrate.rules.device")
    edges = {"migrate.results": {"migrate.engine"}, "migrate.engine": {"migrate.results"}}
    assert _upward(edges) == ["migrate.results (records and text helpers) -> migrate.engine (python pipeline)"]


def test_no_migrate_module_imports_one_above_it() -> None:
    assert _upward(_edges(_modules())) == []


def test_the_shared_report_package_imports_neither_command_package() -> None:
    edges = _edges(_modules())
    shared = {name: targets for name, targets in edges.items() if name.split(".")[0] == "neuroncompat_report"}
    assert "neuroncompat_report.exits" in shared
    assert {t for targets in shared.values() for t in targets if t.split(".")[0] != "neuroncompat_report"} == set()
