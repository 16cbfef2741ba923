"""NM102 through a variable: a name the file passes in a device position (`loc`, `self.target`),
whatever it is called, has its CUDA value rewritten where it is assigned, so `.to(device)` uses stay as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    last_name,
    on,
)
from migrate.rules.device.literals import _DEVICE_NAMES, device_literal
from migrate.rules.device.values import _cpu_location
from migrate.rules.settings import through

# Device positions that take a variable: `map_location=loc`, `device=dev`, `.to(loc)`, `torch.device(loc)`.
_MAP_LOCATION_USE = re.compile(r"\bmap_location\s*=\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*[,)]")
_DEVICE_USE = re.compile(r"(?:\bdevice\s*=\s*|\.to\(\s*|\bdevice\(\s*)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*[,)]")


@dataclass
class _DeviceVariables:
    """Names the file passes in device positions, whatever they are called (`loc`, `self.target`)."""

    devices: frozenset[str]  # used as a device somewhere
    map_only: frozenset[str]  # used only as `map_location=`


def _device_variables(ctx: FileContext) -> _DeviceVariables:
    found = ctx.family_state.get("device-variables")
    if found is None:
        devices = frozenset(_DEVICE_USE.findall(ctx.text))
        found = _DeviceVariables(devices, frozenset(_MAP_LOCATION_USE.findall(ctx.text)) - devices)
        ctx.family_state["device-variables"] = found
    return found


def _plain_name(node: cst.BaseExpression) -> str | None:
    """`x` or `x.y` exactly as written (no parentheses or spaces), else None: the only shapes `_DEVICE_USE` and
    `_MAP_LOCATION_USE` capture, read off the node instead of rendering it (this runs on every assignment)."""
    if type(node) is cst.Name:
        return None if node.lpar else node.value
    if type(node) is cst.Attribute and type(node.value) is cst.Name and not node.lpar and not node.value.lpar:
        dot = node.dot
        if type(dot.whitespace_before) is cst.SimpleWhitespace and type(dot.whitespace_after) is cst.SimpleWhitespace:
            if not dot.whitespace_before.value and not dot.whitespace_after.value:
                return f"{node.value.value}.{node.attr.value}"
    return None


@on("Assign", "NM102")
def device_variable(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM102 through a variable: `loc = f"cuda:{self.gpu_id}"` later passed as `map_location=loc`.

    Names that read like devices are settings (above); any other name is followed to where the
    file uses it. A value used only to load checkpoints becomes `"cpu"` (as `map_location` literals
    do); one used as a device becomes the NeuronCore.
    """
    if len(node.targets) != 1 or not ctx.enabled("NM102"):
        return node
    if not isinstance(node.value, (cst.SimpleString, cst.FormattedString, cst.Call, cst.IfExp)):
        return node
    target = node.targets[0].target
    name = _plain_name(target)
    if name is None or re.fullmatch(_DEVICE_NAMES, last_name(target) or ""):
        return node
    variables = _device_variables(ctx)
    if name in variables.devices:
        new = through(device_literal)(node.value, ctx)
    elif name in variables.map_only:
        new = _cpu_location(node.value, ctx)
    else:
        return node
    if new is None:
        return node
    ctx.hit("NM102")
    return node.with_changes(value=new)
