"""The call hook: a training-arguments, accelerator, parallelism-config or training-model call is
handed to the module that rewrites it; NM504's `NeuronAccelerator(...)` loses the arguments only Optimum had.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    code,
    has_star_kwargs,
    kwarg,
    method_of,
    on,
    wrap_long,
)
from migrate.rules.legacy_names import resolve
from migrate.rules.optimum_training.fields import _ARGS, _drop_fields, _training_args
from migrate.rules.optimum_training.parallel import _distributed_config, _training_model
from migrate.rules.optimum_training.state import _qualified_name, _state

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM504",
        name="neuron-accelerator",
        safety="unsafe",
        safety_reason="ZeRO-1 and Optimum's mixed-precision settings are dropped; precision becomes accelerate's bf16",
        summary='`NeuronAccelerator(...)` -> `Accelerator(mixed_precision="bf16")`; NxD arguments dropped.',
        rationale="accelerate 1.15 detects Neuron (`MULTI_NEURON`, backend `neuron`, bf16 autocast "
        'on `device_type="neuron"`). `trn_config` moves to the model\'s `from_pretrained` (NM505), '
        "`zero_1` and `mixed_precision_config` have no accelerate equivalent (ZeRO-1: NM912). "
        "`NeuronPartialState`/`NeuronAcceleratorState` -> accelerate's.",
        before="from optimum.neuron import NeuronAccelerator\naccelerator = NeuronAccelerator(gradient_accumulation_steps=4)\n",
        after='from accelerate import Accelerator\naccelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")\n',
    ),
)


def _accelerator(node: cst.Call, ctx: FileContext) -> cst.Call:
    node = _drop_fields(node, ctx, "NM504", "NeuronAccelerator")
    if ctx.enabled("NM504") and kwarg(node, "mixed_precision") is None and not has_star_kwargs(node):
        node = add_kwarg(node, "mixed_precision", '"bf16"')
        ctx.hit("NM504")
    return wrap_long(node)


def _parallel_config(node: cst.Call, ctx: FileContext, name: str) -> cst.Call:
    node = _drop_fields(node, ctx, "NM505", name)
    if not ctx.enabled("NM505"):
        return node
    tp = kwarg(node, "tensor_parallel_size")
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value != "tensor_parallel_size":
            ctx.warn("NM505", f"{name}: dropped {arg.keyword.value}={code(arg.value)}: no DistributedConfig field")
    ctx.hit("NM505")
    return wrap_long(_distributed_config(ctx, tp.value if tp is not None else None, node.func))


@on("Call", "NM502", "NM503", "NM504", "NM505", "NM506", "NM508", "NM910", "NM911", "NM912", "NM914")
def optimum_training_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    name = _qualified_name(node.func, ctx)
    if name in _ARGS:
        return _training_args(node, ctx, name)
    if name == "NeuronAccelerator":
        return _accelerator(node, ctx)
    if name in ("TrainingNeuronConfig", "ModelParallelismPlugin"):
        return _parallel_config(node, ctx, name)
    if name in ("is_main_worker", "is_logging_process", "is_main_worker_for_metrics") and ctx.enabled("NM508"):
        ctx.hit("NM508")
        return cst.parse_expression(f"{ctx.name_ref('accelerate', 'PartialState')}().is_main_process")
    if name == "is_precompilation" and ctx.enabled("NM508"):
        ctx.hit("NM508")
        constant = cst.Name("False")
        _state(ctx).precompilation[id(constant)] = constant
        return constant
    if method_of(node, "from_pretrained") and type(node.func) is cst.Attribute:
        found = resolve(ctx.qualify(node.func.value))
        if found is not None and found.rule_id == "NM506":
            return _training_model(node, ctx)
    return node
