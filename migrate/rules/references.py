"""Which names a piece of code reads or binds: whether an import or an assignment is still needed."""

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


class _Bound(cst.CSTVisitor):
    """Names a subtree assigns: `x = ...`, `a, b = ...`, `x: T = ...`, `for x in`, `with ... as x`, `x += ...`."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def _target(self, target: cst.BaseExpression) -> None:
        if type(target) is cst.Name:
            self.names.add(target.value)
        elif isinstance(target, cst.Tuple | cst.List):
            for element in target.elements:
                self._target(element.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._target(node.asname.name)


def bindings(node: cst.CSTNode) -> set[str]:
    """Every name `node` assigns (imports, functions and classes aside)."""
    collector = _Bound()
    node.visit(collector)
    return collector.names
