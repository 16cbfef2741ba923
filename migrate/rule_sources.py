"""Where a rule lives: the line that declares it, the hooks tagged with its id, and every line of code that names
its id, for `--explain`.

Every rule is declared one way, a `Rule(id=..., ...)` call (`migrate.registry`) in its family's `RULES`, and
applied by hooks that name it by id. This reads the package's own source with `ast`: the `Rule` call whose `id`
is the id declares the rule; a hook names the ids it applies in its `@on(...)` tag (`migrate.rules.base.on`),
which `hooks` reads; every other string literal equal to the id is code that applies or words it.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import cast

PACKAGE = Path(__file__).resolve().parent


def _declared_id(call: ast.Call) -> ast.expr | None:
    """The `id` of a `Rule(...)` call (keyword or first argument); None for any other call."""
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
    if name != "Rule":
        return None
    given = next((k.value for k in call.keywords if k.arg == "id"), None)
    return given if given is not None else (call.args[0] if call.args else None)


@lru_cache(maxsize=1)
def _sources() -> tuple[tuple[str, str, ast.Module, frozenset[int], frozenset[int]], ...]:
    """Each module of the package: its path as shown, its text, its tree, the ids of its declaring nodes and those
    of its hooks' tags (which neither declare nor apply a rule: `hooks` lists the hooks)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        declaring = set()
        tagging: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if _hook_tag(decorator) is not None:
                        tagging.update(id(arg) for arg in cast(ast.Call, decorator).args)
            head = _declared_id(node) if isinstance(node, ast.Call) else None
            if head is not None:
                declaring.add(id(head))
        where = path.relative_to(PACKAGE.parent).as_posix()
        found.append((where, source, tree, frozenset(declaring), frozenset(tagging)))
    return tuple(found)


def places(rule_id: str) -> tuple[list[str], list[str]]:
    """(`migrate/path.py:line` of its declarations, those of the other lines naming `rule_id`), in path order."""
    declared: list[str] = []
    used: list[str] = []
    for where, source, tree, declaring, tagging in _sources():
        if rule_id not in source:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == rule_id and id(node) not in tagging:
                (declared if id(node) in declaring else used).append(f"{where}:{node.lineno}")
    return declared, sorted(set(used), key=_by_path_and_line)


def hooks(rule_id: str) -> list[str]:
    """`migrate/path.py:line name (NodeType)` of each hook tagged with `rule_id` (`@on("Call", "NM101")`,
    `migrate.rules.base.on`), in path order: the functions that apply the rule."""
    found = []
    for where, source, tree, _, _ in _sources():
        if rule_id not in source:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                tag = _hook_tag(decorator)
                if tag is not None and rule_id in tag[1]:
                    found.append(f"{where}:{node.lineno} {node.name} ({tag[0]})")
    return found


def _hook_tag(decorator: ast.expr) -> tuple[str, tuple[str, ...]] | None:
    """(node type, rule ids) of an `@on(...)` decorator; None for any other."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id == "on"):
        return None
    values = [arg.value for arg in decorator.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
    return (values[0], tuple(values[1:])) if values else None


def _by_path_and_line(place: str) -> tuple[str, int]:
    path, _, line = place.rpartition(":")
    return path, int(line)
