"""NM331, NM332, NM133: `compile_repeated_blocks` gets the Neuron backend (its CUDA modes go),
`pipe.vae = torch.compile(pipe.vae)` (which compiles nothing: pipelines call `vae.decode`) becomes the decode form,
and group offloading stops asking for CUDA streams.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    code,
    kwarg,
    last_name,
    on,
    remove_arg,
    replace_arg,
    string_value,
)
from migrate.rules.diffusers_common import is_diffusers_file

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM133",
        name="group-offload-stream",
        safety="unsafe",
        safety_reason="weights no longer stream in while the previous group computes: an offloaded run is slower",
        summary="Group offloading's `use_stream=True`/`record_stream=True` -> `False`.",
        rationale="`enable_group_offload(..., use_stream=True)` and `apply_group_offloading` prefetch the next "
        "group on a device stream and raise `ValueError` where the accelerator has no stream API; TorchNeuron "
        "documents no `torch.neuron.Stream`. Without the stream the groups are moved in turn, which works; "
        "`record_stream` only means something with a stream.",
        before="from diffusers import DiffusionPipeline\n"
        'pipe.transformer.enable_group_offload(onload_device=device, offload_type="leaf_level", use_stream=True)\n',
        after="from diffusers import DiffusionPipeline\n"
        'pipe.transformer.enable_group_offload(onload_device=device, offload_type="leaf_level", use_stream=False)\n',
    ),
    Rule(
        id="NM331",
        name="compile-repeated-blocks",
        safety="unsafe",
        safety_reason="with `fullgraph=True` a graph break inside a block raises instead of splitting the block",
        summary='`compile_repeated_blocks(...)` -> `compile_repeated_blocks(backend="neuron", fullgraph=True, '
        "dynamic=False)`; CUDA modes dropped.",
        rationale="Regional compilation compiles each repeated block (Flux, QwenImage, Wan transformer blocks; "
        "the UNet's `BasicTransformerBlock`) once and reuses it. On Neuron a graph is about a minute to "
        "compile, so a block must be one static graph: the Neuron backend, no dynamic shapes, and no "
        "silent graph breaks (the form AWS and diffusers document for TorchNeuron). `reduce-overhead` and "
        "`max-autotune` are CUDA graphs and Triton.",
        before='from diffusers import FluxPipeline\npipe.transformer.compile_repeated_blocks(mode="max-autotune")\n',
        after="from diffusers import FluxPipeline\n"
        'pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)\n',
    ),
    Rule(
        id="NM332",
        name="vae-decode-compile",
        safety="safe",
        summary="`pipe.vae = torch.compile(pipe.vae, ...)` -> `pipe.vae.decode = torch.compile(pipe.vae.decode, ...)`.",
        rationale="Pipelines call `vae.decode`, and a compiled module's `decode` is the original method "
        "(`OptimizedModule` forwards attribute reads to the module): the assignment compiles nothing "
        "(measured: 0 decode graphs). Compiling the bound `decode` gives the one decode graph per image "
        "size the compile was meant to give.",
        before="import torch\nfrom diffusers import DiffusionPipeline\n"
        'pipe.vae = torch.compile(pipe.vae, backend="neuron", dynamic=False)\n',
        after="import torch\nfrom diffusers import DiffusionPipeline\n"
        'pipe.vae.decode = torch.compile(pipe.vae.decode, backend="neuron", dynamic=False)\n',
    ),
)


# ---- NM331 regional compile, NM133 offload streams ----------------------------------------------

_CUDA_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _regional_compile(node: cst.Call, ctx: FileContext) -> cst.Call:
    if kwarg(node, "backend") is not None or any(arg.star for arg in node.args):
        return node
    mode = kwarg(node, "mode")
    if mode is not None and string_value(mode.value) in _CUDA_MODES:
        node = remove_arg(node, mode)
    node = add_kwarg(node, "backend", '"neuron"')
    for name in ("fullgraph", "dynamic"):
        if kwarg(node, name) is None:
            node = add_kwarg(node, name, "True" if name == "fullgraph" else "False")
    ctx.hit("NM331")
    return node


def _no_streams(node: cst.Call, ctx: FileContext) -> cst.Call:
    for name in ("use_stream", "record_stream"):
        arg = kwarg(node, name)
        if arg is not None and type(arg.value) is cst.Name and arg.value.value == "True":
            node = replace_arg(node, arg, arg.with_changes(value=cst.Name("False")))
            ctx.hit("NM133")
    return node


# ---- NM332 VAE decode compile ----------------------------------------------------------------


@on("Assign", "NM332")
def vae_compile(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM332: `pipe.vae = torch.compile(pipe.vae, ...)` -> `pipe.vae.decode = torch.compile(pipe.vae.decode, ...)`."""
    if len(node.targets) != 1 or type(node.value) is not cst.Call or not ctx.enabled("NM332"):
        return node
    target = node.targets[0].target
    call = node.value
    if type(target) not in (cst.Name, cst.Attribute) or "vae" not in (last_name(target) or "").lower():
        return node
    if ctx.qualify(call.func) != "torch.compile" or not is_diffusers_file(ctx):
        return node
    module = argument(call, 0, "model")
    if module is None or code(module.value) != code(target):
        return node
    decode = cst.Attribute(value=module.value, attr=cst.Name("decode"))
    ctx.hit("NM332")
    return node.with_changes(
        targets=[node.targets[0].with_changes(target=cst.Attribute(value=target, attr=cst.Name("decode")))],
        value=replace_arg(call, module, module.with_changes(value=decode)),
    )
