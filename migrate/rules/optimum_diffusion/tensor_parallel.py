"""NM534: Optimum's `tensor_parallel_size=T` (Flux) becomes diffusers' tensor parallelism, one process per
core under `torchrun --nproc_per_node T`: the transformer is sharded before the load, the text encoders stay on the
CPU and the first call gets the same noise on every rank, which each rank must draw alike.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    code,
    has_star_kwargs,
    kwarg,
    remove_arg,
    wrap_long,
)
from migrate.rules.optimum_diffusion.state import _Export, _Load, _shape_values, _state
from migrate.rules.todo_catalogue import flatten, todo

RULES: tuple[Rule, ...] = (
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
