"""NM603, NM608, NM609: what is rewritten or removed as a whole statement: `mark_step`/`sync` and
metrics reports go (eager execution has no graph to cut), `xm.save`/`master_print` run on rank 0,
`xm.all_reduce` is `torch.distributed.all_reduce`, `xmp.spawn` is a torchrun launch, XLA environment settings go
or get a TODO, and a rank guard left twice is merged.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    call_statement,
    code,
    environ_setting,
    has_star_kwargs,
    kwarg,
    last_name,
    on,
    positional_args,
    string_value,
)
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import flatten, todo
from migrate.rules.xla.names import (
    _BF16_ENV,
    _COLLECTIVES,
    _METRICS,
    _REDUCE_OPS,
    _REDUCED,
    _SPAWN,
    _SYNC,
    _XLA_ENV,
    XM,
)
from migrate.rules.xla.state import _env, _multi_process

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM603",
        name="mark-step",
        safety="safe",
        summary="`xm.mark_step()`, `torch_xla.sync()`, `xm.wait_device_ops()` and metrics reports are removed.",
        rationale="They cut and flushed the lazy XLA graph. TorchNeuron runs eagerly, so there is "
        "nothing to cut; time with `torch.accelerator.synchronize()` where needed. "
        "`print(met.metrics_report())` has no equivalent. Comments above a removed call stay.",
        before="import torch_xla.core.xla_model as xm\nfor batch in loader:\n    loss = step(batch)\n    xm.mark_step()\n",
        after="import torch_xla.core.xla_model as xm\nfor batch in loader:\n    loss = step(batch)\n",
    ),
    Rule(
        id="NM608",
        name="xla-spawn",
        safety="unsafe",
        safety_reason="the script runs one process itself; multi-process runs need a torchrun launch (TODO NM917)",
        summary='`xmp.spawn(fn, args=(a,), nprocs=N)` -> `fn(int(os.environ.get("LOCAL_RANK", 0)), a)` plus TODO NM917.',
        rationale="Natively torchrun starts one process per NeuronCore, so the script calls its "
        "per-process function once with its local rank (xmp.spawn passed the local ordinal). "
        "The launch command has to change, hence the TODO.",
        before="import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(_mp_fn, args=(flags,), nprocs=8)\n",
        after='import os\nimport torch_xla.distributed.xla_multiprocessing as xmp\n_mp_fn(int(os.environ.get("LOCAL_RANK", 0)), flags)\n',
    ),
    Rule(
        id="NM609",
        name="xla-env",
        safety="unsafe",
        safety_reason="removing `XLA_USE_BF16`/`XLA_DOWNCAST_BF16` runs the script in fp32 (TODO NM920)",
        summary="torch_xla environment settings (`XLA_USE_BF16`, `PJRT_DEVICE`, ...) are removed.",
        rationale="They configure torch_xla only. `XLA_USE_BF16`/`XLA_DOWNCAST_BF16` made every "
        "float tensor bf16 on the device: removing them runs the script in fp32, so TODO NM920 and "
        "a warning ask for an explicit bf16 choice (model dtype or autocast) where the model is built.",
        before='import os\nos.environ["PJRT_DEVICE"] = "NEURON"\nmodel = build()\n',
        after="import os\nmodel = build()\n",
    ),
)


@on("SimpleStatementLine", "NM607", "NM608", "NM609", "NM916", "NM917", "NM918", "NM920")
def xla_statement(node: cst.SimpleStatementLine, ctx: FileContext) -> HookResult:
    """Rewrites that turn one call statement into another statement shape."""
    call = call_statement(node)
    if call is not None:
        qualified = ctx.qualify(call.func) or ""
        if qualified == XM + "master_print" and ctx.enabled("NM607") and not _prints_metrics(call, ctx):
            args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in ("fd", "finalize"))]
            if args:
                args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            printed = call.with_changes(func=cst.Name("print"), args=args)
            return _guarded(node, ctx, "RANK", printed)
        if qualified == XM + "save" and ctx.enabled("NM607"):
            return _save(node, call, ctx)
        if qualified == XM + "rendezvous" and ctx.enabled("NM607"):
            ctx.hit("NM607")
            barrier = cst.parse_expression(f"{code(ctx.module_ref('torch.distributed'))}.barrier()")
            return node.with_changes(body=[cst.Expr(barrier)])
        if qualified == XM + "all_reduce":
            return _all_reduce(node, call, None, ctx)
        if qualified in _SPAWN:
            return _spawn(node, call, ctx)
        if qualified == XM + "reduce_gradients" and _multi_process(ctx) and not _REDUCED.search(ctx.text):
            todo(ctx, "NM916")
    if len(node.body) == 1 and type(node.body[0]) is cst.Assign:
        assign = node.body[0]
        value = assign.value
        if type(value) is cst.Call and ctx.qualify(value.func) == XM + "all_reduce" and len(assign.targets) == 1:
            return _all_reduce(node, value, assign.targets[0].target, ctx)
    if _env_setting(node, _BF16_ENV) is not None:
        todo(ctx, "NM920")
        ctx.warn(
            "NM609",
            "XLA_USE_BF16/XLA_DOWNCAST_BF16 removed: the script now runs in fp32 unless the model is cast or autocast (TODO NM920)",
        )
    return node


def _guarded(node: cst.SimpleStatementLine, ctx: FileContext, rank: str, call: cst.Call) -> cst.If:
    """`if int(os.environ.get(rank, 0)) == 0:` around the call, keeping the statement's comments."""
    ctx.hit("NM607")
    test = cst.parse_expression(f"{_env(ctx, rank, 0)} == 0")
    inner = cst.SimpleStatementLine([cst.Expr(call)], trailing_whitespace=node.trailing_whitespace)
    return cst.If(test=test, body=cst.IndentedBlock([inner]), leading_lines=node.leading_lines)


def _prints_metrics(call: cst.Call, ctx: FileContext) -> bool:
    return any(type(a.value) is cst.Call and ctx.qualify(a.value.func) in _METRICS for a in call.args)


def _save(node: cst.SimpleStatementLine, call: cst.Call, ctx: FileContext) -> cst.BaseStatement:
    """`xm.save(obj, path)` saved from the (local) master only, by default."""
    master_only = kwarg(call, "master_only")
    global_master = kwarg(call, "global_master")
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in ("master_only", "global_master"))]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    saved = call.with_changes(func=cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name("save")), args=args)
    if master_only is not None and type(master_only.value) is cst.Name and master_only.value.value == "False":
        ctx.hit("NM607")
        return node.with_changes(body=[cst.Expr(saved)])
    everywhere = (
        global_master is not None and type(global_master.value) is cst.Name and global_master.value.value == "True"
    )
    return _guarded(node, ctx, "RANK" if everywhere else "LOCAL_RANK", saved)


def _all_reduce(
    node: cst.SimpleStatementLine, call: cst.Call, target: cst.BaseExpression | None, ctx: FileContext
) -> HookResult:
    """`xm.all_reduce(xm.REDUCE_SUM, t[, scale=s])` -> `dist.all_reduce(t, op=dist.ReduceOp.SUM)`.

    For one tensor torch_xla returns the reduced copy; assigning it to the same name is the
    in-place native call, to another name copies first. A list is reduced in place.
    """
    positional = positional_args(call)
    op = kwarg(call, "reduce_type") or (positional[0] if positional else None)
    inputs = kwarg(call, "inputs") or (positional[1] if len(positional) > 1 else None)
    op_name = (
        (last_name(op.value) if op is not None and type(op.value) is not cst.SimpleString else string_value(op.value))
        if op
        else None
    )
    extra = [
        a for a in call.args if a.keyword is not None and a.keyword.value not in ("reduce_type", "inputs", "scale")
    ]
    if op_name not in _REDUCE_OPS or inputs is None or extra or not ctx.enabled("NM607"):
        todo(ctx, "NM918")
        return node
    dist = code(ctx.module_ref("torch.distributed"))
    tensors = (
        [e.value for e in inputs.value.elements]  # type: ignore[attr-defined]
        if type(inputs.value) in (cst.List, cst.Tuple) and target is None
        else [inputs.value]
    )
    if type(inputs.value) in (cst.List, cst.Tuple) and target is not None:
        todo(ctx, "NM918")
        return node
    scale = kwarg(call, "scale")
    lines: list[str] = []
    if target is not None and code(target) != code(inputs.value):
        lines.append(f"{code(target)} = {code(inputs.value)}.clone()")
        tensors = [target]
    for tensor in tensors:
        lines.append(f"{dist}.all_reduce({code(tensor)}, op={dist}.ReduceOp.{_REDUCE_OPS[op_name]})")
        if scale is not None:
            lines.append(f"{code(tensor)}.mul_({code(scale.value)})")
    ctx.hit("NM607")
    statements = [cst.parse_statement(line) for line in lines]
    statements[0] = statements[0].with_changes(leading_lines=node.leading_lines)
    statements[-1] = statements[-1].with_changes(trailing_whitespace=node.trailing_whitespace)
    return flatten(ctx, statements) if len(statements) > 1 else statements[0]


def _spawn(node: cst.SimpleStatementLine, call: cst.Call, ctx: FileContext) -> HookResult:
    todo(ctx, "NM917")
    positional = positional_args(call)
    fn = kwarg(call, "fn") or (positional[0] if positional else None)
    args = kwarg(call, "args") or (positional[1] if len(positional) > 1 else None)
    if fn is None or not ctx.enabled("NM608") or has_star_kwargs(call):
        return node
    ctx.hit("NM608")
    parts = [_env(ctx, "LOCAL_RANK", 0)]
    if args is not None and type(args.value) is cst.Tuple:
        parts += [code(e.value) for e in args.value.elements]
    elif args is not None:
        parts.append(f"*{code(args.value)}")
    direct = node.with_changes(body=[cst.Expr(cst.parse_expression(f"{code(fn.value)}({', '.join(parts)})"))])
    if _COLLECTIVES.search(ctx.text) and "init_process_group" not in ctx.text:
        # xmp.spawn connected the replicas for xm's collectives; natively that is the process group
        init = cst.parse_statement(f'{code(ctx.module_ref("torch.distributed"))}.init_process_group("neuron")')
        return flatten(
            ctx, [init.with_changes(leading_lines=node.leading_lines), direct.with_changes(leading_lines=[])]
        )
    return direct


def _env_setting(stmt: cst.BaseStatement, names: tuple[str, ...]) -> str | None:
    """The variable a statement sets in `os.environ`, if one of `names`."""
    name = environ_setting(stmt)
    return name if name in names else None


@removable
def xla_only_statement(stmt: cst.BaseStatement, ctx: FileContext) -> Removal | None:
    """Graph cuts, metrics reports, gradient reduction and torch_xla settings have no native meaning."""
    if _env_setting(stmt, _XLA_ENV) is not None:
        return Removal("NM609")
    call = call_statement(stmt)
    if call is None:
        return None
    qualified = ctx.qualify(call.func) or ""
    if qualified in _SYNC or qualified in _METRICS:
        return Removal("NM603")
    if qualified == XM + "reduce_gradients":
        return Removal("NM604")
    if (qualified in (XM + "master_print",) or last_name(call.func) == "print") and _prints_metrics(call, ctx):
        return Removal("NM603")
    return None


@on("If", "NM607")
def repeated_guard(node: cst.If, ctx: FileContext) -> cst.If:
    """`if xm.is_master_ordinal(): xm.save(...)`: both become `LOCAL_RANK == 0` checks, so the
    guard the `save` rewrite adds repeats the one around it; the inner copy goes."""
    if type(node.body) is not cst.IndentedBlock or len(node.body.body) != 1:
        return node
    inner = node.body.body[0]
    if type(inner) is not cst.If or inner.orelse is not None or _has_comment(inner):
        return node
    if code(inner.test) != code(node.test) or not ctx.enabled("NM607"):
        return node
    return node.with_changes(body=node.body.with_changes(body=inner.body.body))


def _has_comment(node: cst.If) -> bool:
    return any(line.comment is not None for line in node.leading_lines)
