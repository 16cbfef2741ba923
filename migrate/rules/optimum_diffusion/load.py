"""NM531-NM534 Optimum Neuron diffusion pipelines -> diffusers pipelines compiled on the neuron device.

docs/rules.md (NM531-NM534); the upstream facts: docs/gaps.md, "Facts the codemod's diffusers rules rely on".
Optimum compiled every component of a pipeline ahead of time for fixed shapes
(`NeuronStableDiffusionXLPipeline.from_pretrained(id, export=True, batch_size=, height=, width=, ...)`) and its
`__call__` silently replaces the caller's height and width by the compiled ones. Natively the diffusers class
of the same name (Optimum's own `auto_model_class`) loads the same checkpoint onto the NeuronCore and
`torch.compile` compiles the denoiser and `vae.decode` on the first call, for the shapes that call has:

- the load loses its export and compiler arguments, gains a dtype and `.to("neuron")`, and is followed by
  the compile lines (the UNet or transformer, its ControlNet, the decode);
- every later `pipe(...)` call gets the export `height`/`width` (and `num_images_per_prompt`, PixArt's
  `max_sequence_length`), so the native pipeline makes the images Optimum made and keeps one graph;
- LoRA, IP-adapter, ControlNet and `unet_id` arguments become the diffusers calls that load them;
- `tensor_parallel_size=T` (Flux) becomes diffusers' tensor parallelism, one process per core under
  `torchrun --nproc_per_node T`, text encoders on the CPU and the same noise on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    code,
    family_state,
    has_star_kwargs,
    kwarg,
    on,
    positional_args,
    remove_arg,
    string_value,
    wrap_long,
)
from migrate.rules.diffusers_common import dtype_keyword
from migrate.rules.legacy_names import resolve, swap
from migrate.rules.optimum_inference import inline_splats
from migrate.rules.todo_catalogue import flatten, todo

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
    Rule(
        id="NM532",
        name="diffusion-export-shapes",
        safety="safe",
        summary="Calls of a migrated pipeline get the export `height`/`width` (and `num_images_per_prompt`, "
        "PixArt's `max_sequence_length`).",
        rationale="Optimum's `__call__` overwrote the caller's height and width with the compiled ones (and PixArt's "
        "`max_sequence_length` with the compiled sequence length); a native pipeline would use its default "
        "size instead (the model's `sample_size` x the VAE scale). Passing the export values keeps the images "
        "the script made and one denoiser and one decode graph. A value the call gives itself is kept, with a note.",
        before="from optimum.neuron import NeuronStableDiffusionPipeline\n"
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(model_id, export=True, height=512, width=512)\n"
        "image = pipe(prompt).images[0]\n",
        after="from optimum.neuron import NeuronStableDiffusionPipeline\n"
        "pipe = NeuronStableDiffusionPipeline.from_pretrained(model_id, export=True, height=512, width=512)\n"
        "image = pipe(prompt, height=512, width=512).images[0]\n",
    ),
    Rule(
        id="NM533",
        name="diffusion-adapters",
        safety="safe",
        summary="`lora_*`, `ip_adapter_*`, `controlnet_ids`, `unet_id` export arguments -> the diffusers calls "
        "that load them.",
        rationale="Optimum fused these into the compiled components at export. Natively `controlnet_ids` and "
        "`unet_id` are models passed to the pipeline (`controlnet=ControlNetModel.from_pretrained(id)`, "
        "`unet=UNet2DConditionModel.from_pretrained(id)`), LoRA weights are loaded with "
        "`load_lora_weights(id, weight_name=, adapter_name=)` and weighted with `set_adapters`, IP-adapters with "
        "`load_ip_adapter` and `set_ip_adapter_scale`, all before the compile lines so the compiled graphs "
        "include them. A ControlNet id held in a variable is taken as one id; LoRA ids held in a variable, "
        "lists of unequal length and LoRA on a sharded transformer get TODO NM919.",
        before="import torch\nfrom optimum.neuron import NeuronStableDiffusionXLPipeline\n"
        "pipe = NeuronStableDiffusionXLPipeline.from_pretrained(\n    model_id,\n    export=True,\n"
        '    lora_model_ids="org/lora",\n    lora_weight_names="lora.safetensors",\n'
        '    lora_adapter_names="style",\n    lora_scales=0.8,\n)\n',
        after="import torch\nfrom optimum.neuron import NeuronStableDiffusionXLPipeline\n"
        "pipe = NeuronStableDiffusionXLPipeline.from_pretrained(\n    model_id,\n    export=True,\n)\n"
        'pipe.load_lora_weights("org/lora", weight_name="lora.safetensors", adapter_name="style")\n'
        'pipe.set_adapters(["style"], adapter_weights=[0.8])\n',
    ),
    Rule(
        id="NM534",
        name="diffusion-tensor-parallel",
        safety="unsafe",
        safety_reason="calls without a generator get a CPU generator seeded with 0 (every rank must draw the same noise)",
        summary="Flux `tensor_parallel_size=T` -> diffusers' `TensorParallelConfig` over the processes of "
        "`torchrun --nproc_per_node T`, text encoders on the CPU.",
        rationale="Optimum sharded the Flux transformer over T NeuronCores in one process. diffusers shards a "
        "transformer with a tensor-parallel plan (Flux has one) while it loads, given "
        '`parallel_config=TensorParallelConfig(mesh=DeviceMesh("neuron", ranks))` in a `neuron` process group; each '
        "rank is one process. The pattern AWS and diffusers document: the transformer sharded, the VAE on "
        'the rank\'s core, the text encoders on the CPU (`encode_prompt(..., device="cpu")`, the embeddings moved to '
        "the core) and a CPU generator, so every rank draws the same initial latents. Under plain `python` the "
        "same code loads the transformer whole onto one core. T must divide the transformer's 24 heads; LoRA "
        "cannot be injected into a sharded transformer (fuse it first).",
        before="import torch\nfrom optimum.neuron import NeuronFluxPipeline\n"
        "pipe = NeuronFluxPipeline.from_pretrained(model_id, export=True, tensor_parallel_size=8)\n"
        "image = pipe(prompt, num_inference_steps=4).images[0]\n",
        after="import os\nimport torch\nfrom diffusers import FluxTransformer2DModel, TensorParallelConfig\n"
        "from torch.distributed.device_mesh import DeviceMesh\nfrom optimum.neuron import NeuronFluxPipeline\n"
        'if int(os.environ.get("WORLD_SIZE", "1")) > 1:\n'
        '    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]) % torch.neuron.device_count())\n'
        '    torch.distributed.init_process_group("neuron")\n'
        'pipe_device = "neuron"\n'
        "pipe_transformer = FluxTransformer2DModel.from_pretrained(\n    model_id,\n"
        '    subfolder="transformer",\n    torch_dtype=torch.bfloat16,\n    parallel_config=(\n'
        '        TensorParallelConfig(mesh=DeviceMesh("neuron", list(range(torch.distributed.get_world_size()))))\n'
        "        if torch.distributed.is_initialized()\n        else None\n    ),\n)\n"
        "if not torch.distributed.is_initialized():\n    pipe_transformer.to(pipe_device)\n"
        "pipe = NeuronFluxPipeline.from_pretrained(\n    model_id,\n    export=True,\n    tensor_parallel_size=8,\n"
        "    transformer=pipe_transformer,\n)\n"
        "pipe.vae.to(pipe_device)\n"
        'pipe_prompt_embeds, pipe_pooled_prompt_embeds, _ = pipe.encode_prompt(prompt=prompt, prompt_2=None, device="cpu")\n'
        "image = pipe(\n    num_inference_steps=4,\n    prompt_embeds=pipe_prompt_embeds.to(pipe_device),\n"
        "    pooled_prompt_embeds=pipe_pooled_prompt_embeds.to(pipe_device),\n"
        '    generator=torch.Generator("cpu").manual_seed(0),\n).images[0]\n',
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
    "export",
    "auto_cast",
    "auto_cast_type",
    "dynamic_batch_size",
    "inline_weights_to_neff",
    "optlevel",
    "instance_type",
    "disable_neuron_cache",
    "compiler_workdir",
    "output_hidden_states",
    "data_parallel_mode",
    "device_ids",
    "tensor_parallel_size",
    "num_channels",
)
_LORA = ("lora_model_ids", "lora_weight_names", "lora_adapter_names", "lora_scales")
_IP_ADAPTER = ("ip_adapter_ids", "ip_adapter_subfolders", "ip_adapter_weight_names", "ip_adapter_scales")
_MODELS = ("controlnet_ids", "unet_id")
_ADAPTERS = _LORA + _IP_ADAPTER + _MODELS
_DROPPED = _COMPILER + _SHAPES
_FP32 = ("fp32", "f32", "float32")
_OLD_INSTANCES = ("inf1", "inf2", "trn1", "trn1n")
_COMPILE = 'backend="neuron", fullgraph=True, dynamic=False'
SAVED_FOLDER_TODO = (
    "if this folder is the one save_pretrained wrote above, it now holds diffusers weights and loads as is; a "
    "folder Optimum compiled elsewhere (model.neuron files) cannot be read: load the original model id instead"
)
FOLDER_TODO = (
    "this loads an Optimum-compiled pipeline (model.neuron files), which diffusers cannot read: load the original "
    "model id instead (the folder's unet/ or transformer/config.json names it) and pass the export height/width "
    "to each pipe(...) call"
)


@dataclass
class _Export:
    """What the export fixed: shapes, denoiser kind, tensor-parallel degree."""

    shapes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    denoiser: str = ""
    tp: cst.BaseExpression | None = None
    pixart: bool = False  # PixArt's calls also take the export sequence length
    controlnet: bool = False  # a ControlNet pipeline: its ControlNet runs every step and is compiled too


@dataclass
class _Load:
    """A pipeline load seen in the current statement, waiting for the statement hook to add its lines."""

    export: _Export
    call: str  # the rewritten call's source, to find it in the statement
    model: str  # the model id expression
    dtype: tuple[str, str]  # (keyword, value source) the components load with
    adapter_lines: list[str]  # NM533's loads after the pipeline's, `_PIPE` standing for its name
    tp: bool  # NM534 shards the transformer: the setup lines go before the load


@dataclass
class _State:
    pending: _Load | None = None
    pipes: dict[str, _Export] = field(default_factory=dict)  # pipeline variable -> its export
    saved: dict[str, _Export] = field(default_factory=dict)  # folder a pipeline was saved to -> its export
    saved_elsewhere: _Export | None = None  # a pipeline saved to a folder only known at run time
    factories: dict[str, _Export] = field(default_factory=dict)  # function returning a migrated pipeline -> its export
    strings: dict[str, str] = field(default_factory=dict)  # `name = "literal"` bindings, for folder names


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "optimum-diffusion", _State)


def _pipeline_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The Optimum diffusion class `node` names (resolved by import path), or None."""
    qualified = ctx.qualify(node)
    found = resolve(qualified)
    if found is None or found.rule_id != "NM531":
        return None
    return qualified.rpartition(".")[2]  # type: ignore[union-attr]


def _folder(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The folder a path expression names: a string literal or a name bound to one."""
    text = string_value(node)
    if text is None and type(node) is cst.Name:
        text = _state(ctx).strings.get(node.value)
    return text


# ---- the load ---------------------------------------------------------------------------------


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


def _items(value: cst.BaseExpression | None) -> list[cst.BaseExpression] | None:
    """The elements of a list/tuple literal, `[value]` for any other expression, None for no value."""
    if value is None:
        return None
    if isinstance(value, cst.List | cst.Tuple):
        return [element.value for element in value.elements]
    return [value]


def _model_kwargs(
    node: cst.Call, adapters: dict[str, cst.BaseExpression], dtype: tuple[str, str], ctx: FileContext
) -> cst.Call:
    """NM533 `controlnet_ids=` / `unet_id=` -> `controlnet=ControlNetModel.from_pretrained(...)` / `unet=...`."""
    keyword, value = dtype
    for option, name, cls in (
        ("controlnet_ids", "controlnet", "ControlNetModel"),
        ("unet_id", "unet", "UNet2DConditionModel"),
    ):
        ids = adapters.get(option)
        items = _items(ids)
        if ids is None or items is None:
            continue
        local = ctx.name_ref("diffusers", cls)
        loads = [f"{local}.from_pretrained({code(item)}, {keyword}={value})" for item in items]
        node = add_kwarg(node, name, f"[{', '.join(loads)}]" if isinstance(ids, cst.List | cst.Tuple) else loads[0])
        ctx.hit("NM533")
    return node


# ---- the lines after the load -------------------------------------------------------------------


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


def _tp_setup(pipe: str, load: _Load, ctx: FileContext) -> list[str]:
    """The process group, this rank's core and the sharded transformer (docs/rules.md NM534)."""
    os_name = code(ctx.module_ref("os"))
    dist = code(ctx.module_ref("torch.distributed"))
    transformer = ctx.name_ref("diffusers", "FluxTransformer2DModel")
    config = ctx.name_ref("diffusers", "TensorParallelConfig")
    mesh = ctx.name_ref("torch.distributed.device_mesh", "DeviceMesh")
    neuron = code(ctx.module_ref("torch.neuron"))
    keyword, dtype = load.dtype
    # the rank's core is the index-less "neuron" once set_device picked it, right under either reading of
    # per-rank visibility (#23 item 8, NM106): index 0 where a rank sees only its cores, LOCAL_RANK where all
    return [
        f'if int({os_name}.environ.get("WORLD_SIZE", "1")) > 1:\n'
        f'    {neuron}.set_device(int({os_name}.environ["LOCAL_RANK"]) % {neuron}.device_count())\n'
        f'    {dist}.init_process_group("neuron")\n',
        f'{pipe}_device = "neuron"\n',
        f"{pipe}_transformer = {transformer}.from_pretrained(\n    {load.model},\n"
        f'    subfolder="transformer",\n    {keyword}={dtype},\n    parallel_config=(\n'
        f'        {config}(mesh={mesh}("neuron", list(range({dist}.get_world_size()))))\n'
        f"        if {dist}.is_initialized()\n        else None\n    ),\n)\n",
        f"if not {dist}.is_initialized():\n    {pipe}_transformer.to({pipe}_device)\n",
    ]


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


def _adapter_lines(
    adapters: dict[str, cst.BaseExpression], tp: bool, ctx: FileContext
) -> tuple[list[str], tuple[str, ...]]:
    """NM533: LoRA and IP-adapter loads, in the order Optimum applied them (before compiling), and the
    export arguments they replace. Arguments that cannot be mapped stay in the call beside their TODO."""
    pipe = _PIPE
    lines: list[str] = []
    mapped: list[str] = [name for name in _MODELS if name in adapters]
    ids = _items(adapters.get("lora_model_ids"))
    if ids is not None and tp:
        todo(
            ctx,
            "NM919",
            "LoRA cannot be loaded into a sharded transformer: fuse it (pipe.fuse_lora()) in an unsharded run and load the fused weights",
        )
    elif ids is not None:
        weights, names, scales = (_items(adapters.get(k)) for k in _LORA[1:])
        listed = isinstance(adapters["lora_model_ids"], cst.List | cst.Tuple | cst.SimpleString)
        if not listed or any(v is not None and len(v) != len(ids) for v in (weights, names, scales)):
            todo(
                ctx,
                "NM919",
                "map lora_model_ids/lora_weight_names/lora_adapter_names/lora_scales to pipe.load_lora_weights(...) and pipe.set_adapters(...) by hand",
            )
        else:
            if scales is not None and names is None:
                names = [cst.SimpleString(f'"lora_{i}"') for i in range(len(ids))]
            for i, lora in enumerate(ids):
                extra = "".join(
                    f", {keyword}={code(values[i])}"
                    for keyword, values in (("weight_name", weights), ("adapter_name", names))
                    if values is not None
                )
                lines.append(f"{pipe}.load_lora_weights({code(lora)}{extra})")
            if scales is not None and names is not None:
                lines.append(
                    f"{pipe}.set_adapters([{', '.join(code(n) for n in names)}], "
                    f"adapter_weights=[{', '.join(code(s) for s in scales)}])"
                )
            mapped += [name for name in _LORA if name in adapters]
    ip = adapters.get("ip_adapter_ids")
    if ip is not None:
        subfolder, weight_name = adapters.get("ip_adapter_subfolders"), adapters.get("ip_adapter_weight_names")
        if subfolder is None or weight_name is None:
            todo(
                ctx,
                "NM919",
                "pipe.load_ip_adapter(...) needs the subfolder and weight_name of each IP-adapter: add them",
            )
        else:
            lines.append(
                f"{pipe}.load_ip_adapter({code(ip)}, subfolder={code(subfolder)}, weight_name={code(weight_name)})"
            )
            scale = adapters.get("ip_adapter_scales")
            if scale is not None:
                lines.append(f"{pipe}.set_ip_adapter_scale({code(scale)})")
            mapped += [name for name in _IP_ADAPTER if name in adapters]
    return lines, tuple(mapped)


_PIPE = "\x00pipe\x00"  # the pipeline's name in adapter lines written before the statement names it


# ---- calls of a migrated pipeline -----------------------------------------------------------------


@on("Call", "NM531", "NM532", "NM533", "NM534", "NM913", "NM915", "NM917", "NM919", "NM934")
def optimum_diffusion_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """Loads (NM531-NM534), `save_pretrained`/`push_to_hub` of a migrated pipeline, its calls (NM532)."""
    func = node.func
    if type(func) is cst.Attribute:
        if func.attr.value == "from_pretrained":
            name = _pipeline_class(func.value, ctx)
            if name is not None:
                return _load(node, name, ctx)
            return node
        pipes = _state(ctx).pipes
        export = pipes.get(code(func.value)) if pipes else None
        if export is None:
            return node
        if func.attr.value == "save_pretrained":
            folder = argument(node, 0, "save_directory")
            text = _folder(folder.value, ctx) if folder is not None else None
            if text is not None:
                _state(ctx).saved[text] = export
            else:
                _state(ctx).saved_elsewhere = export
        elif func.attr.value == "push_to_hub" and ctx.enabled("NM531"):
            return _push_to_hub(node, ctx)
        return node
    pipes = _state(ctx).pipes
    export = pipes.get(code(func)) if pipes else None
    if export is None or (export.tp is not None and ctx.enabled("NM534")) or not ctx.enabled("NM532"):
        return node
    return _with_shapes(node, export, ctx)


def _shape_values(export: _Export) -> dict[str, cst.BaseExpression]:
    """The call arguments that carry the export's shapes."""
    values: dict[str, cst.BaseExpression] = {n: export.shapes[n] for n in ("height", "width") if n in export.shapes}
    images = export.shapes.get("num_images_per_prompt")
    if images is not None and not (type(images) is cst.Integer and images.value == "1"):
        values["num_images_per_prompt"] = images
    if export.pixart and "sequence_length" in export.shapes:
        values["max_sequence_length"] = export.shapes["sequence_length"]
    return values


def _with_shapes(node: cst.Call, export: _Export, ctx: FileContext) -> cst.Call:
    """NM532: `pipe(prompt)` -> `pipe(prompt, height=H, width=W)` with the export's values."""
    if has_star_kwargs(node):
        return node
    added = False
    for name, value in _shape_values(export).items():
        given = kwarg(node, name)
        if given is None:
            node = add_kwarg(node, name, code(value))
            added = True
        elif code(given.value) != code(value):
            ctx.warn("NM532", f"{name}={code(given.value)} kept: Optimum ran this call with the export's {code(value)}")
    if added:
        ctx.hit("NM532")
    return wrap_long(node) if added else node


def _push_to_hub(node: cst.Call, ctx: FileContext) -> cst.Call:
    """Optimum's `push_to_hub(save_directory, repository_id, private, use_auth_token)` -> diffusers' `push_to_hub(repo_id)`."""
    repository = argument(node, 1, "repository_id")
    if repository is None or len(positional_args(node)) > 2:
        return node
    args = [cst.Arg(repository.value)]
    for arg in node.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "private":
            args.append(arg)
        elif keyword == "use_auth_token" and not (type(arg.value) is cst.Name and arg.value.value == "True"):
            args.append(arg.with_changes(keyword=cst.Name("token")))
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]] + [
        args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    ]
    ctx.hit("NM531")
    return node.with_changes(args=args)


@on("Assign")
def folder_names(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `save_dir = "sd_neuron/"` (a folder passed by name is recognised when it is loaded again) and
    `pipe = build_pipeline(...)` of a function that returns a migrated pipeline (its calls get the export shapes)."""
    if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        state = _state(ctx)
        name = node.targets[0].target.value
        text = string_value(node.value)
        if text is not None:
            state.strings[name] = text
        else:
            state.strings.pop(name, None)
        value = node.value
        if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value in state.factories:
            state.pipes[name] = state.factories[value.func.value]
    return node


class _Returns(cst.CSTVisitor):
    """The names a function body returns, not counting nested functions."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if type(node.value) is cst.Name:
            self.names.add(node.value.value)


@on("FunctionDef")
def pipeline_factory(node: cst.FunctionDef, ctx: FileContext) -> cst.FunctionDef:
    """`def export(...): pipe = NeuronX.from_pretrained(...); ...; return pipe`: callers hold that pipeline."""
    state = _state(ctx)
    if not state.pipes:
        return node
    returns = _Returns()
    node.body.visit(returns)
    found = [state.pipes[name] for name in returns.names if name in state.pipes]
    if len(found) == 1:
        state.factories[node.name.value] = found[0]
    return node


# ---- NM534 calls of a sharded Flux pipeline ----------------------------------------------------

_NEGATIVE = ("negative_prompt", "negative_prompt_2", "true_cfg_scale", "negative_prompt_embeds")


class _FirstPipeCall(cst.CSTTransformer):
    """Rewrites the first call of a tensor-parallel pipeline in a statement; records the `encode_prompt` line."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.encode: str | None = None

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.encode is not None:
            return updated
        pipe = code(updated.func)
        export = _state(self.ctx).pipes.get(pipe)
        if export is None or export.tp is None:
            return updated
        found = _tp_call(updated, pipe, export, self.ctx)
        if found is None:
            return updated
        self.encode, new = found
        return new


def _tp_call_statement(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    rewriter = _FirstPipeCall(ctx)
    new = node.visit(rewriter)
    if rewriter.encode is None:
        return node
    assert isinstance(new, cst.SimpleStatementLine)
    ctx.hit("NM534")
    encode = cst.parse_statement(rewriter.encode).with_changes(leading_lines=new.leading_lines)
    return flatten(ctx, [encode, new.with_changes(leading_lines=[])])


def _tp_call(call: cst.Call, pipe: str, export: _Export, ctx: FileContext) -> tuple[str, cst.Call] | None:
    """`pipe(prompt, ...)` -> the CPU `encode_prompt` line and `pipe(prompt_embeds=<on the core>, ...)`."""
    prompt = argument(call, 0, "prompt")
    if prompt is None or kwarg(call, "prompt_embeds") is not None or has_star_kwargs(call):
        return None
    if any(kwarg(call, name) is not None for name in _NEGATIVE):
        todo(
            ctx,
            "NM919",
            'encode the negative prompt on the CPU too (pipe.encode_prompt(..., device="cpu")) and pass its embeddings on the core',
        )
        return None
    encode = [f"prompt={code(prompt.value)}"]
    prompt_2 = kwarg(call, "prompt_2")
    encode.append(f"prompt_2={code(prompt_2.value) if prompt_2 is not None else 'None'}")
    encode.append('device="cpu"')
    images = kwarg(call, "num_images_per_prompt")
    images_value = images.value if images is not None else _shape_values(export).get("num_images_per_prompt")
    if images_value is not None:
        encode.append(f"num_images_per_prompt={code(images_value)}")  # the embeddings carry the images per prompt
    length = kwarg(call, "max_sequence_length")
    if length is not None:
        encode.append(f"max_sequence_length={code(length.value)}")
    for arg in (prompt, prompt_2, images, length):
        if arg is not None:
            call = remove_arg(call, arg)
    call = add_kwarg(call, "prompt_embeds", f"{pipe}_prompt_embeds.to({pipe}_device)")
    call = add_kwarg(call, "pooled_prompt_embeds", f"{pipe}_pooled_prompt_embeds.to({pipe}_device)")
    for name in ("height", "width"):
        if name in export.shapes and kwarg(call, name) is None:
            call = add_kwarg(call, name, code(export.shapes[name]))
    if kwarg(call, "generator") is None:
        call = add_kwarg(call, "generator", f'{code(ctx.module_ref("torch"))}.Generator("cpu").manual_seed(0)')
    encode_call = cst.parse_expression(f"{pipe}.encode_prompt({', '.join(encode)})")
    assert type(encode_call) is cst.Call
    line = f"{pipe}_prompt_embeds, {pipe}_pooled_prompt_embeds, _ = {code(wrap_long(encode_call))}\n"
    return line, _one_per_line(call)


def _one_per_line(call: cst.Call) -> cst.Call:
    """The call laid out again, one argument per line when long: it lost and gained several arguments."""
    args = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in call.args]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace(""))
    return wrap_long(call.with_changes(args=args, whitespace_before_args=cst.SimpleWhitespace("")))
