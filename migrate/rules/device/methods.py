"""NM101, NM107 and the call-site device rewrites: `.cuda()` is `.to("neuron")`, `.to(<rank>)` the
process's core, `DataParallel`/DDP `device_ids` its core, `torch.device("cuda", i)` the Neuron device, and a
`pipeline(...)` that loads a model and names no device gets `device="neuron"`, since only device sources are
rewritten and uses stay.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    callee_name,
    has_star_kwargs,
    kwarg,
    last_name,
    method_of,
    on,
    positional_args,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.device.literals import (
    _string_rank,
    device_literal,
    is_device_side,
    is_rank,
    rank_core,
    reads_device_index,
)
from migrate.rules.settings import through

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM101",
        name="cuda-method",
        safety="safe",
        summary='`x.cuda()` -> `x.to("neuron")`, keeping an explicit index, a device argument and `non_blocking`.',
        rationale='`.cuda()` only targets CUDA. `.to("neuron")` moves to the process\'s current NeuronCore. '
        'An integer literal stays an index (`.cuda(1)` -> `.to("neuron:1")`); a rank (`local_rank`, '
        '`args.gpu`, `LOCAL_RANK`) becomes the index-less `"neuron"`, which is each rank\'s own core '
        "whether the runtime shows a rank only its cores (as `neuron:0`) or all of them with its own "
        "current (docs/simulator.md, per-rank visibility); any other argument, a `torch.device` or a "
        '`"cuda:0"` string, is passed on to `.to(...)` (renamed by NM102 where it is set). '
        "The module `torch.cuda` is not a call and is left to NM104.",
        before="model = model.cuda()\nbatch = batch.cuda(local_rank, non_blocking=True)\nlayer.cuda(device)\n",
        after='model = model.to("neuron")\nbatch = batch.to("neuron", non_blocking=True)\nlayer.to(device)\n',
    ),
    Rule(
        id="NM107",
        name="pipeline-device",
        safety="safe",
        summary='`pipeline(...)` that loads a model and names no device gets `device="neuron"`.',
        rationale="With no device, `pipeline()` resolves to CPU on Neuron (there is no neuron branch "
        "in pipelines/base.py). Only pipelines that load the model themselves (a string model id) "
        "are changed; a pipeline given a model object keeps where that model was placed.",
        before='pipe = pipeline("text-generation", model="gpt2")\n',
        after='pipe = pipeline("text-generation", model="gpt2", device="neuron")\n',
    ),
)


@on("Call", "NM101", "NM102", "NM103", "NM106", "NM107")
def cuda_method(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """NM101 `.cuda()`, NM102/NM106 the positional device of `.to()`/`torch.device()`, NM107."""
    func = node.func
    if method_of(node, "cuda") and type(func) is cst.Attribute and ctx.enabled("NM101"):
        if ctx.qualify(func) == "torch.cuda":  # `torch.cuda` the module is not a tensor method
            return node
        if any(arg.star for arg in node.args):  # `.cuda(*a)`/`.cuda(**kw)`: which device it names is unknown
            return node
        ctx.hit("NM101")
        args = list(node.args)
        positional = positional_args(node)
        device = kwarg(node, "device")
        given = positional[0] if positional else device
        if given is not None:
            index = given.value
            target: cst.BaseExpression = index  # a `torch.device` or an index `.to` resolves itself
            if type(index) is cst.Integer:
                target = cst.SimpleString(f'"neuron:{index.value}"')
            elif is_rank(index):
                target = cst.SimpleString('"neuron"')
            else:
                target = through(device_literal)(index, ctx) or index
            moved = given.with_changes(value=target, keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            if args.index(given) == 0:
                args[0] = moved
            else:  # `.cuda(non_blocking=True, device=d)`: `.to` takes the device first
                args.remove(given)
                args = _recomma([moved, *args])
        else:
            first = cst.Arg(cst.SimpleString('"neuron"'))
            if args:
                first = first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.insert(0, first)
        return node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
    if method_of(node, "to") or ctx.qualify(func) == "torch.device":
        positional = positional_args(node)
        if not positional:
            return node
        arg = positional[0]
        value = arg.value
        if ctx.enabled("NM102"):
            new = through(device_literal)(value, ctx)
            if new is not None:
                ctx.hit("NM102")
                node = replace_arg(node, arg, arg.with_changes(value=new))
                if method_of(node, "to"):
                    return node
                rank = argument(node, 1, "index")
                if rank is not None and is_rank(rank.value):  # `torch.device("cuda", local_rank)`
                    if reads_device_index(ctx):
                        return replace_arg(node, rank, rank.with_changes(value=rank_core(rank.value, ctx)))
                    return remove_arg(node, rank)
                dropped = _string_rank(value)  # `torch.device(f"cuda:{local_rank}")`
                if rank is None and dropped is not None and reads_device_index(ctx):
                    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    moved = node.args[0].with_changes(comma=comma)
                    return node.with_changes(args=[moved, cst.Arg(rank_core(dropped, ctx)), *node.args[1:]])
                return node
        if method_of(node, "to") and ctx.enabled("NM106"):
            if type(value) is cst.Integer:
                ctx.hit("NM106")
                return replace_arg(node, arg, arg.with_changes(value=cst.SimpleString(f'"neuron:{value.value}"')))
            if is_rank(value):
                ctx.hit("NM106")
                return replace_arg(node, arg, arg.with_changes(value=cst.SimpleString('"neuron"')))
        return node
    if ctx.enabled("NM106") and (callee_name(node) or "") in _DATA_PARALLEL:
        return _replica_device(node, ctx)
    if (
        method_of(node, "startswith")
        and ctx.enabled("NM103")
        and type(func) is cst.Attribute
        and is_device_side(func.value)
    ):
        positional = positional_args(node)
        text = string_value(positional[0].value) if positional else None
        if text is not None and text.startswith("cuda") and type(positional[0].value) is cst.SimpleString:
            ctx.hit("NM103")
            return replace_arg(
                node,
                positional[0],
                positional[0].with_changes(value=with_string_value(positional[0].value, "neuron" + text[4:])),
            )
        return node
    if (
        callee_name(node) == "pipeline"
        and ctx.enabled("NM107")
        and ctx.qualify(func) in (None, "transformers.pipeline")
    ):
        if kwarg(node, "device") or kwarg(node, "device_map") or has_star_kwargs(node):
            return node
        model = kwarg(node, "model")
        positional = positional_args(node)
        model_value = model.value if model else (positional[1].value if len(positional) > 1 else None)
        if isinstance(model_value, (cst.SimpleString, cst.Name, cst.Attribute)) and _loads_by_name(model_value):
            ctx.hit("NM107")
            return add_kwarg(node, "device", '"neuron"')
    return node


_DATA_PARALLEL = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP"})


def _replica_device(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`DDP(model, device_ids=[local_rank], output_device=local_rank)`: the rank's own core, `current_device()`.

    DDP moves each input batch to `device_ids[0]`, so the ids stay (distributed.py says why); an index that
    is the rank would name another process's core where a rank sees only its own.
    """
    current = f"{cst.Module([]).code_for_node(ctx.module_ref('torch.neuron'))}.current_device()"
    for name in ("device_ids", "output_device", "device_id"):
        arg = kwarg(node, name)
        if arg is None:
            continue
        value = arg.value
        if type(value) is cst.List and len(value.elements) == 1 and is_rank(value.elements[0].value):
            element = value.elements[0]
            new: cst.BaseExpression = value.with_changes(
                elements=[element.with_changes(value=cst.parse_expression(current))]
            )
        elif type(value) is not cst.List and is_rank(value):
            new = cst.parse_expression(current)
        else:
            continue
        ctx.hit("NM106")
        node = replace_arg(node, arg, arg.with_changes(value=new))
    return node


def _recomma(args: list[cst.Arg]) -> list[cst.Arg]:
    """`args` reordered: a comma after each but the last, which keeps none."""
    out = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for a in args[:-1]]
    return [*out, args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)]


def _loads_by_name(node: cst.BaseExpression) -> bool:
    """A string literal, or a name that reads like a model id (`model_name`, `args.model_id`)."""
    if type(node) is cst.SimpleString:
        return True
    name = last_name(node) or ""
    return bool(re.search(r"name|path|_id$|checkpoint", name))
