"""The call hook: a diffusers call is handed to the module that rewrites it (generators, attention
backends, regional compile, offload streams, `channels_last`), and sequential offload and quantization backends
get their TODOs (NM931, NM933).
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    argument,
    callee_name,
    kwarg,
    method_of,
    on,
)
from migrate.rules.diffusers_common import is_diffusers_file
from migrate.rules.diffusers_cuda.attention import _native_backend
from migrate.rules.diffusers_cuda.compile import _no_streams, _regional_compile
from migrate.rules.diffusers_cuda.generators import _cpu_generator, _is_generator, _state
from migrate.rules.diffusers_cuda.tuning import _drop_channels_last
from migrate.rules.todo_catalogue import todo


@on("Call", "NM131", "NM132", "NM133", "NM231", "NM331", "NM931", "NM933")
def diffusers_cuda_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """NM131 generators, NM231 attention backends, NM331 regional compile, NM133 offload streams, TODOs."""
    if _is_generator(node, ctx):
        if not ctx.enabled("NM131") or _state(ctx).device_draws:
            return node  # a file whose generators also feed device draws: decided per assignment below
        new = _cpu_generator(node, ctx)
        if new is None:
            return node
        ctx.hit("NM131")
        return new
    if not is_diffusers_file(ctx):
        return node
    name = callee_name(node)
    if name in ("set_attention_backend", "attention_backend") and ctx.enabled("NM231"):
        if name == "attention_backend" and (ctx.qualify(node.func) or "diffusers.").split(".")[0] != "diffusers":
            return node
        return _native_backend(node, argument(node, 0, "backend"), ctx)
    if name == "compile_repeated_blocks" and method_of(node, name) and ctx.enabled("NM331"):
        return _regional_compile(node, ctx)
    if name in ("enable_group_offload", "apply_group_offloading") and ctx.enabled("NM133"):
        return _no_streams(node, ctx)
    if name == "enable_sequential_cpu_offload" and method_of(node, name):
        todo(ctx, "NM931")
    elif name in _QUANTIZERS or (name == "from_single_file" and kwarg(node, "quantization_config") is not None):
        todo(ctx, "NM933")
    if ctx.enabled("NM132"):
        return _drop_channels_last(node, ctx)
    return node


_QUANTIZERS = ("PipelineQuantizationConfig", "QuantoConfig", "GGUFQuantizationConfig", "NunchakuConfig")
