"""The legacy import rewrite: each Optimum Neuron or torch_xla import becomes the native one, once the tree is final.

An import is visited before the code that uses it, but whether `import torch_xla...as xm` can go
depends on every later use having been rewritten. So the imports of `optimum.neuron` and
`torch_xla` are rewritten once, when the module is left (`rewrite_imports`, called by the
`legacy` family's module hook): the remaining references are counted, swapped names
(`legacy_names`) are renamed, and each legacy import becomes the native one, goes when nothing
uses it, or stays with a TODO (NM918/NM919) when something still does. The native imports are
written by `migrate.imports`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from migrate.context import FileContext
from migrate.flow import Candidate
from migrate.imports import LINE_LENGTH, add_from_imports, add_names, alias_local, alias_name, from_line
from migrate.markers import TODO_PREFIX, find_skip
from migrate.names import dotted
from migrate.rules.base import code
from migrate.rules.legacy_names import MENTION, import_rule, is_legacy, resolve, skipped
from migrate.rules.references import references
from migrate.rules.removal import has_comments
from migrate.rules.todo_catalogue import attach, leftover_rule


def rewrite_imports(node: cst.Module, ctx: FileContext) -> cst.Module:
    """Rewrite the legacy imports of the final module, then add the from-imports rewrites asked for."""
    if not MENTION.search(ctx.text):
        return add_from_imports(node, ctx.needed_names)  # a CUDA script's rewrite (NM521) may still want an import
    bindings = _Bindings(ctx)
    node.visit(bindings)
    if not bindings.legacy:
        return add_from_imports(node, ctx.needed_names)
    referenced = references(node.body)
    used = {bindings.renames.get(n, n) for n in referenced}
    # A module asked for by a rewrite whose statement was removed later (`os` for a rank check
    # in an emptied `if`) is not imported.
    ctx.needed_imports.intersection_update(referenced)
    candidates = {id(c.node): c for c in ctx.frames[0].candidates}
    rewritten = node.visit(_Rewrite(ctx, bindings, used, candidates))
    assert type(rewritten) is cst.Module
    return add_from_imports(rewritten, ctx.needed_names)


class _Bindings(cst.CSTVisitor):
    """Local names bound by legacy `from ... import` statements, with their swap."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.renames: dict[str, str] = {}  # local name -> new local name
        self.legacy = False
        self.existing: dict[str, str] = {}  # local -> qualified, for non-legacy from-imports

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return not skipped(node)

    def visit_Import(self, node: cst.Import) -> bool:
        if any(is_legacy(alias_name(a)) for a in node.names):
            self.legacy = True
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        module = dotted(node.module) if node.module is not None and not node.relative else None
        if module is None:
            return False
        if isinstance(node.names, cst.ImportStar):
            self.legacy = self.legacy or is_legacy(module)
            return False
        if not is_legacy(module):
            for alias in node.names:
                self.existing[alias_local(alias)] = f"{module}.{alias_name(alias)}"
            return False
        self.legacy = True
        for alias in node.names:
            found = resolve(f"{module}.{alias_name(alias)}")
            if alias.asname is None and found is not None and found.name and self.ctx.enabled(found.rule_id):
                if found.name != alias_name(alias):
                    self.renames[alias_name(alias)] = found.name
        return False


class _Rewrite(cst.CSTTransformer):
    """Rename swapped names, rewrite legacy imports, keep the engine's flow candidates attached."""

    def __init__(self, ctx: FileContext, bindings: _Bindings, used: set[str], candidates: dict[int, Candidate]) -> None:
        super().__init__()
        self.ctx = ctx
        self.renames = bindings.renames
        self.renamed_words: re.Pattern[str] | None = None  # the renamed names as words, for comments
        self.existing = bindings.existing
        self.used = used
        self.candidates = candidates
        self.skip: set[int] = set()  # ids of Name nodes that are not references
        self.wanted = ctx.needed_names
        self.header: set[str] = set()
        self.top: set[int] = set()  # ids of module-level statements
        self.merges: dict[int, list[tuple[str, str | None]]] = {}  # existing `from M import` -> names to add
        self.emit: list[cst.SimpleStatementLine] = []  # new module-level imports, at the first legacy one

    def visit_Module(self, node: cst.Module) -> bool:
        self.header = {line.comment.value.split(")")[0] for line in node.header if line.comment is not None}
        self.first = id(node.body[0]) if node.body else None
        self.top = {id(stmt) for stmt in node.body}
        self._plan(node.body)
        return True

    def _plan(self, body: Sequence[cst.BaseStatement]) -> None:
        """Decide the module-level native imports up front, so each module is imported once.

        Names whose module the script already imports from at module level join that statement
        (`from transformers import AutoTokenizer, Trainer`); the others go where the first
        legacy import was.
        """
        plan: dict[str, list[tuple[str, str | None]]] = {}
        statements: dict[str, cst.SimpleStatementLine] = {}
        for stmt in body:
            if type(stmt) is not cst.SimpleStatementLine or skipped(stmt):
                continue
            for small in stmt.body:
                if (
                    type(small) is not cst.ImportFrom
                    or small.relative
                    or small.module is None
                    or isinstance(small.names, cst.ImportStar)
                ):
                    continue
                module = dotted(small.module) or ""
                if not is_legacy(module):
                    statements.setdefault(module, stmt)
                    continue
                for alias in small.names:
                    found = resolve(f"{module}.{alias_name(alias)}")
                    if found is None or not self.ctx.enabled(found.rule_id) or found.module is None or not found.name:
                        continue
                    local = self.renames.get(alias_local(alias), alias_local(alias))
                    target = f"{found.module}.{found.name}"
                    if local in self.used and self.existing.get(local) != target:
                        plan.setdefault(found.module, []).append((found.name, None if local == found.name else local))
                        self.existing[local] = target
        for module, names in self.wanted.items():
            for name in names:
                if self.existing.get(name) != f"{module}.{name}":
                    plan.setdefault(module, []).append((name, None))
                    self.existing[name] = f"{module}.{name}"
        if not any(_legacy_from(s) for stmt in body if type(stmt) is cst.SimpleStatementLine for s in stmt.body):
            return  # nothing to replace at module level: `add_from_imports` places the wanted ones
        self.wanted.clear()
        for module, additions in sorted(plan.items()):
            existing = statements.get(module)
            if existing is not None and len(existing.body) == 1:
                self.merges.setdefault(id(existing), []).extend(additions)
            else:
                self.emit.append(from_line(module, additions, False))

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.skip.add(id(node.attr))
        return True

    def visit_Arg(self, node: cst.Arg) -> bool:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))
        return True

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        new = self.renames.get(updated.value)
        if new is None or id(original) in self.skip:
            return updated
        return updated.with_changes(value=new)

    def leave_Comment(self, original: cst.Comment, updated: cst.Comment) -> cst.Comment:
        """`# NeuronTrainingArguments holds the compile flags` names the class the script now uses (issue #41):
        a comment naming a renamed class would send a reviewer looking for code that is gone. The tool's own
        TODOs and skip markers are left as they are."""
        text = updated.value
        if not self.renames or text.startswith(TODO_PREFIX) or find_skip(text) is not None:
            return updated
        if self.renamed_words is None:
            words = "|".join(map(re.escape, sorted(self.renames, key=len, reverse=True)))
            self.renamed_words = re.compile(rf"\b({words})\b")
        new = self.renamed_words.sub(lambda found: self.renames[found.group(1)], text)
        return updated if new == text else updated.with_changes(value=new)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        result = super().on_leave(original_node, updated_node)
        candidate = self.candidates.get(id(original_node))
        if candidate is not None:
            assert isinstance(result, cst.CSTNode)  # a candidate is an assignment: renamed, never removed
            candidate.node = result
        return result

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine):
        merge = self.merges.get(id(original))
        if merge is not None:
            return _merge(updated, merge)
        star = _legacy_star(updated)
        if star is not None:  # the names it binds are unknown: nothing can be swapped
            return self._todo(updated, original, star)
        if skipped(original) or not any(
            type(s) in (cst.Import, cst.ImportFrom) and _legacy_import(s) for s in updated.body
        ):
            return updated
        top = id(original) in self.top
        lines: list[cst.SimpleStatementLine] = []
        if top and any(_legacy_from(s) for s in updated.body):
            lines, self.emit = self.emit, []
        kept: list[cst.BaseSmallStatement] = []
        todos: list[str] = []  # modules of legacy imports that stay
        for small in updated.body:
            if type(small) is cst.ImportFrom and _legacy_import(small):
                new_lines, rest, left = self._from_import(small, planned=top)
                lines.extend(new_lines)
                if rest is not None:
                    kept.append(rest)
                    todos.extend(left)
            elif type(small) is cst.Import and _legacy_import(small):
                remaining, left = self._import(small)
                if remaining is not None:
                    kept.append(remaining)
                    todos.extend(left)
            else:
                kept.append(small)
        if kept:
            last = kept[-1]
            kept[-1] = last.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            lines.append(cst.SimpleStatementLine(kept))
        if not lines:
            return (
                cst.RemovalSentinel.REMOVE
                if not has_comments(updated.leading_lines)
                else updated.with_changes(body=[cst.Pass()])
            )
        lines[0] = lines[0].with_changes(leading_lines=updated.leading_lines)
        lines[-1] = lines[-1].with_changes(trailing_whitespace=updated.trailing_whitespace)
        if todos:
            index = len(lines) - 1  # the residual legacy import is the last line
            lines[index] = self._todo(lines[index], original, todos[0])
        return cst.FlattenSentinel(lines) if len(lines) > 1 else lines[0]

    def _todo(self, line: cst.SimpleStatementLine, original: cst.CSTNode, module: str) -> cst.SimpleStatementLine:
        header = self.header if id(original) == self.first else set()
        return attach(line, self.ctx, leftover_rule(module), header)

    def _from_import(
        self, node: cst.ImportFrom, planned: bool
    ) -> tuple[list[cst.SimpleStatementLine], cst.ImportFrom | None, list[str]]:
        """Native imports for one legacy `from` import (none when `planned`), what stays, and why."""
        module = dotted(node.module) or ""  # type: ignore[arg-type]
        assert not isinstance(node.names, cst.ImportStar)
        groups: dict[str, list[tuple[str, str | None]]] = {}
        rest: list[cst.ImportAlias] = []
        left: list[str] = []
        for alias in node.names:
            name = alias_name(alias)
            local = alias_local(alias)
            found = resolve(f"{module}.{name}")
            enabled = found is not None and self.ctx.enabled(found.rule_id)
            if found is not None and enabled and found.module is not None and found.name:
                local_new = self.renames.get(local, local)
                if (
                    not planned
                    and local_new in self.used
                    and self.existing.get(local_new) != f"{found.module}.{found.name}"
                ):
                    groups.setdefault(found.module, []).append(
                        (found.name, None if local_new == found.name else local_new)
                    )
                    self.existing[local_new] = f"{found.module}.{found.name}"
                self.ctx.hit(found.rule_id)
            elif local in self.used:
                rest.append(alias)
                if found is None or enabled:
                    left.append(module)
            elif enabled or (found is None and self._drop_unused(module)):
                self.ctx.hit(found.rule_id if found is not None else import_rule(module))
            else:
                rest.append(alias)
        multiline = node.lpar is not None and "\n" in code(node)
        lines = [from_line(m, names, multiline) for m, names in sorted(groups.items())]
        residual = None
        if rest:
            rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            residual = node.with_changes(names=rest)
            if len(rest) == 1:
                residual = residual.with_changes(lpar=None, rpar=None)
        return lines, residual, left

    def _import(self, node: cst.Import) -> tuple[cst.Import | None, list[str]]:
        rest = []
        for alias in node.names:
            name = alias_name(alias)
            if is_legacy(name) and alias_local(alias) not in self.used and self._drop_unused(name):
                self.ctx.hit(import_rule(name))
            else:
                rest.append(alias)
        left = [alias_name(a) for a in rest if is_legacy(alias_name(a)) and alias_local(a) in self.used]
        if not rest:
            return None, []
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return node.with_changes(names=rest), left

    def _drop_unused(self, module: str) -> bool:
        return self.ctx.enabled(import_rule(module))


def _merge(line: cst.SimpleStatementLine, names: list[tuple[str, str | None]]) -> cst.SimpleStatementLine:
    """The script's own `from M import ...` line with `names` added; parenthesized when it grows too long."""
    small = line.body[0]
    assert type(small) is cst.ImportFrom
    added = add_names(small, names)
    merged = line.with_changes(body=[added])
    if small.lpar is None and len(code(merged).strip()) > LINE_LENGTH:
        assert not isinstance(added.names, cst.ImportStar)  # merges go into name lists only
        pairs = [(alias_name(a), alias_local(a) if a.asname else None) for a in added.names]
        wrapped = from_line(dotted(small.module) or "", pairs, True)  # type: ignore[arg-type]
        return wrapped.with_changes(leading_lines=line.leading_lines, trailing_whitespace=line.trailing_whitespace)
    return merged


def _legacy_star(line: cst.SimpleStatementLine) -> str | None:
    """The module of a `from <legacy module> import *` on the line, if there is one."""
    return next(
        (
            dotted(s.module)
            for s in line.body
            if type(s) is cst.ImportFrom
            and s.module is not None
            and isinstance(s.names, cst.ImportStar)
            and is_legacy(dotted(s.module))
        ),
        None,
    )


def _legacy_from(node: cst.BaseSmallStatement) -> bool:
    return type(node) is cst.ImportFrom and _legacy_import(node)


def _legacy_import(node: cst.BaseSmallStatement) -> bool:
    if type(node) is cst.Import:
        return any(is_legacy(alias_name(a)) for a in node.names)
    if type(node) is cst.ImportFrom and node.module is not None and not node.relative:
        return is_legacy(dotted(node.module)) and not isinstance(node.names, cst.ImportStar)
    return False
