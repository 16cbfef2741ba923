"""NM103: `x.device.type == "cuda"` (and `!=`) compares with `"neuron"`, so the branch a script
took on a GPU is the one it takes on a NeuronCore.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    on,
    string_value,
    with_string_value,
)
from migrate.rules.device.literals import is_device_side, neuron_text

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM103",
        name="device-comparison",
        safety="safe",
        summary='Comparisons of device values with `"cuda"` follow the renamed value.',
        rationale='Context rule 3: once `device = "cuda"` becomes `"neuron"`, `if device == "cuda"` '
        "would silently flip (nanoGPT turns autocast off, FastChat raises `Invalid device`). "
        "Comparisons whose other side is a device-named value or `<x>.type`/`<x>.device.type` "
        'are renamed consistently, including `"cuda" in device`. A test that guards CUDA-only code (events, '
        '`memory_summary`) keeps its CUDA test with NM903\'s TODO, directly (`if device.type == "cuda":`) or '
        'through a flag (`use_cuda = device.type == "cuda"` then `if use_cuda:`): renamed, Neuron would take the '
        "CUDA branch and fail where the original took its other one.",
        before='if device == "cuda":\n    dtype = "bfloat16"\npin = "cuda" in device\n',
        after='if device == "neuron":\n    dtype = "bfloat16"\npin = "neuron" in device\n',
    ),
)


@on("Comparison", "NM103")
def device_comparison(node: cst.Comparison, ctx: FileContext) -> cst.Comparison:
    """NM103: `device == "cuda"`, `"cuda" in device`, `x.device.type != "cuda"`."""
    if not ctx.enabled("NM103") or len(node.comparisons) != 1:
        return node
    target = node.comparisons[0]
    left, right = node.left, target.comparator
    membership = isinstance(target.operator, (cst.In, cst.NotIn))
    if not membership and not isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        return node
    # `device == "cuda"` renames the right side; `"cuda" in device` / `"cuda" == device` the left.
    if not membership and type(right) is cst.SimpleString and is_device_side(left):
        new = neuron_text(string_value(right) or "")
        if new is not None:
            ctx.hit("NM103")
            return node.with_changes(comparisons=[target.with_changes(comparator=with_string_value(right, new))])
    if type(left) is cst.SimpleString and is_device_side(right):
        new = neuron_text(string_value(left) or "")
        if new is not None:
            ctx.hit("NM103")
            return node.with_changes(left=with_string_value(left, new))
    return node
