"""Every import the codemod adds to a script is written here.

Rules never build import statements themselves; they ask the file context for a name and the
passes here add what was asked for, once:

- `FileContext.module_ref("torch.distributed")` queues `import torch` (plain module imports:
  `os` for `LOCAL_RANK`, `torch` for `torch.bfloat16` where only `from torch import ...` was
  used). `add_imports` inserts them after the module docstring and any `from __future__`
  imports, never twice (the engine's import fix-up pass, one edit of the module's top after
  the rules ran).
- `import neuroncompat` goes into migrated entry scripts as `SHIM_LINE`, where isort and ruff's
  `I001` would sort it among the script's third-party imports, with a `# noqa: F401`: the
  script never uses the name (the import is for its patches), so without the comment
  `ruff check --fix` deletes it and the next `neuron-migrate --check` fails again; out of
  order, isort and ruff move it and a pre-commit run of both never settles.
- `FileContext.name_ref("transformers.distributed", "DistributedConfig")` queues
  `from transformers.distributed import DistributedConfig`. The legacy import rewrite
  (`migrate.rules.legacy_imports`) places such names where the replaced Optimum Neuron or
  torch_xla import stood, or merges them into the script's own `from M import ...` with
  `add_names`; `add_from_imports` puts the rest after the script's last import.

`from_line` writes a `from` import as black would (parenthesized one name per line when it is
too long), which is also how the legacy rewrite writes the native imports it substitutes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import libcst as cst

SHIM = "neuroncompat"
# the name is unused where it is imported: the comment keeps pyflakes/ruff's F401 fix from deleting it
SHIM_LINE = "import neuroncompat  # noqa: F401  (patches torch and Hugging Face for Neuron)\n"
# the libraries an entry script imports that make it want the shim (`migrate.facts.wants_shim`)
_SHIMMED = frozenset({"torch", "transformers", "trl", "accelerate", "peft", "diffusers"})
_NOT_THIRD_PARTY = sys.stdlib_module_names | {"__future__"}


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
    """Insert `import m` for each of `modules` not already imported at module level.

    Plain modules go to the top; then the shim goes where isort would sort it (`_add_shim`),
    so it is sorted among an `import torch` added here too.
    """
    present = top_level_imports(module)
    wanted = [m for m in modules if m not in present]
    module = _add_at_top(module, [m for m in wanted if m != SHIM])
    if SHIM in wanted:
        module = _add_shim(module) or _add_at_top(module, [SHIM])
    return module


def _add_at_top(module: cst.Module, modules: list[str]) -> cst.Module:
    """`import m` for each of `modules`, after the module docstring and any `from __future__` imports."""
    if not modules:
        return module
    body = list(module.body)
    index = 0
    if body and _is_docstring(body[0]):
        index = 1
    while index < len(body) and _is_future(body[index]):
        index += 1
    new = [cst.parse_statement(SHIM_LINE if m == SHIM else f"import {m}") for m in modules]
    if index < len(body):
        following = body[index]
        leading = list(following.leading_lines)
        if leading and leading[0].comment is None:
            # the blank line that separated the docstring from the code now precedes the new imports
            new[0] = new[0].with_changes(leading_lines=[leading[0]])
            body[index] = following.with_changes(leading_lines=leading[1:])
    elif index > 0:
        new[0] = new[0].with_changes(leading_lines=[cst.EmptyLine()])
    body[index:index] = new
    return module.with_changes(body=body)


def _import_root(stmt: cst.BaseStatement) -> tuple[int, str] | None:
    """isort's default sort key of a one-import statement line: plain imports first, then `from`, by module."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if type(small) is cst.Import:
        return 0, alias_name(small.names[0]).lower()
    if type(small) is cst.ImportFrom and not small.relative and small.module is not None:
        return 1, cst.Module([]).code_for_node(small.module).lower()
    return None


def _imported_root(stmt: cst.BaseStatement) -> str | None:
    """The top-level package a one-import line imports from (`torch` for `from torch.nn import X`)."""
    key = _import_root(stmt)
    return key[1].split(".")[0] if key else None


def _add_shim(module: cst.Module) -> cst.Module | None:
    """`module` with `SHIM_LINE` sorted into the section of its first module-level shimmed import.

    Or of its first third-party import where none imports a shimmed library at module level.

    A section is a run of import lines with no blank line between them, as isort writes them;
    the shim goes before the first line isort orders after `import neuroncompat` (plain imports
    come before `from` imports). None where no such import is at module level (imports inside
    `try:`), and the caller puts the shim at the top.
    """
    body = list(module.body)
    roots = [_imported_root(s) for s in body]
    anchor = next((i for i, root in enumerate(roots) if root in _SHIMMED), None)
    if anchor is None:  # `from vllm import LLM` where torch comes in through it: any third-party import
        anchor = next((i for i, root in enumerate(roots) if root and root not in _NOT_THIRD_PARTY), None)
    if anchor is None:
        return None
    start = anchor
    while start > 0 and _import_root(body[start - 1]) and not _blank_above(body[start]):
        start -= 1
    end = anchor
    while end + 1 < len(body) and _import_root(body[end + 1]) and not _blank_above(body[end + 1]):
        end += 1
    shim_key = (0, SHIM)
    index = next((i for i in range(start, end + 1) if (_import_root(body[i]) or shim_key) > shim_key), end + 1)
    shim = cst.parse_statement(SHIM_LINE)
    if index == start:  # the blank lines above the section now precede the shim; comments stay with their line
        leading = list(body[start].leading_lines)
        blanks = 0
        while blanks < len(leading) and leading[blanks].comment is None:
            blanks += 1
        shim = shim.with_changes(leading_lines=leading[:blanks])
        body[start] = body[start].with_changes(leading_lines=leading[blanks:])
    body.insert(index, shim)
    return module.with_changes(body=body)


def _blank_above(stmt: cst.SimpleStatementLine | cst.BaseCompoundStatement) -> bool:
    """Whether a blank line precedes `stmt`: isort separates sections with one."""
    return any(line.comment is None for line in stmt.leading_lines)


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
