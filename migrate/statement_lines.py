"""The first line of given statements of a parsed module, for the reports that show each rewrite at its line.

libcst's `PositionProvider` computes a range for every node of the module, which costs about eight times
rendering it; the reports need the line of a few statements. This renders the module once with a codegen
state that counts newlines only when it reaches one of them, at the point where libcst records a node's
syntactic start (after its leading comments and blank lines, as `PositionProvider`'s start line).
It builds on libcst's codegen state (`libcst._nodes.internal.CodegenState`), the hook `PositionProvider`
itself uses; `tests/migrate/test_rewrite_lines.py` holds its lines equal to `PositionProvider`'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

import libcst as cst
from libcst._nodes.internal import CodegenState


class _LineCounter(CodegenState):
    """Codegen that writes down the line of each wanted node as its syntactic position is recorded."""

    def __init__(self, module: cst.Module, wanted: Collection[cst.CSTNode]) -> None:
        super().__init__(module.default_indent, module.default_newline)
        self.wanted = wanted
        self.found: dict[cst.CSTNode, int] = {}
        self._newlines = 0  # in tokens[:_counted]
        self._counted = 0

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> Iterator[None]:
        if node in self.wanted and node not in self.found:
            self._newlines += sum(token.count("\n") for token in self.tokens[self._counted :])
            self._counted = len(self.tokens)
            self.found[node] = self._newlines + 1
        yield


def statement_lines(module: cst.Module, statements: Collection[cst.CSTNode]) -> dict[cst.CSTNode, int]:
    """The 1-based first line of each of `statements` (nodes of `module` itself) in `module`'s source."""
    counter = _LineCounter(module, statements)
    module._codegen(counter)
    return counter.found
