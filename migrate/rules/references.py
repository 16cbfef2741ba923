"""Which names a piece of code reads: whether an import or an assignment is still needed."""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst


class _Names(cst.CSTVisitor):
    """Names read in a subtree: not attribute names, keywords, or the names inside imports."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> bool:
        self.names.add(node.value)
        return False


def references(nodes: Iterable[cst.CSTNode]) -> set[str]:
    """Every name read in `nodes` (attribute names, keywords and import statements aside)."""
    collector = _Names()
    for node in nodes:
        node.visit(collector)
    return collector.names
