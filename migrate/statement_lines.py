"""The first line of given statements of a parsed module, for the reports that show each rewrite at its line.

The engine has CPython's tree of the file anyway (the nesting check; for a later pass, the verification of the
previous output) and keeps where its statements are (`migrate.cold_statements.Span`): a libcst statement's line is
its CPython statement's `lineno`, found by walking the two trees' statements side by side (`from_spans`), which
costs a small part of a render. Where the trees do not line up, or there is no CPython tree (the prefilter off),
the lines come from one render (`rendered_lines`):

libcst's `PositionProvider` computes a range for every node of the module, which costs about eight times
rendering it; the reports need the line of a few statements. This renders the module once with a codegen
state that counts newlines only when it reaches one of them, at the point where libcst records a node's
syntactic start (after its leading comments and blank lines, as `PositionProvider`'s start line).
It builds on libcst's codegen state (`libcst._nodes.internal.CodegenState`), the hook `PositionProvider`
itself uses; `tests/migrate/test_statement_lines.py` holds its lines equal to `PositionProvider`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from migrate.cold_statements import Span, aligned


class _AllFound(Exception):
    """Raised by the codegen once the last wanted statement's line is known: the rest need not be rendered."""


class _NoOp:
    """A context manager that does nothing: `record_syntactic_position` is entered for every node rendered, and a
    generator-based one (contextlib) costs more than the rendering it wraps."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_OP = _NoOp()


class _LineCounter(CodegenState):
    """Codegen that writes down the line of each wanted node as its syntactic position is recorded."""

    def __init__(self, module: cst.Module, wanted: Collection[cst.CSTNode]) -> None:
        super().__init__(module.default_indent, module.default_newline)
        self.wanted = wanted
        self.found: dict[cst.CSTNode, int] = {}
        self._newlines = 0  # in tokens[:_counted]
        self._counted = 0

    # a plain context manager in place of libcst's generator-based one (see _NoOp)
    def record_syntactic_position(  # type: ignore[override]
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _NoOp:
        if node in self.wanted and node not in self.found:
            self._newlines += sum(token.count("\n") for token in self.tokens[self._counted :])
            self._counted = len(self.tokens)
            self.found[node] = self._newlines + 1
            if len(self.found) == len(self.wanted):
                raise _AllFound
        return _NO_OP


def statement_lines(
    module: cst.Module, statements: Collection[cst.CSTNode], spans: tuple[Span, ...] | None
) -> dict[cst.CSTNode, int]:
    """The 1-based first line of each of `statements` (nodes of `module` itself) in `module`'s source, from `spans`
    (its CPython statements', None for none) where the trees line up, else from a render."""
    if spans is not None:
        found = from_spans(module, statements, spans)
        if found is not None:
            return found
    return rendered_lines(module, statements)


def from_spans(
    module: cst.Module, statements: Collection[cst.CSTNode], spans: tuple[Span, ...]
) -> dict[cst.CSTNode, int] | None:
    """The lines of `statements` from `spans`, the CPython statements of `module`'s source; None where libcst's and
    CPython's statements do not line up."""
    found: dict[cst.CSTNode, int] = {}
    return found if _walk(module.body, spans, statements, found) else None


def _walk(
    body: Sequence[cst.CSTNode], spans: tuple[Span, ...], wanted: Collection[cst.CSTNode], found: dict[cst.CSTNode, int]
) -> bool:
    pairs = aligned(body, spans)
    if pairs is None:
        return False
    for statement, group in pairs:
        if statement in wanted:
            found[statement] = group[0].line
        if type(statement) is cst.SimpleStatementLine:
            continue
        blocks = _blocks(statement)
        if len(blocks) != len(group[0].blocks):
            return False
        for block, inner in zip(blocks, group[0].blocks, strict=True):
            if block is not None and not _walk(block, inner, wanted, found):
                return False
    return True


def _blocks(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode] | None]:
    """A compound statement's blocks, as CPython's (`cold_statements._blocks`): the statements of each, an `elif`
    alone (CPython's `orelse` holds its `if`), an absent `else` or `finally` empty, and None for a block on the header
    line (`if x: y`), which holds no libcst statement to locate."""
    kind = type(statement)
    if kind is cst.If or kind is cst.For or kind is cst.While:
        orelse = statement.orelse  # type: ignore[attr-defined]
        other = () if orelse is None else [orelse] if type(orelse) is cst.If else _statements(orelse.body)
        return [_statements(statement.body), other]  # type: ignore[attr-defined]
    if kind is cst.Try or kind is cst.TryStar:
        handlers = [_statements(handler.body) for handler in statement.handlers]  # type: ignore[attr-defined]
        orelse, final = statement.orelse, statement.finalbody  # type: ignore[attr-defined]
        return [
            _statements(statement.body),  # type: ignore[attr-defined]
            *handlers,
            () if orelse is None else _statements(orelse.body),
            () if final is None else _statements(final.body),
        ]
    if kind is cst.Match:
        return [_statements(case.body) for case in statement.cases]  # type: ignore[attr-defined]
    return [_statements(statement.body)]  # type: ignore[attr-defined]


def _statements(block: cst.BaseSuite) -> Sequence[cst.CSTNode] | None:
    return block.body if type(block) is cst.IndentedBlock else None


def rendered_lines(module: cst.Module, statements: Collection[cst.CSTNode]) -> dict[cst.CSTNode, int]:
    """The lines of `statements` from one render of `module`, which counts newlines only at the wanted ones.

    The rendering stops at the last of them: a rewrite near the top of a long file costs a few lines' codegen.
    """
    counter = _LineCounter(module, statements)
    try:
        module._codegen(counter)
    except _AllFound:
        pass
    return counter.found
