"""NM605: `MpDeviceLoader`/`ParallelLoader` wrapped a DataLoader to move batches to the XLA device; the
loader is unwrapped and the loop that iterates it moves each batch to the device itself.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    code,
    on,
)
from migrate.rules.todo_catalogue import todo
from migrate.rules.xla.state import _state

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM605",
        name="mp-device-loader",
        safety="safe",
        summary="`pl.MpDeviceLoader(loader, device)` -> `loader`; the loop moves each batch to `device`.",
        rationale="MpDeviceLoader (and `ParallelLoader(...).per_device_loader(...)`) copied batches "
        "to the XLA device in the background. The plain DataLoader is iterated instead, and the "
        "first statement of each `for` over it moves the batch: `x, y = x.to(device), "
        "y.to(device)`, a dict comprehension for dict batches, `batch.to(device)` otherwise.",
        before="import torch_xla.distributed.parallel_loader as pl\n"
        "train_loader = pl.MpDeviceLoader(loader, device)\nfor x, y in train_loader:\n    step(x, y)\n",
        after="import torch_xla.distributed.parallel_loader as pl\ntrain_loader = loader\nfor x, y in train_loader:\n    x, y = x.to(device), y.to(device)\n    step(x, y)\n",
    ),
)


@on("Assign")
def loader_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `train_loader = <unwrapped loader>` so loops over it move their batches."""
    state = _state(ctx)
    unwrapped = state.unwrapped.get(id(node.value))
    if unwrapped is not None and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        state.loaders[node.targets[0].target.value] = unwrapped[1]
    return node


@on("For", "NM605", "NM918")
def move_batches(node: cst.For, ctx: FileContext) -> cst.For:
    """First statement of a loop over an unwrapped loader: move the batch to the device."""
    state = _state(ctx)
    target: cst.BaseExpression = node.target
    iterator = node.iter
    if (
        type(iterator) is cst.Call
        and type(iterator.func) is cst.Name
        and iterator.func.value == "enumerate"
        and iterator.args
    ):
        iterator = iterator.args[0].value
        if type(target) is cst.Tuple and len(target.elements) == 2:
            target = target.elements[1].value
    unwrapped = state.unwrapped.get(id(iterator))
    device = unwrapped[1] if unwrapped is not None else None
    if device is None and type(iterator) is cst.Name:
        device = state.loaders.get(iterator.value)
    if device is None or not ctx.enabled("NM605") or type(node.body) is not cst.IndentedBlock:
        return node
    move = _move(target, device, node.body)
    if move is None:
        todo(ctx, "NM918", "MpDeviceLoader moved each batch to the device: move the batch with .to(device) here")
        return node
    if node.body.body and code(node.body.body[0]).strip() == move:
        return node
    ctx.hit("NM605")
    return node.with_changes(body=node.body.with_changes(body=[cst.parse_statement(move), *node.body.body]))


def _move(target: cst.BaseExpression, device: cst.BaseExpression, body: cst.IndentedBlock) -> str | None:
    """The statement that moves a loop's batch, by the shape of the loop target."""
    dev = code(device)
    if type(target) is cst.Tuple and all(type(e.value) is cst.Name for e in target.elements):
        names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
        return f"{', '.join(names)} = {', '.join(f'{n}.to({dev})' for n in names)}"
    if type(target) is not cst.Name:
        return None
    name = target.value
    text = code(body)
    if re.search(rf"\b{name}\s*\[\s*[\"']|\*\*{name}\b|\b{name}\.(?:items|keys|values)\(", text):
        return f"{name} = {{k: v.to({dev}) for k, v in {name}.items()}}"
    if re.search(rf"\b{name}\s*\[\s*\d", text):
        return f"{name} = [t.to({dev}) for t in {name}]"
    return f"{name} = {name}.to({dev})"
