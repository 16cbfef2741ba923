"""The line of each rewritten statement (`migrate.statement_lines`) is the line libcst's `PositionProvider` gives.

The reports show each rewrite at its statement's first line; the engine finds those lines from CPython's statements
(`from_spans`), or where it has no CPython tree by rendering the parsed module once and stopping at the last statement
it needs (`rendered_lines`): every statement, nested ones included, must come out as `PositionProvider` has them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from migrate.cold_statements import statement_spans
from migrate.statement_lines import from_spans, rendered_lines

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
    data = path.read_bytes()
    wrapper = MetadataWrapper(cst.parse_module(data), unsafe_skip_copy=True)
    module = wrapper.module
    positions = wrapper.resolve(PositionProvider)
    visitor = _Statements()
    module.visit(visitor)
    statements = visitor.found
    assert len(statements) > 3
    expected = {node: positions[node].start.line for node in statements}
    assert from_spans(module, statements, statement_spans(ast.parse(data).body)) == expected
    assert rendered_lines(module, statements) == expected
    first = statements[:2]  # the rendering stops after the second statement: the lines are still right
    assert rendered_lines(module, first) == {node: expected[node] for node in first}


_ODD = b"""\
@decorator(
    1)
async def f(x):  # a decorated coroutine: libcst and CPython put it at `async def`
    if x: return 1
    elif (x
          > 2):
        y = [
            1]; z = 2
    else:
        if x:
            pass
    try:
        pass
    except* ValueError:
        pass
    else:
        pass
    async with a:
        async for i in b:
            pass
        else:
            pass
    match x:
        case 1:
            (
                x)
        case _:
            while x: pass
    try: pass
    finally:
        class C: pass
"""


def test_statement_lines_of_every_kind_of_compound_statement_are_libcst_positions():
    wrapper = MetadataWrapper(cst.parse_module(_ODD), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    visitor = _Statements()
    wrapper.module.visit(visitor)
    expected = {node: positions[node].start.line for node in visitor.found}
    assert from_spans(wrapper.module, visitor.found, statement_spans(ast.parse(_ODD).body)) == expected


def test_statements_that_do_not_line_up_give_no_lines():
    module = cst.parse_module(b"x = 1\ny = 2\n")
    assert from_spans(module, module.body, statement_spans(ast.parse(b"x = 1\n").body)) is None
