"""The export arguments of an Optimum load (`export=True`, shapes, `num_cores`, compiler settings):
read into the file's state, since the shapes must survive as what keeps graphs static, then dropped from the call,
which becomes a native `from_pretrained(..., device_map="neuron", dtype=torch.bfloat16)`.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import (
    add_kwarg,
    code,
    has_star_kwargs,
    kwarg,
    may_add,
    remove_arg,
    string_value,
    wrap_long,
)
from migrate.rules.optimum_inference.state import _Export
from migrate.rules.todo_catalogue import TP_LAUNCH, todo

# Optimum Neuron's compiler arguments, taken by every `NeuronModel*.from_pretrained(export=True, ...)` and pipeline
# class alike (the diffusion family drops them too): no meaning for a native model.
COMPILER_KWARGS = (
    "export",
    "auto_cast",
    "auto_cast_type",
    "dynamic_batch_size",
    "inline_weights_to_neff",
    "optlevel",
    "instance_type",
    "disable_neuron_cache",
    "compiler_workdir",
)
# Export-time arguments with no meaning for a native model.
_EXPORT_KWARGS = (
    *COMPILER_KWARGS,
    "batch_size",
    "sequence_length",
    "num_cores",
    "tensor_parallel_size",
    "compiler_args",
    "input_shapes",
    "num_choices",
    "image_size",
    "num_channels",
    "height",
    "width",
    "audio_sequence_length",
    "num_beams",
    "disable_fallback",
    "disable_fast_relayout",
    "cpu_backend",
    "neuron_config",
    "load_weights",
    "checkpoint_id",
    "checkpoint_revision",
)
_SHAPES = ("batch_size", "sequence_length", "tensor_parallel_size", "num_cores")
_FP32 = ("fp32", "f32", "float32")
_OLD_INSTANCES = ("inf1", "inf2", "trn1", "trn1n")


def _read_export(call: cst.Call, into: _Export, ctx: FileContext) -> _Export:
    """Collect shapes and precision from export kwargs (and an inline `input_shapes={...}`)."""
    for arg in call.args:
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if name in _SHAPES:
            into.shapes[name] = arg.value
        elif name in ("input_shapes", "compiler_args") and type(arg.value) is cst.Dict:
            for element in arg.value.elements:
                if type(element) is cst.DictElement and string_value(element.key) in _SHAPES:
                    into.shapes[string_value(element.key)] = element.value  # type: ignore[index]
                elif type(element) is cst.DictElement and string_value(element.key) == "auto_cast_type":
                    into.fp32 = string_value(element.value) in _FP32
        elif name == "auto_cast_type":
            into.fp32 = string_value(arg.value) in _FP32
        elif name == "auto_cast" and string_value(arg.value) == "none":
            into.fp32 = True
        elif name == "export" and not (type(arg.value) is cst.Name and arg.value.value == "False"):
            into.compiled = True
        elif name == "instance_type" and (string_value(arg.value) or "") in _OLD_INSTANCES:
            todo(ctx, "NM913")
    return into


def _native_load(call: cst.Call, export: _Export, ctx: FileContext, rule_id: str, pipeline: bool = False) -> cst.Call:
    """Drop the export kwargs; add the device (or the TP config) and the dtype.

    A pipeline keeps `batch_size` (also a transformers pipeline argument) and names its
    device with `device=`; it cannot take a `DistributedConfig`, so TP is only a TODO there.
    """
    dropped = [
        a.keyword.value
        for a in call.args
        if a.keyword is not None
        and a.keyword.value in _EXPORT_KWARGS
        and not (pipeline and a.keyword.value == "batch_size")
    ]
    for name in dropped:
        arg = kwarg(call, name)
        assert arg is not None
        call = remove_arg(call, arg)
    if dropped:
        ctx.warn(rule_id, f"dropped export arguments {', '.join(dropped)}: TorchNeuron compiles on first use")
    if export.tp is not None:
        todo(ctx, "NM917", TP_LAUNCH.format(cores=code(export.tp)))
    if export.tp is not None and not pipeline:
        if may_add(call, "distributed_config") and may_add(call, "device_map"):
            # however it is launched: `python` runs the whole model on one core, torchrun shards it over its
            # processes (DistributedConfig's mesh must be the world size: tp_size=N alone fails under `python`)
            config = ctx.name_ref("transformers.distributed", "DistributedConfig")
            world = f'int({code(ctx.module_ref("os"))}.environ.get("WORLD_SIZE", 1))'
            call = add_kwarg(call, "distributed_config", f"{config}(tp_size={world}) if {world} > 1 else None")
            call = add_kwarg(call, "device_map", f'None if {world} > 1 else "neuron"')
    elif kwarg(call, "device_map") is None and kwarg(call, "device") is None and not has_star_kwargs(call):
        call = add_kwarg(call, "device" if pipeline else "device_map", '"neuron"')
    if kwarg(call, "dtype") is None and kwarg(call, "torch_dtype") is None and not has_star_kwargs(call):
        torch = code(ctx.module_ref("torch"))
        call = add_kwarg(call, "dtype", f"{torch}.float32" if export.fp32 else f"{torch}.bfloat16")
    ctx.hit(rule_id)
    return wrap_long(call)


def _drop_export_kwargs(node: cst.Call) -> cst.Call:
    for name in ("neuron_config", "load_weights"):
        arg = kwarg(node, name)
        if arg is not None:
            node = remove_arg(node, arg)
    return node
