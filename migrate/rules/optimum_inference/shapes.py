"""NM512: the export shapes stay static: decoders get a static KV cache of `max_cache_len =
sequence_length` at `generate`, reads of the export config's shapes read the values the export fixed, and the
`get_neuron_config()` statement goes once they are copied.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    assignment,
    code,
    method_of,
    on,
    string_value,
)
from migrate.rules.optimum_inference.classes import _model_class
from migrate.rules.optimum_inference.state import _state
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import flatten, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM512",
        name="export-shapes",
        safety="safe",
        summary="Export shapes stay static: decoders get a static cache of `max_cache_len = sequence_length`.",
        rationale="`sequence_length` bounded prompt plus generated tokens of a compiled decoder; a "
        "static KV cache of that length keeps one decode graph (transformers compiles it for the "
        '`neuron` backend). `model.neuron_config.batch_size` / `model.config.neuron["batch_size"]` '
        "and the other export values read later become the values of the export call.",
        before="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id, export=True, batch_size=1, sequence_length=1024)\n"
        "n = model.neuron_config.batch_size\n",
        after="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id, export=True, batch_size=1, sequence_length=1024)\n"
        'model.generation_config.cache_implementation = "static"\nmodel.generation_config.max_cache_len = 1024\n'
        "n = 1\n",
    ),
)


@on("SimpleStatementLine", "NM512")
def static_cache(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """After `model = <decoder load>`, fix the cache to the export's `sequence_length`."""
    state = _state(ctx)
    if state.pending is None:
        return node
    export, kind = state.pending
    state.pending = None
    length = export.shapes.get("sequence_length")
    small = node.body[0] if len(node.body) == 1 else None
    if (
        kind not in ("decoder", "pipeline")
        or length is None
        or type(small) is not cst.Assign
        or not ctx.enabled("NM512")
    ):
        return node
    target = code(small.targets[0].target)
    owner = f"{target}.model" if kind == "pipeline" else target
    if f"{owner}.generation_config.max_cache_len" in ctx.text:
        return node  # set by hand or by an earlier run
    lines = [
        cst.parse_statement(f'{owner}.generation_config.cache_implementation = "static"'),
        cst.parse_statement(f"{owner}.generation_config.max_cache_len = {code(length)}"),
    ]
    ctx.hit("NM512")
    return flatten(ctx, [node, *lines])


_SHAPE_ATTRIBUTES = {
    "batch_size": "batch_size",
    "sequence_length": "sequence_length",
    "tp_degree": "tensor_parallel_size",
    "tensor_parallel_size": "tensor_parallel_size",
}


@on("Attribute", "NM512", "NM919")
def export_values(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`model.neuron_config.batch_size` / `cfg.sequence_length` -> the value given at export."""
    shape = _SHAPE_ATTRIBUTES.get(node.attr.value)
    if shape is None or not ctx.enabled("NM512"):
        return node
    state = _state(ctx)
    owner = node.value
    export = None
    if type(owner) is cst.Attribute and owner.attr.value == "neuron_config":
        export = state.models.get(code(owner.value))
    elif type(owner) is cst.Name:
        export = state.configs.get(owner.value)
    value = export.shapes.get(shape) if export is not None else None
    if value is None:
        if type(owner) is cst.Attribute and owner.attr.value == "neuron_config" and export is not None:
            todo(ctx, "NM919", "native models have no neuron_config: use the value the model was exported with")
        return node
    ctx.hit("NM512")
    return value


@on("Subscript", "NM512")
def old_export_values(node: cst.Subscript, ctx: FileContext) -> cst.BaseExpression:
    """<=0.3 `model.config.neuron["batch_size"]` -> the value given at export."""
    owner = node.value
    if (
        not (
            type(owner) is cst.Attribute
            and owner.attr.value == "neuron"
            and type(owner.value) is cst.Attribute
            and owner.value.attr.value == "config"
        )
        or len(node.slice) != 1
        or not ctx.enabled("NM512")
    ):
        return node
    index = node.slice[0].slice
    key = string_value(index.value) if type(index) is cst.Index else None
    export = _state(ctx).models.get(code(owner.value.value))
    value = export.shapes.get(_SHAPE_ATTRIBUTES.get(key or "", "")) if export is not None else None
    if value is None:
        return node
    ctx.hit("NM512")
    return value


@removable
def neuron_config_statement(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """`cfg = X.get_neuron_config(...)` goes once its values were copied where they are read."""
    bound = assignment(stmt)
    if bound is None:
        return None
    target, value = bound
    if type(value) is cst.Call and method_of(value, "get_neuron_config"):
        assert type(value.func) is cst.Attribute
        if _model_class(value.func.value, ctx) is not None:
            return Removal("NM513", binds=target)
    return None
