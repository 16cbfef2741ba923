"""TODO NM932: a loop that passes a pipeline new height/width (or batch, or CFG on/off) each iteration
compiles new graphs each time on Neuron, so it gets the TODO that says so.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    on,
)
from migrate.rules.diffusers_common import is_diffusers_file
from migrate.rules.todo_catalogue import SHAPE_LOOP, todo

# pipeline call arguments that decide graph shapes: a new value is a new graph (guidance_scale: CFG on or off)
_SHAPE_ARGS = ("height", "width", "num_images_per_prompt", "guidance_scale", "true_cfg_scale", "max_sequence_length")


class _LoopShapes(cst.CSTVisitor):
    """In a loop body: the shape arguments of calls whose value reads a name the loop changes."""

    def __init__(self, changing: set[str]) -> None:
        super().__init__()
        self.changing = changing
        self.found: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # defining a function runs nothing

    def visit_Assign(self, node: cst.Assign) -> None:
        if _reads(node.value) & self.changing:  # `h, w = size`: h and w change with the loop too
            for target in node.targets:
                self.changing |= _bound(target.target)

    def visit_Call(self, node: cst.Call) -> None:
        for arg in node.args:
            name = arg.keyword.value if arg.keyword is not None else None
            if name in _SHAPE_ARGS and name not in self.found and _reads(arg.value) & self.changing:
                self.found.append(name)


def _reads(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class _Reads(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)
            return False

    node.visit(_Reads())
    return names


def _bound(target: cst.BaseExpression) -> set[str]:
    if type(target) is cst.Name:
        return {target.value}
    if isinstance(target, cst.Tuple | cst.List):
        return {name for element in target.elements for name in _bound(element.value)}
    return set()


@on("For", "NM932")
def loop_shapes(node: cst.For, ctx: FileContext) -> cst.For:
    """NM932: `for size in sizes: pipe(prompt, height=size, width=size)` compiles new graphs every iteration."""
    if not ctx.enabled("NM932") or not is_diffusers_file(ctx):
        return node
    changing = _bound(node.target)
    if not changing:
        return node
    shapes = _LoopShapes(changing)
    node.body.visit(shapes)
    if shapes.found:
        todo(ctx, "NM932", SHAPE_LOOP.format(names="/".join(shapes.found)))
    return node
