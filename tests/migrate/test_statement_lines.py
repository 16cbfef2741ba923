"""The line of each rewritten statement (`migrate.statement_lines`) is the line libcst's `PositionProvider` gives.

The reports show each rewrite at its statement's first line; the engine finds those lines by rendering the parsed
module once and stops rendering at the last statement it needs, so a few statements near the top of a file and
every statement of it must both come out as `PositionProvider` has them.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate.statement_lines import statement_lines

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "cuda").glob("*.py"))[:12]


class _Statements(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseStatement):
            self.found.append(node)
        return True


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_statement_lines_are_libcst_positions(path: Path):
    wrapper = MetadataWrapper(cst.parse_module(path.read_bytes()), unsafe_skip_copy=True)
    module = wrapper.module
    positions = wrapper.resolve(PositionProvider)
    visitor = _Statements()
    module.visit(visitor)
    statements = visitor.found
    assert len(statements) > 3
    expected = {node: positions[node].start.line for node in statements}
    assert statement_lines(module, statements) == expected
    first = statements[:2]  # the rendering stops after the second statement: the lines are still right
    assert statement_lines(module, first) == {node: expected[node] for node in first}
