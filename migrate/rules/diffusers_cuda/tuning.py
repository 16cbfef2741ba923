"""NM132: CUDA tuning (cuDNN benchmark, TF32, inductor flags, `channels_last` memory formats) goes,
since none of it means anything to the Neuron compiler and `channels_last` only adds layout copies there.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    code,
    kwarg,
    method_of,
    on,
    remove_arg,
)
from migrate.rules.diffusers_common import is_diffusers_file
from migrate.rules.removal import Removal, removable

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM132",
        name="cuda-tuning-flags",
        safety="safe",
        summary="In diffusers scripts, TF32/cuDNN/inductor settings and `channels_last` conversions are removed.",
        rationale="`torch.backends.cuda.matmul.allow_tf32`, `torch.backends.cudnn.allow_tf32`/`benchmark` and "
        "`torch._inductor.config.*` tune CUDA kernels and inductor, which the Neuron backend does not use; "
        "`.to(memory_format=torch.channels_last)` is a cuDNN layout hint with no known Neuron benefit. They "
        "are no-ops on Neuron (measured), so deleting them keeps behaviour and leaves no CUDA tuning in a "
        "ported pipeline script; an `if args.allow_tf32:` they leave empty goes too. Other scripts keep them "
        "(NM206 leaves harmless backend flags alone), so their diffs stay small.",
        before="import torch\nfrom diffusers import DiffusionPipeline\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\ntorch._inductor.config.conv_1x1_as_mm = True\n"
        "pipe.unet.to(memory_format=torch.channels_last)\npipe.to(device)\n",
        after="import torch\nfrom diffusers import DiffusionPipeline\npipe.to(device)\n",
    ),
)


_CUDA_FLAGS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cudnn.allow_tf32",
    "torch.backends.cudnn.benchmark",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
)


def _is_channels_last(arg: cst.Arg | None, ctx: FileContext) -> bool:
    return arg is not None and ctx.qualify(arg.value) in ("torch.channels_last", "torch.channels_last_3d")


def _only_channels_last(call: cst.Call, ctx: FileContext) -> bool:
    """`x.to(memory_format=torch.channels_last)`: the call does nothing else."""
    return method_of(call, "to") and len(call.args) == 1 and _is_channels_last(kwarg(call, "memory_format"), ctx)


def _drop_channels_last(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`x.to(device, memory_format=torch.channels_last)` -> `x.to(device)`; a `.to` doing only that is a statement's."""
    memory_format = kwarg(node, "memory_format")
    if not _is_channels_last(memory_format, ctx) or _only_channels_last(node, ctx):
        return node
    assert memory_format is not None
    ctx.hit("NM132")
    return remove_arg(node, memory_format)


@on("Assign", "NM132")
def channels_last_assignment(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM132: `y = x.to(memory_format=torch.channels_last)` -> `y = x`; `x = x.to(...)` goes as a statement."""
    value = node.value
    if type(value) is not cst.Call or not _only_channels_last(value, ctx) or not ctx.enabled("NM132"):
        return node
    if not is_diffusers_file(ctx):
        return node
    assert type(value.func) is cst.Attribute
    receiver = value.func.value
    if len(node.targets) == 1 and code(node.targets[0].target) == code(receiver):
        return node  # `x = x.to(memory_format=...)`: the statement goes as a whole (below)
    ctx.hit("NM132")
    return node.with_changes(value=receiver)


@removable
def cuda_tuning_statement(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """NM132: a statement that only sets a CUDA/inductor tuning flag or converts a module to `channels_last`."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1 or not is_diffusers_file(ctx):
        return None
    small = stmt.body[0]
    if type(small) is cst.Assign and len(small.targets) == 1:
        target = ctx.qualify(small.targets[0].target) or ""
        value = small.value
        if target in _CUDA_FLAGS or target.startswith("torch._inductor.config."):
            return Removal("NM132")
        if type(value) is cst.Call and _only_channels_last(value, ctx) and type(value.func) is cst.Attribute:
            return Removal("NM132") if code(small.targets[0].target) == code(value.func.value) else None
    if type(small) is cst.Expr and type(small.value) is cst.Call and _only_channels_last(small.value, ctx):
        return Removal("NM132")
    return None
