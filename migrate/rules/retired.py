"""Imports of names a rule rewrote away go with their last use (issue 27, C1/C8/C10/C11).

A rule that replaces a use of a name the migrated script must not import any more (PEFT removed
`prepare_model_for_int8_training`; `bitsandbytes`, `xformers` and `torch.cuda.nccl` do not exist
on Neuron) calls `retire(ctx, qualified_name)`. When the module is left, and the tree is final,
every import of a retired name (or of a module under a retired package) whose local name nothing
reads any more is removed, wherever it stands: at module level, in a function, or in the
`try: import bitsandbytes as bnb` / `except ImportError: raise ...` guard around it, which then
goes too. An `if` whose whole body was such an import goes with it. Comments above a removed
import move to the next statement; the TODO a rule left on the import itself goes with it.

Only retired names are touched: an import the script never used stays (it may be imported for
its side effects), and so does one a statement still reads, unless the name is `withdraw`n: it no
longer exists upstream (TRL 1.x's `setup_chat_format`), so its import fails at import time whether
or not a statement reads it. Such an import goes in any case and each remaining use carries the
calling rule's TODO, so the script runs up to the first use, where the TODO stands, instead of
dying before its first line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.imports import alias_local, alias_name
from migrate.markers import SKIP_MARKER, TODO_PREFIX
from migrate.names import dotted
from migrate.registry import Rule
from migrate.rules.base import family_state, on
from migrate.rules.references import references

RULES: tuple[Rule, ...] = ()  # no rules of its own: it finishes the rewrites of the rules that retire names


@dataclass
class _Retired:
    names: set[str] = field(default_factory=set)  # qualified names and package prefixes
    withdrawn: set[str] = field(default_factory=set)  # of those, the names gone upstream: imports go while read


def retire(ctx: FileContext, qualified: str) -> None:
    """Ask for the import of `qualified` (`peft.prepare_model_for_int8_training`, `bitsandbytes`) to
    go once nothing reads it: the calling rule has just rewritten one of its uses."""
    family_state(ctx, "retired", _Retired).names.add(qualified)


class _Reads(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx

    def visit_Name(self, node: cst.Name) -> None:
        qualified = self.ctx.qualify(node)
        if qualified is not None:
            retire(self.ctx, qualified)


def withdraw(ctx: FileContext, qualified: str) -> None:
    """Ask for every import of `qualified` to go, read or not: the name no longer exists upstream, so the
    import itself fails; the calling rule leaves its TODO on each use."""
    state = family_state(ctx, "retired", _Retired)
    state.names.add(qualified)
    state.withdrawn.add(qualified)


def retire_reads(ctx: FileContext, node: cst.CSTNode) -> None:
    """`retire` every imported name `node` reads: the rule is deleting it (`quantization_config=get_quantization_config(a)`)."""
    node.visit(_Reads(ctx))


def _is_retired(qualified: str, retired: set[str]) -> bool:
    return any(qualified == name or qualified.startswith(name + ".") for name in retired)


@on("Module")
def drop_retired_imports(node: cst.Module, ctx: FileContext) -> cst.Module:
    retired = ctx.family_state.get("retired")
    if not isinstance(retired, _Retired) or not retired.names:
        return node
    read = references(node.body)
    pruned = node.visit(_Prune(retired.names, read, retired.withdrawn))
    assert type(pruned) is cst.Module
    return pruned


class _Prune(cst.CSTTransformer):
    """Removes unread imports of retired names, then the statements they leave with nothing to do."""

    def __init__(self, retired: set[str], read: set[str], withdrawn: set[str]) -> None:
        super().__init__()
        self.retired = retired
        self.read = read
        self.withdrawn = withdrawn
        # statements that were nothing but a removed import, by id; each node is held so that its id is not reused
        # by a node made later (a freed node's id comes back, and an unrelated statement would be dropped)
        self.emptied: dict[int, cst.SimpleStatementLine] = {}

    def _gone(self, alias: cst.ImportAlias, module: str | None) -> bool:
        qualified = f"{module}.{alias_name(alias)}" if module is not None else alias_name(alias)
        if not _is_retired(qualified, self.retired):
            return False
        if alias_local(alias) in self.read and not _is_retired(qualified, self.withdrawn):
            return False
        # `import a.b` binds `a`, which may stand for much more than the retired `a.b`
        return module is not None or alias.asname is not None or "." not in alias_name(alias)

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if any(line.comment is not None and SKIP_MARKER in line.comment.value for line in updated.leading_lines):
            return updated
        if updated.trailing_whitespace.comment is not None and SKIP_MARKER in updated.trailing_whitespace.comment.value:
            return updated
        body: list[cst.BaseSmallStatement] = []
        changed = False
        for small in updated.body:
            new = self._small(small)
            changed = changed or new is not small
            if new is not None:
                body.append(new)
        if not changed:
            return updated
        if body:
            body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(body=body)
        emptied = updated.with_changes(body=[cst.Pass()])
        self.emptied[id(emptied)] = emptied
        return emptied

    def _small(self, small: cst.BaseSmallStatement) -> cst.BaseSmallStatement | None:
        if type(small) is cst.Import:
            names = [a for a in small.names if not self._gone(a, None)]
        elif type(small) is cst.ImportFrom and not small.relative and not isinstance(small.names, cst.ImportStar):
            module = dotted(small.module) if small.module is not None else None
            if module is None:
                return small
            names = [a for a in small.names if not self._gone(a, module)]
        else:
            return small
        assert not isinstance(small.names, cst.ImportStar)
        if len(names) == len(small.names):
            return small
        if not names:
            return None
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        if type(small) is cst.ImportFrom and len(names) == 1:
            return small.with_changes(names=names, lpar=None, rpar=None)
        return small.with_changes(names=names)

    def leave_Try(self, original: cst.Try, updated: cst.Try) -> cst.BaseStatement:
        """`try: import bitsandbytes as bnb` / `except ImportError: raise ...` goes as a whole."""
        if not self._only_emptied(updated.body.body) or updated.orelse is not None or updated.finalbody is not None:
            return updated
        if not all(type(h.body) is cst.IndentedBlock and _only_reports(h.body.body) for h in updated.handlers):
            return updated
        return self._emptied_statement(updated)

    def leave_If(self, original: cst.If, updated: cst.If) -> cst.BaseStatement:
        if updated.orelse is not None or not self._only_emptied(updated.body.body):
            return updated
        return self._emptied_statement(updated)

    def _only_emptied(self, body: Sequence[cst.BaseStatement] | Sequence[cst.BaseSmallStatement]) -> bool:
        return bool(body) and all(id(stmt) in self.emptied for stmt in body)

    def _emptied_statement(self, statement: cst.BaseCompoundStatement | None) -> cst.SimpleStatementLine:
        """A `pass` standing for what went; its parent block drops it, keeping the comments above it."""
        lines = statement.leading_lines if statement is not None else ()
        emptied = cst.SimpleStatementLine([cst.Pass()], leading_lines=lines)
        self.emptied[id(emptied)] = emptied
        return emptied

    def leave_IndentedBlock(self, original: cst.IndentedBlock, updated: cst.IndentedBlock) -> cst.IndentedBlock:
        body = _without_emptied(updated.body, self.emptied)
        if body is None:
            return updated
        if not body:  # the block held only removed imports: its `if`/`try` may go too (it sees an emptied `pass`)
            body = [self._emptied_statement(None)]
        return updated.with_changes(body=body)

    def leave_Module(self, original: cst.Module, updated: cst.Module) -> cst.Module:
        body = _without_emptied(updated.body, self.emptied)
        return updated if body is None else updated.with_changes(body=body)


def _only_reports(body: Sequence[cst.BaseStatement]) -> bool:
    """An `except ImportError:` body that only raises, passes or reports (print/warn/log): nothing to keep."""
    for stmt in body:
        if type(stmt) is not cst.SimpleStatementLine:
            return False
        for small in stmt.body:
            if type(small) in (cst.Raise, cst.Pass):
                continue
            if type(small) is cst.Expr and type(small.value) is cst.Call:
                name = dotted(small.value.func) or ""
                if name == "print" or name.startswith(("warnings.", "logger.", "logging.")):
                    continue
            return False
    return True


def _without_emptied(
    body: Sequence[cst.BaseStatement], emptied: Mapping[int, cst.CSTNode]
) -> list[cst.BaseStatement] | None:
    """`body` without the statements that were removed imports; their comments move to the next one."""
    if not any(id(stmt) in emptied for stmt in body):
        return None
    out: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    for stmt in body:
        lines = list(getattr(stmt, "leading_lines", ()))
        if id(stmt) in emptied:
            carried.extend(line for line in lines if not _is_todo(line))
            continue
        if carried or (not out and id(body[0]) in emptied):
            joined = [*carried, *lines]
            if not out:  # now the block's first statement: no blank line above it
                while joined and joined[0].comment is None:
                    joined.pop(0)
            stmt = stmt.with_changes(leading_lines=joined)
            carried = []
        out.append(stmt)
    if any(line.comment is not None for line in carried):
        out.append(cst.SimpleStatementLine([cst.Pass()], leading_lines=carried))
    return out


def _is_todo(line: cst.EmptyLine) -> bool:
    return line.comment is not None and line.comment.value.startswith(TODO_PREFIX)
