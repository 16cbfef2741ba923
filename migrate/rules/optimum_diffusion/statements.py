"""The lines a load adds around its statement: `.to("neuron")`, the `torch.compile` lines of the
denoiser (and ControlNet) and of `vae.decode`, the adapter loads and the tensor-parallel setup, written by the
statement hook since a call hook cannot add statements.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    code,
    on,
    wrap_long,
)
from migrate.rules.optimum_diffusion.adapters import _PIPE
from migrate.rules.optimum_diffusion.state import _Export, _Load, _state
from migrate.rules.optimum_diffusion.tensor_parallel import _tp_call_statement, _tp_setup
from migrate.rules.todo_catalogue import flatten

_COMPILE = 'backend="neuron", fullgraph=True, dynamic=False'


@on("SimpleStatementLine", "NM531", "NM533", "NM534")
def optimum_diffusion_statement(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """After `pipe = <pipeline load>`: the TP setup before it, adapters and compile lines after it; TP calls."""
    state = _state(ctx)
    load, state.pending = state.pending, None
    if load is not None:
        return _load_lines(node, load, ctx)
    if any(export.tp is not None for export in state.pipes.values()) and ctx.enabled("NM534"):
        return _tp_call_statement(node, ctx)
    return node


def _load_lines(node: cst.SimpleStatementLine, load: _Load, ctx: FileContext) -> HookResult:
    small = node.body[0] if len(node.body) == 1 else None
    if type(small) is not cst.Assign or len(small.targets) != 1 or code(small.value) != load.call:
        if ctx.enabled("NM531"):
            ctx.warn("NM531", "the pipeline is not assigned to a name: compile its denoiser and vae.decode by hand")
        return node
    pipe = code(small.targets[0].target)
    _state(ctx).pipes[pipe] = load.export
    before: list[str] = []
    after: list[str] = []
    if load.tp:
        assert type(small.value) is cst.Call
        before = _tp_setup(pipe, load, ctx)
        node = node.with_changes(
            body=[small.with_changes(value=wrap_long(add_kwarg(small.value, "transformer", f"{pipe}_transformer")))]
        )
        after.append(f"{pipe}.vae.to({pipe}_device)")
        ctx.hit("NM534")
    if load.adapter_lines:
        after += [line.replace(_PIPE, pipe) for line in load.adapter_lines]
        ctx.hit("NM533")
    if ctx.enabled("NM531"):
        after += _compile_lines(pipe, load.export, ctx)
    if not before and not after:
        return node
    setup = [cst.parse_statement(line) for line in before]
    if setup:  # the blank lines and comments above the load now stand above its setup
        setup[0] = setup[0].with_changes(leading_lines=node.leading_lines)
        node = node.with_changes(leading_lines=[])
    return flatten(ctx, [*setup, node, *(cst.parse_statement(line) for line in after)])


def _compile_lines(pipe: str, export: _Export, ctx: FileContext) -> list[str]:
    """The denoiser (UNet and ControlNet, PixArt's transformer, Flux's repeated blocks) and `vae.decode`."""
    torch = code(ctx.module_ref("torch"))
    if not export.denoiser:
        ctx.warn("NM531", f"{pipe}: a generic pipeline: compile its denoiser and vae.decode by hand")
        return []
    modules = {"unet": ["unet", "controlnet"] if export.controlnet else ["unet"], "transformer": ["transformer"]}
    lines = [f"{pipe}.{m} = {torch}.compile({pipe}.{m}, {_COMPILE})" for m in modules.get(export.denoiser, [])]
    if export.denoiser == "blocks":
        lines.append(f"{pipe}.transformer.compile_repeated_blocks({_COMPILE})")
    lines.append(f"{pipe}.vae.decode = {torch}.compile({pipe}.vae.decode, {_COMPILE})")
    return lines
