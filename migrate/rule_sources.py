"""Where a rule lives: the line that declares it and every line of code that names its id, for `--explain`.

Rules are declared three ways (a `Rule` in a family's table, a `Todo` in the TODO catalogue, `_rule` in the
config catalogues) and applied by hooks that name them by id, so finding one took a grep. This reads the
package's own source with `ast`: a call to one of `DECLARERS` whose `id` (keyword or first argument) is the id
declares the rule, and so does the id at the head of a rule's row in a table of rows that become `Rule`s
(`(id, name, summary, rationale, ...)`, as the transformers renames are listed); every other string literal
equal to the id is code that applies or words it.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

DECLARERS = frozenset({"Rule", "Todo", "_rule"})
PACKAGE = Path(__file__).resolve().parent


def _declared_id(call: ast.Call) -> ast.expr | None:
    name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
    if name not in DECLARERS:
        return None
    given = next((k.value for k in call.keywords if k.arg == "id"), None)
    return given if given is not None else (call.args[0] if call.args else None)


def _row_id(row: ast.Tuple) -> ast.expr | None:
    """The id heading a rule's row: a tuple of at least four strings whose first is an id."""
    strings = [e for e in row.elts[:4] if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    first = row.elts[0] if row.elts else None
    if len(strings) == 4 and isinstance(first, ast.Constant) and str(first.value).startswith("NM"):
        return first
    return None


@lru_cache(maxsize=1)
def _sources() -> tuple[tuple[str, str, ast.Module, frozenset[int]], ...]:
    """Each module of the package: its path as shown, its text, its tree and the ids of its declaring nodes."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        declaring = set()
        for node in ast.walk(tree):
            head = (
                _declared_id(node)
                if isinstance(node, ast.Call)
                else _row_id(node)
                if isinstance(node, ast.Tuple)
                else None
            )
            if head is not None:
                declaring.add(id(head))
        found.append((path.relative_to(PACKAGE.parent).as_posix(), source, tree, frozenset(declaring)))
    return tuple(found)


def places(rule_id: str) -> tuple[list[str], list[str]]:
    """(`migrate/path.py:line` of its declarations, those of the other lines naming `rule_id`), in path order."""
    declared: list[str] = []
    used: list[str] = []
    for where, source, tree, declaring in _sources():
        if rule_id not in source:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == rule_id:
                (declared if id(node) in declaring else used).append(f"{where}:{node.lineno}")
    return declared, sorted(set(used), key=_by_path_and_line)


def _by_path_and_line(place: str) -> tuple[str, int]:
    path, _, line = place.rpartition(":")
    return path, int(line)
