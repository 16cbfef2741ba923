"""The import fix-up pass: one edit of the module's top after the rules ran.

It inserts `import neuroncompat` into migrated entry scripts and the imports that rewrites
introduced (`os` for `LOCAL_RANK`, `torch` for `torch.bfloat16` where only `from torch
import ...` was used), after the module docstring and any `from __future__` imports, never
twice.
"""

from __future__ import annotations

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
