"""NM131-NM133, NM231, NM331-NM332 and TODOs NM931-NM933: diffusers scripts written for CUDA.

docs/rules.md (those ids); the upstream facts: docs/gaps.md, "Facts the codemod's diffusers rules rely on".
What the generic rules already do for a diffusers script stays with them (`.to("cuda")` NM102, fp16 NM202,
`torch_dtype=` NM203 with its diffusers gate, xformers NM208, `torch.compile` NM307, bitsandbytes NM209/NM210);
this family adds what only diffusers code does:

- every form of CUDA generator becomes a CPU one, which is what diffusers' `randn_tensor` samples from on
  Neuron (a neuron generator crashes it);
- CUDA attention backends become `"native"` (SDPA);
- `compile_repeated_blocks` gets the Neuron backend, and `pipe.vae = torch.compile(pipe.vae)` (which compiles
  nothing, pipelines call `vae.decode`) becomes the `decode` form;
- group offloading stops asking for CUDA streams, and cuDNN/TF32/inductor/`channels_last` tuning goes;
- sequential offload, quantization backends and pipeline calls whose shapes change in a loop get TODOs.

All of it only in files that import diffusers, except the `torch.Generator("cuda")` positional form, which
fails anywhere without CUDA (its keyword form is NM102's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    callee_name,
    code,
    family_state,
    kwarg,
    last_name,
    method_of,
    on,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.device import neuron_text
from migrate.rules.diffusers_common import is_diffusers_file
from migrate.rules.removal import Removal, removable
from migrate.rules.settings import subscript_key
from migrate.rules.todo_catalogue import SHAPE_LOOP, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM131",
        name="cpu-generator",
        safety="unsafe",
        safety_reason="the CPU generator's stream differs from CUDA's: the same seed gives other images",
        summary='`torch.Generator("cuda")` and, in diffusers scripts, `torch.Generator(device=<any device>)` -> '
        '`torch.Generator("cpu")`.',
        rationale="diffusers' `randn_tensor` samples on the CPU when the target is a NeuronCore but keeps the "
        "generator it was given, so a neuron generator (`torch.Generator(device=accelerator.device)`, the "
        "form in 26 of diffusers' 27 core training scripts) crashes it, and a CUDA one cannot be created "
        "without CUDA. A CPU generator is what diffusers reads on Neuron, and it draws the same noise on "
        'every rank, which tensor parallelism needs. The positional `"cuda"` form is rewritten in any '
        "script (as NM102 does the keyword form); device variables and `neuron` only in diffusers scripts. "
        "A generator the script also passes to `torch.rand*(..., device=...)` draws is kept, with a note: "
        "a CPU generator cannot feed a device draw.",
        before='import torch\nfrom diffusers import DiffusionPipeline\ng = torch.Generator("cuda").manual_seed(0)\n'
        "v = torch.Generator(device=accelerator.device).manual_seed(args.seed)\n",
        after='import torch\nfrom diffusers import DiffusionPipeline\ng = torch.Generator("cpu").manual_seed(0)\n'
        'v = torch.Generator(device="cpu").manual_seed(args.seed)\n',
    ),
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
        id="NM231",
        name="attention-backend",
        safety="safe",
        summary='diffusers attention backends (`set_attention_backend("flash")`, `attention_backend(...)`, '
        '`DIFFUSERS_ATTN_BACKEND`) -> `"native"`.',
        rationale="Every diffusers backend but `native` (PyTorch SDPA), `_native_math` and `flex` needs CUDA: "
        "flash, sage and xformers raise for the missing package, the `*_hub` backends fetch a CUDA kernel "
        'from the Hub and find no Neuron build, `_native_cudnn/_efficient/_flash` pin CUDA SDPA kernels. `"native"` '
        "is diffusers' default and what TorchNeuron runs. `flex` (PyTorch FlexAttention) is kept: it runs on "
        'Neuron since Neuron 2.34 ("FlexAttention runs faster with more masks"). Only literal names are '
        "rewritten; a name read from the command line is left to the runtime shim.",
        before='from diffusers import FluxPipeline\npipe.transformer.set_attention_backend("flash_hub")\n',
        after='from diffusers import FluxPipeline\npipe.transformer.set_attention_backend("native")\n',
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

# ---- NM131 generators -------------------------------------------------------------------------

# torch random draws that take a generator; a generator passed to one that samples on a device cannot be a CPU one.
_DRAW = re.compile(
    r"\b(?:randn|rand|randint|randperm|normal|bernoulli|multinomial|poisson|randn_like|rand_like|randint_like"
    r"|normal_|uniform_|random_|exponential_|bernoulli_|cauchy_|geometric_|log_normal_)\("
)
_GENERATOR_ARG = re.compile(r"\bgenerator\s*=\s*([A-Za-z_][\w.]*)")
_ON_DEVICE = re.compile(r"\bdevice\s*=|_like\(|_\($")  # a `device=` draw, a `*_like(tensor)`, an in-place draw


def _device_draw_generators(text: str) -> frozenset[str]:
    """Names passed as `generator=` to a torch draw on a device (`torch.rand(n, device=d, generator=g)`)."""
    names: set[str] = set()
    for match in _DRAW.finditer(text):
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        inner = text[match.end() : end]
        if _ON_DEVICE.search(inner) or _ON_DEVICE.search(match.group(0)):
            names.update(_GENERATOR_ARG.findall(inner))
    return frozenset(names)


@dataclass
class _State:
    device_draws: frozenset[str] | None = None  # generator names that feed device draws, read on first use
    warned: set[str] = field(default_factory=set)


def _state(ctx: FileContext) -> _State:
    state = family_state(ctx, "diffusers-cuda", _State)
    if state.device_draws is None:
        state.device_draws = _device_draw_generators(ctx.text) if "generator" in ctx.text else frozenset()
    return state


def _cpu_generator(call: cst.Call, ctx: FileContext) -> cst.Call | None:
    """`torch.Generator(<a CUDA or, in a diffusers file, any non-CPU device>)` with the device `"cpu"`, else None."""
    device = argument(call, 0, "device")
    if device is None:
        return None
    value = device.value
    text = string_value(value)
    if text is not None:
        cuda = neuron_text(text) is not None
        neuron = text == "neuron" or text.startswith("neuron:")
        if not (cuda or (neuron and is_diffusers_file(ctx))):
            return None
        new = with_string_value(value, "cpu")  # type: ignore[arg-type]
    elif is_diffusers_file(ctx) and isinstance(value, cst.Name | cst.Attribute | cst.Call | cst.FormattedString):
        new = cst.SimpleString('"cpu"')
    else:
        return None
    return replace_arg(call, device, device.with_changes(value=new))


def _is_generator(call: cst.Call, ctx: FileContext) -> bool:
    return ctx.qualify(call.func) == "torch.Generator"


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


@on("Assign", "NM131")
def generator_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM131 in a file whose generators also feed device draws: each assignment decides by its target.

    `g = torch.Generator(device=accelerator.device)` later used in `torch.rand(n, device=d, generator=g)`
    stays on the device (a CPU generator would raise there); the file's other generators become CPU ones.
    """
    if not ctx.enabled("NM131") or len(node.targets) != 1:
        return node
    state = _state(ctx)
    if not state.device_draws:
        return node
    call = _generator_in(node.value, ctx)
    if call is None:
        return node
    target = code(node.targets[0].target)
    if target in state.device_draws:
        if target not in state.warned:
            state.warned.add(target)
            ctx.warn("NM131", f"kept the device generator {target}: it also feeds torch random draws on the device")
        return node
    new = _cpu_generator(call, ctx)
    if new is None:
        return node
    ctx.hit("NM131")
    return node.with_changes(value=_swap(node.value, call, new))


def _generator_in(node: cst.BaseExpression, ctx: FileContext) -> cst.Call | None:
    """The `torch.Generator(...)` call of `torch.Generator(d)`, `torch.Generator(d).manual_seed(s)`, `x if c else y`."""
    if type(node) is cst.Call:
        if _is_generator(node, ctx):
            return node
        if type(node.func) is cst.Attribute:
            return _generator_in(node.func.value, ctx)
    if type(node) is cst.IfExp:
        return _generator_in(node.body, ctx) or _generator_in(node.orelse, ctx)
    return None


def _swap(node: cst.BaseExpression, old: cst.Call, new: cst.Call) -> cst.BaseExpression:
    """`node` with the call `old` (found by `_generator_in`) replaced by `new`."""
    if node is old:
        return new
    if type(node) is cst.Call and type(node.func) is cst.Attribute:
        return node.with_changes(func=node.func.with_changes(value=_swap(node.func.value, old, new)))
    if type(node) is cst.IfExp:
        return node.with_changes(body=_swap(node.body, old, new), orelse=_swap(node.orelse, old, new))
    return node


# ---- NM231 attention backends -----------------------------------------------------------------

# PyTorch SDPA (native, its math reference) and PyTorch FlexAttention, which runs on Neuron since 2.34.
_PORTABLE_BACKENDS = ("native", "_native_math", "flex")


def _native_backend(node: cst.Call, backend: cst.Arg | None, ctx: FileContext) -> cst.Call:
    if backend is None or type(backend.value) is not cst.SimpleString:
        return node
    text = string_value(backend.value)
    if text is None or text in _PORTABLE_BACKENDS:
        return node
    ctx.hit("NM231")
    return replace_arg(node, backend, backend.with_changes(value=with_string_value(backend.value, "native")))


@on("Assign", "NM231")
def attention_backend_env(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """NM231: `os.environ["DIFFUSERS_ATTN_BACKEND"] = "flash"` (read when diffusers is imported)."""
    if len(node.targets) != 1 or subscript_key(node.targets[0].target) != "DIFFUSERS_ATTN_BACKEND":
        return node
    if not ctx.enabled("NM231") or type(node.value) is not cst.SimpleString:
        return node
    text = string_value(node.value)
    if text is None or text in _PORTABLE_BACKENDS:
        return node
    ctx.hit("NM231")
    return node.with_changes(value=with_string_value(node.value, "native"))


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


# ---- NM132 CUDA tuning flags ------------------------------------------------------------------

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


# ---- TODOs: quantization backends, shapes that change in a loop ----------------------------------

_QUANTIZERS = ("PipelineQuantizationConfig", "QuantoConfig", "GGUFQuantizationConfig", "NunchakuConfig")
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
