"""NM513, NM515 and the call hook: `from_pretrained(..., export=True)`, Optimum 0.4's
`get_neuron_config()` + `export()` and Optimum's `pipeline(...)` become native loads; keyword dicts a load splats
are inlined so their export arguments are read and dropped like literal ones (the diffusion family shares this).
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    argument,
    assignment,
    kwarg,
    on,
    string_value,
)
from migrate.rules.legacy_names import is_legacy, resolve
from migrate.rules.optimum_inference.classes import _CLASSES, _model_class
from migrate.rules.optimum_inference.export import _drop_export_kwargs, _native_load, _read_export
from migrate.rules.optimum_inference.state import _Export, _state
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM513",
        name="neuron-export-api",
        safety="unsafe",
        safety_reason="export shapes and compiler options are dropped; the model is loaded natively instead",
        summary="0.4.x `get_neuron_config(...)` + `export(...)` -> `AutoModelForCausalLM.from_pretrained(...)`.",
        rationale="From 0.4 Optimum decoders are exported with `cfg = NeuronModelForCausalLM."
        "get_neuron_config(id, batch_size=, sequence_length=, tensor_parallel_size=)` and "
        "`NeuronModelForCausalLM.export(id, neuron_config=cfg, load_weights=True)`. Natively the "
        "model is loaded from the same id; the config's shapes feed NM512 and the config "
        "statement goes once nothing else reads it.",
        before="from optimum.neuron import NeuronModelForCausalLM\n"
        "cfg = NeuronModelForCausalLM.get_neuron_config(model_id, batch_size=1, sequence_length=512)\n"
        "model = NeuronModelForCausalLM.export(model_id, neuron_config=cfg, load_weights=True)\n",
        after="from optimum.neuron import NeuronModelForCausalLM\n"
        "model = NeuronModelForCausalLM.from_pretrained(model_id)\n",
    ),
    Rule(
        id="NM515",
        name="optimum-pipeline",
        safety="unsafe",
        safety_reason="the pipeline's model runs in bf16 on the NeuronCore, without Optimum's export options",
        summary='`optimum.neuron.pipeline(...)` -> `transformers.pipeline(..., device="neuron", dtype=torch.bfloat16)`.',
        rationale='transformers\' pipeline runs on the NeuronCore with `device="neuron"` (without a '
        "device it runs on CPU on Neuron). `export`, `input_shapes`, `compiler_args` and "
        "`num_cores` are dropped; a text-generation pipeline's `sequence_length` becomes its "
        "model's static cache length (NM512).",
        before="import torch\nfrom optimum.neuron import pipeline\n"
        'pipe = pipeline("text-classification", model_id, export=True)\n',
        after="import torch\nfrom transformers import pipeline\n"
        'pipe = pipeline("text-classification", model_id, device="neuron", dtype=torch.bfloat16)\n',
    ),
)


def _from_pretrained(node: cst.Call, name: str, ctx: FileContext) -> cst.Call:
    export = _read_export(node, _Export(), ctx)
    if not export.compiled:
        todo(ctx, "NM915")
    _state(ctx).pending = (export, _CLASSES[name][1])
    if not ctx.enabled("NM511"):
        return node
    return _native_load(node, export, ctx, "NM511")


def _export(node: cst.Call, name: str, ctx: FileContext) -> cst.Call:
    """0.4.x `X.export(model_id, neuron_config=cfg, ...)` -> `X.from_pretrained(model_id, ...)`."""
    export = _Export(compiled=True)
    config = kwarg(node, "neuron_config")
    if config is not None:
        if type(config.value) is cst.Name and config.value.value in _state(ctx).configs:
            export.shapes.update(_state(ctx).configs[config.value.value].shapes)
        elif type(config.value) is cst.Call:
            _read_export(config.value, export, ctx)
    _read_export(node, export, ctx)
    _state(ctx).pending = (export, _CLASSES[name][1])
    if not ctx.enabled("NM513"):
        return node
    assert type(node.func) is cst.Attribute
    node = node.with_changes(func=node.func.with_changes(attr=cst.Name("from_pretrained")))
    node = _native_load(node, export, ctx, "NM513") if ctx.enabled("NM511") else _drop_export_kwargs(node)
    ctx.hit("NM513")
    return node


def _pipeline(node: cst.Call, ctx: FileContext) -> cst.Call:
    export = _read_export(node, _Export(), ctx)
    task_arg = argument(node, 0, "task")
    model_arg = argument(node, 1, "model")
    by_name = model_arg is not None and (
        type(model_arg.value) is cst.SimpleString or type(model_arg.value) in (cst.Name, cst.Attribute)
    )
    if by_name and not export.compiled:
        todo(ctx, "NM915")
    if task_arg is not None and string_value(task_arg.value) == "text-generation":
        _state(ctx).pending = (export, "pipeline")
    if not ctx.enabled("NM515"):
        return node
    return _native_load(node, export, ctx, "NM515", pipeline=True)


def inline_splats(node: cst.Call, ctx: FileContext, rule_id: str = "NM511") -> cst.Call:
    """`X.from_pretrained(id, **compiler_args, **input_shapes)` with both dicts built in the file:
    their entries become keywords, so the export arguments among them are read and dropped like
    literal ones (a splatted `num_cores` is a TypeError for a transformers model). `rule_id` is the rule
    credited when a dict statement goes once inlined (NM531 for the diffusion pipelines, which share this)."""
    state = _state(ctx)
    args: list[cst.Arg] = []
    for arg in node.args:
        name = arg.value.value if arg.star == "**" and type(arg.value) is cst.Name else None
        if name is None or name not in state.dicts:
            args.append(arg)
            continue
        state.inlined[name] = rule_id
        for element in state.dicts[name].elements:
            assert type(element) is cst.DictElement
            args.append(
                cst.Arg(
                    keyword=cst.Name(string_value(element.key)),  # type: ignore[arg-type]
                    value=element.value,
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                )
            )
    if len(args) == len(node.args) and all(a is b for a, b in zip(args, node.args)):
        return node
    args[-1] = args[-1].with_changes(comma=node.args[-1].comma, whitespace_after_arg=node.args[-1].whitespace_after_arg)
    return node.with_changes(args=args)


@on("Assign")
def keyword_dicts(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `compiler_args = {"num_cores": 2, ...}`: string-keyed dicts a later call may splat."""
    if len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        name, value = node.targets[0].target.value, node.value
        state = _state(ctx)
        if (
            type(value) is cst.Dict
            and value.elements
            and all(type(e) is cst.DictElement and (string_value(e.key) or "").isidentifier() for e in value.elements)
        ):
            state.dicts[name] = value
        else:
            state.dicts.pop(name, None)
    return node


@removable
def inlined_dict(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """A keyword dict whose entries were inlined into the Optimum call goes once nothing else reads it."""
    bound = assignment(stmt)
    if bound is not None and type(bound[1]) is cst.Dict and bound[0] in _state(ctx).inlined:
        return Removal(_state(ctx).inlined[bound[0]], binds=bound[0])
    return None


@on("Call", "NM511", "NM513", "NM515", "NM913", "NM915", "NM917", "NM919")
def optimum_inference_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    func = node.func
    if type(func) is cst.Attribute:
        name = _model_class(func.value, ctx)
        if name is not None:
            if ctx.enabled("NM511"):
                node = inline_splats(node, ctx)
            method = func.attr.value
            if method == "from_pretrained":
                return _from_pretrained(node, name, ctx)
            if method == "export":
                return _export(node, name, ctx)
            if method == "get_neuron_config":
                _read_export(node, _Export(), ctx)
                return node
    qualified = ctx.qualify(func)
    found = resolve(qualified)
    if found is not None and found.rule_id == "NM515":
        return _pipeline(node, ctx)
    if is_legacy(qualified) and qualified.startswith("optimum.") and found is None:  # type: ignore[union-attr]
        base = resolve(qualified.rpartition(".")[0])  # type: ignore[union-attr]
        if base is None:
            todo(ctx, "NM919")
    return node
