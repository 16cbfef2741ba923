"""Render a migrated module: the source text of every statement the traversal kept, libcst's codegen for the rest.

Rendering a module back to text walks every node of it; on a library file the rules change a few statements and the
traversal keeps the rest as parsed (cold statements are not visited, and a statement no hook changed is handed back
as the original node: `migrate.transform`). libcst renders a node the same way wherever it is (its text depends on
the node, the absolute indentation it is rendered at and the module's default indent and newline), and the parsed
module renders to exactly the source, so a kept statement's text is its slice of the source. This module finds
those slices from CPython's statement lines (`migrate.cold_statements.Span`, which the engine has anyway) and the
libcst tree, then renders the migrated module with each kept statement standing in as its slice: only the changed
statements and the headers of the blocks around them go through libcst's codegen.

Where a statement's text starts: libcst gives a statement the comment and blank lines above it (`leading_lines`,
one physical line each), so it starts that many lines above the line CPython puts it on. A statement's text ends
where the next statement of its block starts; the last statement of a block ends where its block does, less the
comment lines the block itself owns (`IndentedBlock.footer`), and a block ends where its statement does when it is
the statement's last clause (an `if` body before an `else`: not known, so its last statement is rendered). Two
cases put CPython's line off the first line of libcst's statement and are refused: a decorator CPython places on a
later line than its `@` (`@(\\n name)`), and a line holding only a backslash (the logical line it starts belongs to
the statement below it); with a lone carriage return (a line break to CPython, not to the count of `\\n`) or no
trailing newline at the end of the file the engine does not call this at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, NamedTuple

import libcst as cst
from libcst._nodes.internal import CodegenState

from migrate.cold_statements import Span, aligned

_CONTINUATION_ONLY = re.compile(r"^[ \t\f]*\\\r?$", re.M)  # a line that is nothing but a line continuation


class _Extent(NamedTuple):
    """Where a statement of the parsed module is in its source: its text, and the indentation it was written at."""

    node: cst.CSTNode  # held so that no node of the migrated tree can reuse its id
    start: int
    end: int
    indent: str


@dataclass(frozen=True)
class _Source(cst.BaseStatement):
    """A kept statement in the tree being rendered, as its source text. The line break that ends it is a token of
    its own, as libcst's own newline is: `Module` drops the last token of a file without a trailing newline."""

    text: str

    def _visit_and_replace_children(self, visitor: Any) -> _Source:
        return self

    def _codegen_impl(self, state: CodegenState) -> None:
        cut = len(self.text) - (2 if self.text.endswith("\r\n") else 1)
        state.add_token(self.text[:cut])
        state.add_token(self.text[cut:])


def render(new: cst.Module, parsed: cst.Module, spans: tuple[Span, ...], text: str) -> str:
    """`new.code`, with the statements `new` shares with `parsed` (the module parsed from `text`, whose CPython
    statements are at `spans`) copied from `text` rather than rendered. Falls back to rendering `new` whole where
    `parsed` and `spans` do not line up."""
    extents = _extents(parsed, spans, text)
    if not extents:
        return new.code
    body = _Substitution(extents, text, new.default_indent).block(new.body, "")
    return new.code if body is None else new.with_changes(body=body).code


def _extents(parsed: cst.Module, spans: tuple[Span, ...], text: str) -> dict[int, _Extent]:
    """The extents of the statements of `parsed` whose text can be located, by id; empty where none can."""
    if not parsed.has_trailing_newline or _CONTINUATION_ONLY.search(text) is not None:
        return {}
    lines = text.split("\n")
    offsets = [0, *accumulate(len(line) + 1 for line in lines)]  # offsets[n - 1]: where line n starts
    walk = _Walk(parsed.default_indent, lines, offsets)
    pairs = aligned(parsed.body, spans)
    if pairs is None or (pairs and walk.start(*pairs[0]) != len(parsed.header) + 1):
        return {}  # the module's header is not the lines above its first statement: nothing is located
    walk.block(parsed.body, spans, "", len(parsed.header), len(lines) - len(parsed.footer))  # `lines[-1]` is empty
    return walk.found


class _Walk:
    """The walk of the parsed module's statements beside CPython's that finds where each one's text is."""

    def __init__(self, default_indent: str, lines: list[str], offsets: list[int]) -> None:
        self.default_indent = default_indent
        self.lines = lines
        self.offsets = offsets
        self.found: dict[int, _Extent] = {}

    def start(self, statement: cst.CSTNode, group: tuple[Span, ...]) -> int | None:
        """The first line of `statement`'s text (its leading lines included); None where CPython's line for it is
        not the line its first token is on (a decorator whose `@` is on an earlier line)."""
        first = group[0].start
        if getattr(statement, "decorators", ()) and not self.lines[first - 1].lstrip(" \t\f").startswith("@"):
            return None
        return first - len(statement.leading_lines)  # type: ignore[attr-defined]

    def block(
        self, body: Sequence[cst.CSTNode], spans: tuple[Span, ...], indent: str, after: int, end: int | None
    ) -> None:
        """Locate the statements of one block written at `indent` below line `after`, whose last statement's text
        ends before line `end` (None: not known). A start that is not below the one before it is not trusted."""
        pairs = aligned(body, spans)
        if pairs is None:
            return
        starts: list[int | None] = []
        for statement, group in pairs:
            start = self.start(statement, group)
            starts.append(start if start is not None and start > after else None)
            after = max(after, start or 0)
        for index, (statement, group) in enumerate(pairs):
            start = starts[index]
            stop = starts[index + 1] if index + 1 < len(starts) else end
            if stop is not None and start is not None and start >= stop:
                stop = None
            if start is not None and stop is not None:
                self.found[id(statement)] = _Extent(statement, self.offsets[start - 1], self.offsets[stop - 1], indent)
            if type(statement) is not cst.SimpleStatementLine:
                self.clauses(statement, group[0], indent, stop)

    def clauses(self, statement: cst.CSTNode, span: Span, indent: str, end: int | None) -> None:
        """Locate the statements in the blocks of a compound statement whose text ends before line `end`."""
        suites = _suites(statement)
        if len(suites) != len(span.blocks):
            return
        last = max((index for index, suite in enumerate(suites) if suite is not None), default=-1)
        for index, (suite, inner) in enumerate(zip(suites, span.blocks, strict=True)):
            suite_end = end if index == last else None
            if type(suite) is cst.IndentedBlock:
                footer = len(suite.footer)
                inner_indent = indent + (self.default_indent if suite.indent is None else suite.indent)
                self.block(
                    suite.body, inner, inner_indent, span.line, None if suite_end is None else suite_end - footer
                )
            elif type(suite) is cst.If and len(inner) == 1:  # an `elif`: written at the `if`'s indentation
                self.clauses(suite, inner[0], indent, suite_end)


def _suites(statement: cst.CSTNode) -> list[cst.CSTNode | None]:
    """A compound statement's clauses' suites in the order of CPython's blocks (`Span.blocks`): None for an absent
    `else` or `finally`, an `elif`'s `If` itself."""
    kind = type(statement)
    if kind is cst.If or kind is cst.For or kind is cst.While:
        orelse = statement.orelse  # type: ignore[attr-defined]
        return [statement.body, orelse if type(orelse) is cst.If else None if orelse is None else orelse.body]  # type: ignore[attr-defined]
    if kind is cst.Try or kind is cst.TryStar:
        orelse, final = statement.orelse, statement.finalbody  # type: ignore[attr-defined]
        return [
            statement.body,  # type: ignore[attr-defined]
            *(handler.body for handler in statement.handlers),  # type: ignore[attr-defined]
            None if orelse is None else orelse.body,
            None if final is None else final.body,
        ]
    if kind is cst.Match:
        return [case.body for case in statement.cases]  # type: ignore[attr-defined]
    return [statement.body]  # type: ignore[attr-defined]


class _Substitution:
    """The migrated tree with each statement it shares with the parsed one, at the same indentation, as `_Source`;
    only the statements on the way to one are rebuilt."""

    def __init__(self, extents: dict[int, _Extent], text: str, default_indent: str) -> None:
        self.extents = extents
        self.text = text
        self.default_indent = default_indent

    def block(self, body: Sequence[cst.BaseStatement], indent: str) -> list[cst.BaseStatement] | None:
        """`body` (a block written at `indent`) with its kept statements as source text; None if none is kept."""
        new: list[cst.BaseStatement] = []
        changed = False
        for statement in body:
            extent = self.extents.get(id(statement))
            if extent is not None and extent.node is statement and extent.indent == indent:
                new.append(_Source(self.text[extent.start : extent.end]))
                changed = True
            elif type(statement) is cst.SimpleStatementLine:
                new.append(statement)
            else:
                clauses = self.clauses(statement, indent)
                new.append(clauses)  # type: ignore[arg-type]
                changed |= clauses is not statement
        return new if changed else None

    def clauses(self, node: cst.CSTNode, indent: str) -> cst.CSTNode:
        """A compound statement (or one of its clauses: `else`, `except`, `finally`, `case`, an `elif`) with the
        kept statements of its blocks as source text; `node` itself where none is kept."""
        changes: dict[str, object] = {}
        body = getattr(node, "body", None)
        if type(body) is cst.IndentedBlock:
            inner = self.block(body.body, indent + (self.default_indent if body.indent is None else body.indent))
            if inner is not None:
                changes["body"] = body.with_changes(body=inner)
        for name in ("orelse", "finalbody"):
            clause = getattr(node, name, None)
            if clause is not None:
                new = self.clauses(clause, indent)
                if new is not clause:
                    changes[name] = new
        for name in ("handlers", "cases"):
            clauses = getattr(node, name, None)
            if clauses:
                rebuilt = [self.clauses(clause, indent) for clause in clauses]
                if any(new is not old for new, old in zip(rebuilt, clauses, strict=True)):
                    changes[name] = rebuilt
        return node.with_changes(**changes) if changes else node
