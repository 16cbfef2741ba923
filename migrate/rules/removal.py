"""Statements the Optimum Neuron and torch_xla families delete (`xm.mark_step()`), and how they go.

Deleting a statement with `RemoveFromParent` drops the comments above it. So a family registers
a predicate with `@removable` instead, and the `legacy` hooks prune the marked statements when
their block is left: their leading lines (comments, TODOs) move to the next statement, an
assignment stays while something still reads its name, and an `if` that pruning emptied goes
as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.markers import TODO_PREFIX
from migrate.rules.base import family_state, leading_lines
from migrate.rules.legacy_names import skipped
from migrate.rules.references import references
from migrate.rules.retired import retire


@dataclass(frozen=True)
class Removal:
    """A statement a rule deletes; `binds` is the name it assigns, kept while something reads it."""

    rule_id: str
    binds: str | None = None


Removable = Callable[[cst.BaseStatement, FileContext], "Removal | None"]
_REMOVABLE: list[Removable] = []


def removable(fn: Removable) -> Removable:
    """Register a predicate that marks whole statements for deletion when their block is left."""
    _REMOVABLE.append(fn)
    return fn


@dataclass
class _PruneState:
    # a `pass` left by pruning, by id -> (that node, held so its id stays unique; the rule that pruned)
    emptied: dict[int, tuple[cst.SimpleStatementLine, str]] = field(default_factory=dict)


def _removal(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    for predicate in _REMOVABLE:
        found = predicate(stmt, ctx)
        if found is not None and ctx.enabled(found.rule_id):
            return found
    if (
        type(stmt) is cst.If
        and stmt.orelse is None
        and type(stmt.body) is cst.IndentedBlock
        and len(stmt.body.body) == 1
    ):
        # `if is_master: print(met.metrics_report())` emptied by pruning goes as a whole
        state = family_state(ctx, "legacy-prune", _PruneState)
        emptied = state.emptied.get(id(stmt.body.body[0]))
        if emptied is not None and not has_comments(leading_lines(stmt.body.body[0])):
            return Removal(emptied[1])
    return None


def prune(body: Sequence[cst.BaseStatement], ctx: FileContext) -> list[cst.BaseStatement] | None:
    """`body` without its removable statements, or None when nothing goes."""
    marks = [_removal(stmt, ctx) for stmt in body]
    marks = [None if mark is not None and skipped(stmt) else mark for stmt, mark in zip(body, marks)]
    if not any(marks):
        return None
    out: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    attached: list[cst.EmptyLine] = []  # the comments directly above the statements of the run removed last
    for index, (stmt, mark) in enumerate(zip(body, marks)):
        if mark is not None and mark.binds is not None:
            others = [s for i, s in enumerate(body) if i != index]
            if mark.binds in references(others):
                mark = None  # still read later: keep the assignment
        if mark is None:
            if carried:
                own = leading_lines(stmt)
                if own and own[0].comment is None:  # a blank line: the removed run was a paragraph of its own
                    carried = _without(carried, attached)
                stmt = stmt.with_changes(leading_lines=_joined(carried, own))
                carried = []
            attached = []
            if not out and index:  # the statements above it all went: no blank line opens the block
                stmt = stmt.with_changes(leading_lines=_without_leading_blanks(leading_lines(stmt)))
            out.append(stmt)
            continue
        ctx.hit(mark.rule_id)
        stmt.visit(_FromImportedReads(ctx))
        carried.extend(leading_lines(stmt))
        attached.extend(_attached(leading_lines(stmt)))
    carried = _without(carried, attached)  # the removed run ends the block
    if carried and any(line.comment is not None for line in carried):
        out.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carried))
    if not out:
        empty = cst.SimpleStatementLine([cst.Pass()])
        state = family_state(ctx, "legacy-prune", _PruneState)
        state.emptied[id(empty)] = (empty, next(m.rule_id for m in marks if m is not None))
        out.append(empty)
    return out


class _FromImportedReads(cst.CSTVisitor):
    """Retires the `from`-imported names a removed statement reads: `from packaging import version` goes once
    the removed `if version.parse(torch.__version__) >= ...:` was its last use (`migrate.rules.retired`). A whole
    module's `import torch` stays: it may be there for what importing it does."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.ctx.imports.from_imported:
            qualified = self.ctx.qualify(node)
            if qualified is not None:
                retire(self.ctx, qualified)


def _attached(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The comment lines right above a statement, with no blank line between: they are about it, and go with
    it where the statements they stood above were a paragraph of their own (a `# Enable TF32 on Ampere GPUs`
    above a removed `allow_tf32`). A TODO an earlier run left moves on, as other comments do."""
    found: list[cst.EmptyLine] = []
    for line in reversed(lines):
        if line.comment is None or line.comment.value.startswith(TODO_PREFIX):
            break
        found.append(line)
    return found


def _without(lines: list[cst.EmptyLine], dropped: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    return [line for line in lines if not any(line is gone for gone in dropped)]


def _joined(carried: Sequence[cst.EmptyLine], own: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines above a statement once the statements before it went: theirs, then its own.

    Blank lines alone are not stacked: a statement that has a blank line above it keeps just its
    own, so deleting a block of statements between two blank lines leaves one blank line, not two.
    """
    if not has_comments(carried) and own and own[0].comment is None:
        return list(own)
    return [*carried, *own]


def _without_leading_blanks(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    kept = list(lines)
    while kept and kept[0].comment is None:
        kept.pop(0)
    return kept


def has_comments(lines: Sequence[cst.EmptyLine]) -> bool:
    return any(line.comment is not None for line in lines)


def is_bare_pass(stmt: cst.BaseStatement) -> bool:
    """A `pass` line with nothing above it: what pruning leaves where a whole body went."""
    return (
        type(stmt) is cst.SimpleStatementLine
        and len(stmt.body) == 1
        and type(stmt.body[0]) is cst.Pass
        and not stmt.leading_lines
    )
