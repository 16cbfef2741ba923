"""NM514: an exported encoder took CPU tensors padded to the export shape; the native model takes them
on its device, so the tokenizer call pads to `sequence_length` and its inputs move to the model's device.
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
    last_name,
    method_of,
    on,
    string_value,
    wrap_long,
)
from migrate.rules.optimum_inference.classes import _model_class
from migrate.rules.optimum_inference.export import _read_export
from migrate.rules.optimum_inference.state import _Export, _state

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM514",
        name="encoder-inputs",
        safety="unsafe",
        safety_reason="inputs are padded to the export length, so per-token outputs have that length, on the device",
        summary="Encoder inputs are padded to the export `sequence_length` and moved to the model's device.",
        rationale="Optimum padded inputs of traced encoders to the compiled shape and took CPU "
        'tensors. Natively `tokenizer(..., padding="max_length", max_length=sequence_length, '
        "truncation=True)` keeps one graph, and the batch has to be on the model's device "
        "(`.to(model.device)`); outputs come back on the device.",
        before="from optimum.neuron import NeuronModelForSequenceClassification\n"
        "model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, sequence_length=128)\n"
        'inputs = tokenizer(text, return_tensors="pt")\n',
        after="from optimum.neuron import NeuronModelForSequenceClassification\n"
        "model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, sequence_length=128)\n"
        'inputs = tokenizer(\n    text,\n    return_tensors="pt",\n    padding="max_length",\n    max_length=128,\n'
        "    truncation=True,\n).to(model.device)\n",
    ),
)


@on("Assign", "NM511", "NM514", "NM913")
def bind_models(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember which variable holds which export (for NM512/NM514), and `get_neuron_config` results."""
    if len(node.targets) != 1:
        return node
    target = node.targets[0].target
    value = node.value
    state = _state(ctx)
    if type(target) is cst.Name and type(value) is cst.Call and method_of(value, "get_neuron_config"):
        assert type(value.func) is cst.Attribute
        if _model_class(value.func.value, ctx) is not None:
            state.configs[target.value] = _read_export(value, _Export(), ctx)
        return node
    if state.pending is not None and type(value) is cst.Call:
        export, kind = state.pending
        known = state.models.setdefault(code(target), _Export())
        known.shapes.update(export.shapes)  # a load from an exported directory knows no shapes itself
        if kind == "encoder":
            state.encoder = (code(target), export)
        return node
    if state.encoder is not None and ctx.enabled("NM514"):
        return _encoder_inputs(node, ctx, *state.encoder)
    return node


def _encoder_inputs(node: cst.Assign, ctx: FileContext, model: str, export: _Export) -> cst.Assign:
    value = node.value
    moved = type(value) is cst.Call and method_of(value, "to")
    call = value.func.value if moved else value  # type: ignore[attr-defined]
    if type(call) is not cst.Call or kwarg(call, "return_tensors") is None:
        return node
    if not (last_name(call.func) or "").lower().endswith(("tokenizer", "tok")):
        return node
    new = call
    length = export.shapes.get("sequence_length")
    padding = kwarg(new, "padding")
    if length is not None and not has_star_kwargs(new):
        if padding is None:
            new = add_kwarg(new, "padding", '"max_length"')
        elif string_value(padding.value) != "max_length":
            new = new.with_changes(
                args=[
                    a if a is not padding else a.with_changes(value=cst.SimpleString('"max_length"')) for a in new.args
                ]
            )
        if kwarg(new, "max_length") is None:
            new = add_kwarg(new, "max_length", code(length))
        if kwarg(new, "truncation") is None:
            new = add_kwarg(new, "truncation", "True")
    if moved:
        if new is call:
            return node
        ctx.hit("NM514")
        return node.with_changes(value=value.with_changes(func=value.func.with_changes(value=wrap_long(new))))  # type: ignore[attr-defined]
    ctx.hit("NM514")
    moved_call = cst.parse_expression(f"x.to({model}.device)")
    assert type(moved_call) is cst.Call and type(moved_call.func) is cst.Attribute
    return node.with_changes(value=moved_call.with_changes(func=moved_call.func.with_changes(value=wrap_long(new))))
