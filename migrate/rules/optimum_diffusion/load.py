"""NM531: `NeuronStableDiffusion*Pipeline.from_pretrained(id, export=True, ...)` becomes the diffusers class
of the same name loading the same checkpoint, its export and compiler arguments read (the shapes the later calls
need) and dropped, its dtype kept as a diffusers dtype; a load of an Optimum-compiled folder gets a TODO, since
diffusers cannot read it.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    code,
    has_star_kwargs,
    kwarg,
    remove_arg,
    string_value,
    wrap_long,
)
from migrate.rules.diffusers_common import dtype_keyword
from migrate.rules.legacy_names import swap
from migrate.rules.optimum_diffusion.adapters import _ADAPTERS, _adapter_lines, _model_kwargs
from migrate.rules.optimum_diffusion.state import _Export, _folder, _Load, _state
from migrate.rules.optimum_inference import inline_splats
from migrate.rules.optimum_inference.export import COMPILER_KWARGS
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM531",
        name="neuron-diffusion-pipelines",
        safety="unsafe",
        safety_reason="the pipeline runs in bf16 unless fp32 was asked for, compiled on first call instead of "
        "ahead of time",
        summary="`NeuronStableDiffusion*/NeuronStableDiffusionXL*/NeuronFlux*/NeuronPixArt*/NeuronLatentConsistency"
        'Model*Pipeline.from_pretrained(..., export=True, ...)` -> the diffusers pipeline on `"neuron"`, its '
        "denoiser and `vae.decode` compiled.",
        rationale="Optimum's pipelines are diffusers pipelines whose components were compiled by `export=True` "
        "(or loaded compiled from a folder); the class map is Optimum's own `auto_model_class`. Natively the "
        'diffusers class loads the checkpoint, `.to("neuron")` places it (Optimum\'s `.to()` did nothing), and '
        '`torch.compile(..., backend="neuron", fullgraph=True, dynamic=False)` compiles the UNet (a Flux '
        "transformer by its repeated blocks, PixArt's whole) and the bound `vae.decode`, which is what the "
        "pipeline calls. The export shapes, compiler arguments (`auto_cast`, `optlevel`, `inline_weights_to_neff`, "
        "...) are dropped, the shapes carried to the calls (NM532); the dtype is bf16 unless `auto_cast_type` "
        "asked for fp32. A pipeline the script saved (`save_pretrained(dir)` now writes diffusers weights) and "
        "loads again keeps the export's shapes; a compiled folder or Hub repo it did not export gets TODO NM915. "
        "`push_to_hub(dir, repository_id=...)` becomes `push_to_hub(repository_id)`.",
        before="import torch\nfrom optimum.neuron import NeuronStableDiffusionXLPipeline\n"
        "pipe = NeuronStableDiffusionXLPipeline.from_pretrained(model_id, export=True, batch_size=1, height=1024, "
        'width=1024, auto_cast="matmul", auto_cast_type="bf16")\n',
        after="import torch\nfrom diffusers import StableDiffusionXLPipeline\n"
        'pipe = StableDiffusionXLPipeline.from_pretrained(model_id, torch_dtype=torch.bfloat16).to("neuron")\n'
        'pipe.unet = torch.compile(pipe.unet, backend="neuron", fullgraph=True, dynamic=False)\n'
        'pipe.vae.decode = torch.compile(pipe.vae.decode, backend="neuron", fullgraph=True, dynamic=False)\n',
    ),
)

# Optimum class -> (diffusers class, denoiser): how the denoiser is compiled ("" for the base classes).
_PIPELINES: dict[str, tuple[str, str]] = {
    "NeuronDiffusionPipelineBase": ("DiffusionPipeline", ""),
    "NeuronStableDiffusionPipelineBase": ("DiffusionPipeline", ""),
    "NeuronStableDiffusionPipeline": ("StableDiffusionPipeline", "unet"),
    "NeuronStableDiffusionImg2ImgPipeline": ("StableDiffusionImg2ImgPipeline", "unet"),
    "NeuronStableDiffusionInpaintPipeline": ("StableDiffusionInpaintPipeline", "unet"),
    "NeuronStableDiffusionInstructPix2PixPipeline": ("StableDiffusionInstructPix2PixPipeline", "unet"),
    "NeuronStableDiffusionControlNetPipeline": ("StableDiffusionControlNetPipeline", "unet"),
    "NeuronLatentConsistencyModelPipeline": ("LatentConsistencyModelPipeline", "unet"),
    "NeuronStableDiffusionXLPipeline": ("StableDiffusionXLPipeline", "unet"),
    "NeuronStableDiffusionXLImg2ImgPipeline": ("StableDiffusionXLImg2ImgPipeline", "unet"),
    "NeuronStableDiffusionXLInpaintPipeline": ("StableDiffusionXLInpaintPipeline", "unet"),
    "NeuronStableDiffusionXLControlNetPipeline": ("StableDiffusionXLControlNetPipeline", "unet"),
    "NeuronPixArtAlphaPipeline": ("PixArtAlphaPipeline", "transformer"),
    "NeuronPixArtSigmaPipeline": ("PixArtSigmaPipeline", "transformer"),
    "NeuronFluxPipeline": ("FluxPipeline", "blocks"),
    "NeuronFluxKontextPipeline": ("FluxKontextPipeline", "blocks"),
    "NeuronFluxInpaintPipeline": ("FluxInpaintPipeline", "blocks"),
}
for _old, (_new, _denoiser) in _PIPELINES.items():
    swap(("optimum.neuron",), _old, "diffusers", _new, "NM531")

_SHAPES = ("batch_size", "height", "width", "num_images_per_prompt", "sequence_length")
_COMPILER = (
    *COMPILER_KWARGS,
    "output_hidden_states",
    "data_parallel_mode",
    "device_ids",
    "tensor_parallel_size",
    "num_channels",
)
_DROPPED = _COMPILER + _SHAPES
_FP32 = ("fp32", "f32", "float32")
_OLD_INSTANCES = ("inf1", "inf2", "trn1", "trn1n")
SAVED_FOLDER_TODO = (
    "if this folder is the one save_pretrained wrote above, it now holds diffusers weights and loads as is; a "
    "folder Optimum compiled elsewhere (model.neuron files) cannot be read: load the original model id instead"
)
FOLDER_TODO = (
    "this loads an Optimum-compiled pipeline (model.neuron files), which diffusers cannot read: load the original "
    "model id instead (the folder's unet/ or transformer/config.json names it) and pass the export height/width "
    "to each pipe(...) call"
)


def _load(node: cst.Call, name: str, ctx: FileContext) -> cst.BaseExpression:
    """`NeuronXPipeline.from_pretrained(...)`: read the export, rewrite the call; the statement hook adds lines."""
    state = _state(ctx)
    original = node
    if ctx.enabled("NM531") or ctx.enabled("NM533"):
        node = inline_splats(node, ctx, "NM531")
    export, fp32 = _read_export(node, name, ctx)
    model = argument(node, 0, "model_id")
    tp = export.tp is not None and ctx.enabled("NM534") and kwarg(node, "transformer") is None  # none given yet
    adapters: dict[str, cst.BaseExpression] = {}
    adapter_lines: list[str] = []
    if ctx.enabled("NM533"):
        adapters = {
            a.keyword.value: a.value for a in node.args if a.keyword is not None and a.keyword.value in _ADAPTERS
        }
        adapter_lines, mapped = _adapter_lines(adapters, tp, ctx)
        node = _without(node, mapped)
    if ctx.enabled("NM531"):
        node = _torch_dtype_object(node, ctx)
    dtype = _dtype(node, fp32, ctx)
    if ctx.enabled("NM531"):
        dropped = [a.keyword.value for a in node.args if a.keyword is not None and a.keyword.value in _DROPPED]
        node = _without(node, tuple(dropped))
        if dropped:
            ctx.warn("NM531", f"dropped export arguments {', '.join(dropped)}: TorchNeuron compiles on the first call")
        if kwarg(node, "torch_dtype") is None and kwarg(node, "dtype") is None and not has_star_kwargs(node):
            node = add_kwarg(node, dtype[0], dtype[1])
        ctx.hit("NM531")
    if ctx.enabled("NM533"):
        node = _model_kwargs(node, adapters, dtype, ctx)
    if node is not original:
        node = _wrap(node, name)
    result: cst.BaseExpression = node
    if ctx.enabled("NM531") and not tp:
        result = cst.Call(
            func=cst.Attribute(value=node, attr=cst.Name("to")), args=[cst.Arg(cst.SimpleString('"neuron"'))]
        )
    model_code = code(model.value) if model is not None else ""
    state.pending = _Load(export, code(result), model_code, dtype, adapter_lines, tp)
    return result


def _wrap(node: cst.Call, name: str) -> cst.Call:
    """One argument per line when the call is long once its class has the diffusers name (shorter by 6)."""
    assert type(node.func) is cst.Attribute
    renamed = node.with_changes(func=node.func.with_changes(value=cst.Name(_PIPELINES[name][0])))
    return wrap_long(node) if code(wrap_long(renamed)) != code(renamed) else node


def _read_export(node: cst.Call, name: str, ctx: FileContext) -> tuple[_Export, bool]:
    """The export's shapes, denoiser and TP degree, whether it asked for fp32; the TODOs it calls for."""
    export = _Export(
        denoiser=_PIPELINES[name][1], pixart=name.startswith("NeuronPixArt"), controlnet="ControlNet" in name
    )
    fp32 = exported = False
    for arg in node.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword in _SHAPES:
            export.shapes[keyword] = arg.value
        elif keyword == "tensor_parallel_size" and not (type(arg.value) is cst.Integer and arg.value.value == "1"):
            export.tp = arg.value
        elif keyword == "auto_cast_type":
            fp32 = fp32 or string_value(arg.value) in _FP32
        elif keyword == "auto_cast":
            fp32 = fp32 or string_value(arg.value) == "none"
        elif keyword == "export":
            exported = not (type(arg.value) is cst.Name and arg.value.value == "False")
        elif keyword == "instance_type" and (string_value(arg.value) or "") in _OLD_INSTANCES:
            todo(ctx, "NM913")
        elif keyword in ("data_parallel_mode", "device_ids") and string_value(arg.value) != "none":
            todo(ctx, "NM934")
    model = argument(node, 0, "model_id")
    if not exported:
        state = _state(ctx)
        saved = state.saved.get(_folder(model.value, ctx) or "") if model is not None else None
        if saved is not None:
            export.shapes = dict(saved.shapes)  # a folder this script saved: diffusers weights, the export's shapes
        elif state.saved_elsewhere is not None:
            export.shapes = dict(state.saved_elsewhere.shapes)
            todo(ctx, "NM915", SAVED_FOLDER_TODO)
        else:
            todo(ctx, "NM915", FOLDER_TODO)
    if export.tp is not None and export.denoiser != "blocks":
        todo(ctx, "NM919", "diffusers has no tensor-parallel plan for this transformer: it now runs whole on one core")
        export.tp = None
    elif export.tp is not None:
        todo(ctx, "NM917", TP_TODO.format(n=code(export.tp)))
    return export, fp32


TP_TODO = (
    "Optimum sharded this transformer over {n} NeuronCores: launch with torchrun --nproc_per_node {n} (one process "
    "per core; {n} must divide the transformer's attention heads); under plain python it runs whole on one core"
)


def _without(node: cst.Call, keywords: tuple[str, ...]) -> cst.Call:
    for keyword in keywords:
        arg = kwarg(node, keyword)
        if arg is not None:
            node = remove_arg(node, arg)
    return node


_DTYPE_NAMES = ("bfloat16", "float16", "float32")


def _torch_dtype_object(node: cst.Call, ctx: FileContext) -> cst.Call:
    """Optimum took `torch_dtype="bfloat16"`; diffusers falls back to fp32 for anything not a `torch.dtype`."""
    for name in ("torch_dtype", "dtype"):
        arg = kwarg(node, name)
        text = string_value(arg.value) if arg is not None else None
        if arg is not None and text in _DTYPE_NAMES:
            value = cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name(text))
            node = node.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in node.args])
    return node


def _dtype(node: cst.Call, fp32: bool, ctx: FileContext) -> tuple[str, str]:
    """(keyword, value) of the components' dtype: the call's own, else bf16 unless fp32 was asked for."""
    given = kwarg(node, "torch_dtype") or kwarg(node, "dtype")
    if given is not None:
        assert given.keyword is not None
        return given.keyword.value, code(given.value)
    torch = code(ctx.module_ref("torch"))
    return dtype_keyword(node, ctx), f"{torch}.float32" if fp32 else f"{torch}.bfloat16"
