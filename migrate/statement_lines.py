"""The first line of given statements of a parsed module, for the reports that show each rewrite at its line.

libcst's `PositionProvider` computes a range for every node of the module, which costs about eight times
rendering it; the reports need the line of a few statements. This renders the module once with a codegen
state that counts newlines only when it reaches one of them, at the point where libcst records a node's
syntactic start (after its leading comments and blank lines, as `PositionProvider`'s start line).
It builds on libcst's codegen state (`libcst._nodes.internal.CodegenState`), the hook `PositionProvider`
itself uses; `tests/migrate/test_statement_lines.py` holds its lines equal to `PositionProvider`'s.
"""

from __future__ import annotations

from collections.abc import Collection

import libcst as cst
from libcst._nodes.internal import CodegenState


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


def statement_lines(module: cst.Module, statements: Collection[cst.CSTNode]) -> dict[cst.CSTNode, int]:
    """The 1-based first line of each of `statements` (nodes of `module` itself) in `module`'s source.

    The rendering stops at the last of them: a rewrite near the top of a long file costs a few lines' codegen.
    """
    counter = _LineCounter(module, statements)
    try:
        module._codegen(counter)
    except _AllFound:
        pass
    return counter.found
