"""Every import the codemod adds to a script is written here.

Rules never build import statements themselves; they ask the file context for a name and the
passes here add what was asked for, once:

- `FileContext.module_ref("torch.distributed")` queues `import torch` (plain module imports:
  `os` for `LOCAL_RANK`, `torch` for `torch.bfloat16` where only `from torch import ...` was
  used). `add_imports` inserts them, and `import neuroncompat` into migrated entry scripts,
  after the module docstring and any `from __future__` imports, never twice (the engine's
  import fix-up pass, one edit of the module's top after the rules ran).
- `FileContext.name_ref("transformers.distributed", "DistributedConfig")` queues
  `from transformers.distributed import DistributedConfig`. The legacy import rewrite
  (`migrate.rules.legacy_imports`) places such names where the replaced Optimum Neuron or
  torch_xla import stood, or merges them into the script's own `from M import ...` with
  `add_names`; `add_from_imports` puts the rest after the script's last import.

`from_line` writes a `from` import as black would (parenthesized one name per line when it is
too long), which is also how the legacy rewrite writes the native imports it substitutes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst

SHIM = "neuroncompat"


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        type(stmt) is cst.SimpleStatementLine
        and len(stmt.body) == 1
        and type(stmt.body[0]) is cst.Expr
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future(stmt: cst.BaseStatement) -> bool:
    return type(stmt) is cst.SimpleStatementLine and any(
        type(s) is cst.ImportFrom and type(s.module) is cst.Name and s.module.value == "__future__" for s in stmt.body
    )


def top_level_imports(module: cst.Module) -> set[str]:
    """Module names bound by plain `import x` statements at module level."""
    names: set[str] = set()
    for stmt in module.body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Import:
                    for alias in small.names:
                        names.add(cst.Module([]).code_for_node(alias.name))
    return names


def add_imports(module: cst.Module, modules: list[str]) -> cst.Module:
    """Insert `import m` for each of `modules` not already imported at module level."""
    present = top_level_imports(module)
    wanted = [m for m in modules if m not in present]
    if not wanted:
        return module
    body = list(module.body)
    index = 0
    if body and _is_docstring(body[0]):
        index = 1
    while index < len(body) and _is_future(body[index]):
        index += 1
    new = [cst.parse_statement(f"import {m}") for m in wanted]
    if index < len(body):
        following = body[index]
        leading = list(following.leading_lines)
        if leading and leading[0].comment is None:
            # the blank line that separated the docstring from the code now precedes the shim
            new[0] = new[0].with_changes(leading_lines=[leading[0]])
            body[index] = following.with_changes(leading_lines=leading[1:])
    elif index > 0:
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
    body[index:index] = new
    return module.with_changes(body=body)


# ---- `from M import name` ------------------------------------------------------------------

LINE_LENGTH = 88  # black's line length: longer import lines are parenthesized


def alias_name(alias: cst.ImportAlias) -> str:
    """The imported name of `a.b as c`: `a.b`."""
    return cst.Module([]).code_for_node(alias.name)


def alias_local(alias: cst.ImportAlias) -> str:
    """The name an alias binds: `c` for `a.b as c`, `a` for `import a.b`."""
    if alias.asname is not None and type(alias.asname.name) is cst.Name:
        return alias.asname.name.value
    return alias_name(alias).split(".")[0]


def from_line(module: str, names: list[tuple[str, str | None]], multiline: bool) -> cst.SimpleStatementLine:
    """`from module import a, b as c` for `(name, asname)` pairs; parenthesized one per line when asked or too long."""
    parts = [f"{n} as {a}" if a else n for n, a in names]
    if (multiline or len(f"from {module} import {', '.join(parts)}") > LINE_LENGTH) and len(parts) > 1:
        body = "".join(f"    {p},\n" for p in parts)
        return cst.parse_statement(f"from {module} import (\n{body})\n")  # type: ignore[return-value]
    return cst.parse_statement(f"from {module} import {', '.join(parts)}\n")  # type: ignore[return-value]


def add_names(node: cst.ImportFrom, names: list[tuple[str, str | None]]) -> cst.ImportFrom:
    """Add names to an existing `from M import ...`, in its order (isort's or alphabetical) or at the end."""
    assert not isinstance(node.names, cst.ImportStar)
    aliases = list(node.names)
    keys = [alias_name(a) for a in aliases]
    order: Callable[[str], Any] | None = next(
        (key for key in (_isort_key, str.lower) if keys == sorted(keys, key=key)), None
    )
    separator = next(
        (a.comma for a in aliases if type(a.comma) is cst.Comma), cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    )
    trailing = aliases[-1].comma
    aliases = [a.with_changes(comma=separator) for a in aliases]
    for name, asname in names:
        new = cst.ImportAlias(
            name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)) if asname else None, comma=separator
        )
        index = len(aliases)
        if order is not None:
            index = next((i for i, a in enumerate(aliases) if order(alias_name(a)) > order(name)), len(aliases))
        aliases.insert(index, new)
    aliases[-1] = aliases[-1].with_changes(comma=trailing)
    return node.with_changes(names=aliases)


def _isort_key(name: str) -> tuple[int, str]:
    """isort's default order within an import: CONSTANTS, then Classes, then functions."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower()


def add_from_imports(module: cst.Module, wanted: dict[str, list[str]]) -> cst.Module:
    """`from M import names` for each module of `wanted` (emptied), after the module's last import."""
    if not wanted:
        return module
    lines = [from_line(m, [(n, None) for n in names], False) for m, names in sorted(wanted.items())]
    wanted.clear()
    body = list(module.body)
    last = max(
        (
            i
            for i, s in enumerate(body)
            if type(s) is cst.SimpleStatementLine and any(type(x) in (cst.Import, cst.ImportFrom) for x in s.body)
        ),
        default=-1,
    )
    body[last + 1 : last + 1] = lines
    return module.with_changes(body=body)
