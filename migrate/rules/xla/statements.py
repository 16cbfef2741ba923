"""NM601-NM610 PyTorch/XLA (legacy torch-neuronx) -> native TorchNeuron.

Rationale and examples: docs/rules.md (NM6xx); the facts: docs/gaps.md (PyTorch/XLA). TorchNeuron is
eager PyTorch on a `neuron` device: there is no graph to cut (`mark_step`), no device loader,
no `xla` process-group backend, and data parallelism is DDP/FSDP under `torchrun` instead of
`xmp.spawn`. Rank helpers become the environment torchrun sets (`RANK`, `LOCAL_RANK`,
`WORLD_SIZE`), which is also right in a single process. What has no native call (SPMD, XLA
FSDP, `mesh_reduce`) keeps its import and gets TODO NM918.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    HookResult,
    add_kwarg,
    argument,
    call_statement,
    code,
    family_state,
    has_star_kwargs,
    kwarg,
    last_name,
    may_add,
    method_of,
    on,
    positional_args,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
    wrap_long,
)
from migrate.rules.device import is_rank
from migrate.rules.removal import Removal, removable
from migrate.rules.todo_catalogue import flatten, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM601",
        name="xla-imports",
        safety="safe",
        summary="`torch_xla` imports go once nothing uses them.",
        rationale="torch_xla is not installed with TorchNeuron (and must not be: transformers then "
        "takes its XLA code paths). Imports are dropped after the NM6xx rewrites, including "
        "side-effect imports such as `torch_xla.distributed.xla_backend`; one that is still used "
        "stays with TODO NM918. This rule does the dropping, so with only another NM6xx rule "
        "selected the unused import is left in place (as the examples of those rules show).",
        before="import torch\nimport torch_xla\nimport torch_xla.distributed.xla_backend\nx = torch.ones(2)\n",
        after="import torch\nx = torch.ones(2)\n",
    ),
    Rule(
        id="NM602",
        name="xla-device",
        safety="safe",
        summary='`xm.xla_device()` / `torch_xla.device()` / `"xla"` -> the rank\'s NeuronCore.',
        rationale="Under xmp.spawn or torchrun each process owned one core; natively that is the "
        'index-less `torch.device("neuron")`, the process\'s own core whether the runtime shows a rank '
        "only its cores or all of them (NM101), in one process and per rank alike. "
        "`xm.xla_device(n)` keeps its index.",
        before="import torch_xla.core.xla_model as xm\ndevice = xm.xla_device()\n",
        after='import torch\nimport torch_xla.core.xla_model as xm\ndevice = torch.device("neuron")\n',
    ),
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
        id="NM604",
        name="optimizer-step",
        safety="unsafe",
        safety_reason="the call no longer all-reduces gradients; only DDP/FSDP keeps replicas in step (else TODO "
        "NM916)",
        summary="`xm.optimizer_step(opt)` -> `opt.step()`; `xm.reduce_gradients(opt)` is removed.",
        rationale="xm.optimizer_step all-reduced the gradients of data-parallel replicas and then "
        "stepped. DDP/FSDP reduce natively; a multi-process script with neither gets TODO NM916, "
        "since the replicas would otherwise train apart silently.",
        before="import torch_xla.core.xla_model as xm\nxm.optimizer_step(optimizer)\n",
        after="import torch_xla.core.xla_model as xm\noptimizer.step()\n",
    ),
    Rule(
        id="NM605",
        name="mp-device-loader",
        safety="safe",
        summary="`pl.MpDeviceLoader(loader, device)` -> `loader`; the loop moves each batch to `device`.",
        rationale="MpDeviceLoader (and `ParallelLoader(...).per_device_loader(...)`) copied batches "
        "to the XLA device in the background. The plain DataLoader is iterated instead, and the "
        "first statement of each `for` over it moves the batch: `x, y = x.to(device), "
        "y.to(device)`, a dict comprehension for dict batches, `batch.to(device)` otherwise.",
        before="import torch_xla.distributed.parallel_loader as pl\n"
        "train_loader = pl.MpDeviceLoader(loader, device)\nfor x, y in train_loader:\n    step(x, y)\n",
        after="import torch_xla.distributed.parallel_loader as pl\ntrain_loader = loader\nfor x, y in train_loader:\n    x, y = x.to(device), y.to(device)\n    step(x, y)\n",
    ),
    Rule(
        id="NM606",
        name="xla-process-group",
        safety="safe",
        summary='`init_process_group("xla", init_method="xla://")` -> `init_process_group("neuron")`.',
        rationale="`neuron` is TorchNeuron's collective backend; under torchrun the default "
        "`env://` rendezvous applies, so the XLA init method goes.",
        before='import torch.distributed as dist\ndist.init_process_group("xla", init_method="xla://")\n',
        after='import torch.distributed as dist\ndist.init_process_group("neuron")\n',
    ),
    Rule(
        id="NM607",
        name="xla-rank-api",
        safety="safe",
        summary="`xm.master_print`, ordinals, world size, `rendezvous`, `save`, `all_reduce` -> torchrun env / torch.distributed.",
        rationale='`xm.get_ordinal()`/`xr.global_ordinal()` -> `int(os.environ.get("RANK", 0))`, '
        "local ordinal -> `LOCAL_RANK`, world size -> `WORLD_SIZE` (set by torchrun, right in one "
        "process too); `xm.master_print(x)` and `xm.save(obj, path)` run on rank 0 (local rank 0 "
        "for `is_master_ordinal()`/`save`, as in torch_xla); `xm.rendezvous(tag)` -> "
        "`dist.barrier()`; `xm.all_reduce(xm.REDUCE_SUM, t)` -> `dist.all_reduce(t, op=dist.ReduceOp.SUM)`.",
        before='import torch_xla.core.xla_model as xm\nxm.master_print(f"loss {loss}")\n',
        after='import os\nimport torch_xla.core.xla_model as xm\nif int(os.environ.get("RANK", 0)) == 0:\n    print(f"loss {loss}")\n',
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
    Rule(
        id="NM610",
        name="xla-amp",
        safety="unsafe",
        safety_reason="autocast computes in bf16 and the XLA GradScaler becomes a disabled one",
        summary='`torch_xla.amp.autocast`, `torch.autocast("xla")`, syncfree optimizers, XLA GradScaler -> native.',
        rationale='Autocast runs on `device_type="neuron"` in bf16 (stated explicitly, the '
        "defaults follow CUDA); `torch_xla.amp.syncfree.AdamW`/`SGD`/`Adam` are `torch.optim`'s "
        "without the XLA sync trick; a bf16 run needs no loss scaler, so the scaler is disabled.",
        before="import torch_xla.amp\nwith torch_xla.amp.autocast(device):\n    loss = model(x)\n",
        after='import torch\nimport torch_xla.amp\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    loss = model(x)\n',
    ),
)

XM = "torch_xla.core.xla_model."
_DEVICE = {XM + "xla_device", "torch_xla.device"}
_SYNC = {XM + "mark_step", "torch_xla.sync", XM + "wait_device_ops"}
_METRICS = {"torch_xla.debug.metrics.metrics_report", "torch_xla.debug.metrics.short_metrics_report"}
_RANK = {
    XM + "get_ordinal": "RANK",
    "torch_xla.runtime.global_ordinal": "RANK",
    XM + "get_local_ordinal": "LOCAL_RANK",
    "torch_xla.runtime.local_ordinal": "LOCAL_RANK",
    XM + "xrt_world_size": "WORLD_SIZE",
    "torch_xla.runtime.world_size": "WORLD_SIZE",
}
_REDUCE_OPS = {
    "REDUCE_SUM": "SUM",
    "REDUCE_MAX": "MAX",
    "REDUCE_MIN": "MIN",
    "REDUCE_MUL": "PRODUCT",
    "sum": "SUM",
    "max": "MAX",
    "min": "MIN",
    "mul": "PRODUCT",
}
_SPAWN = {"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch"}
_LOADER = "torch_xla.distributed.parallel_loader."
# Handled where the whole statement is seen (or by a parent call), not as a bare call.
_STATEMENT_LEVEL = {
    XM + "master_print",
    XM + "save",
    XM + "all_reduce",
    XM + "rendezvous",
    XM + "reduce_gradients",
    _LOADER + "ParallelLoader",
    *_SYNC,
    *_METRICS,
    *_SPAWN,
}
_BF16_ENV = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")
_XLA_ENV = (*_BF16_ENV, "PJRT_DEVICE", "XLA_IR_DEBUG", "XLA_HLO_DEBUG", "XLA_USE_32BIT_LONG", "XLA_SAVE_TENSORS_FILE")
_MULTI = re.compile(
    r"xla_multiprocessing|\bxmp\.spawn|torch_xla\.launch|world_size|get_ordinal|global_ordinal|init_process_group"
)
_COLLECTIVES = re.compile(
    r"\bxm\.(?:all_reduce|rendezvous|all_gather|reduce_scatter)\b|DistributedDataParallel|\bDDP\("
)
_REDUCED = re.compile(r"DistributedDataParallel|\bDDP\(|\bfully_shard\b|(?<!Xla)FullyShardedDataParallel")


@dataclass
class _State:
    # Nodes this family wrote, by id; each entry holds its node so that no other node reuses the id.
    unwrapped: dict[int, tuple[cst.BaseExpression, cst.BaseExpression]] = field(
        default_factory=dict
    )  # loader -> device
    produced: dict[int, cst.BaseExpression] = field(default_factory=dict)  # rank expressions
    loaders: dict[str, cst.BaseExpression] = field(default_factory=dict)  # loader variable -> device


def _state(ctx: FileContext) -> _State:
    return family_state(ctx, "xla", _State)


def _env(ctx: FileContext, name: str, default: int) -> str:
    return f'int({code(ctx.module_ref("os"))}.environ.get("{name}", {default}))'


def _env_expression(ctx: FileContext, name: str, default: int) -> cst.BaseExpression:
    """The torchrun variable as an expression; remembered so the call holding it can be re-wrapped."""
    node = cst.parse_expression(_env(ctx, name, default))
    _state(ctx).produced[id(node)] = node
    return node


def _multi_process(ctx: FileContext) -> bool:
    return ctx.facts.multi_process or bool(_MULTI.search(ctx.text))


def _device(ctx: FileContext, index: cst.BaseExpression | None) -> cst.BaseExpression:
    """`torch.device("neuron")` (the process's own core, in one process or per rank) or `torch.device("neuron:1")`.

    Under xmp.spawn or torchrun each process owned one core. The index-less device is that core whether
    the runtime shows a rank only its cores or all of them (NM101); `neuron:<LOCAL_RANK>` is not, under the
    first reading.
    """
    torch = code(ctx.module_ref("torch"))
    if index is not None and type(index) is cst.Integer:
        return cst.parse_expression(f'{torch}.device("neuron:{index.value}")')
    if index is not None and not is_rank(index):
        return cst.parse_expression(f'{torch}.device(f"neuron:{{{code(index)}}}")')
    return cst.parse_expression(f'{torch}.device("neuron")')


@on("Call", "NM602", "NM604", "NM605", "NM606", "NM607", "NM610", "NM916", "NM918")
def xla_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    qualified = ctx.qualify(node.func) or ""
    if qualified in _DEVICE and ctx.enabled("NM602"):
        ctx.hit("NM602")
        index = kwarg(node, "n") or argument(node, 0, "index")
        return _device(ctx, index.value if index is not None else None)
    if qualified == "torch.device" or method_of(node, "to"):
        return _xla_literal(node, ctx)
    if qualified == XM + "optimizer_step":
        return _optimizer_step(node, ctx)
    if qualified.startswith(_LOADER) and qualified.rpartition(".")[2] == "MpDeviceLoader" and ctx.enabled("NM605"):
        loader = argument(node, 0, "loader")
        if loader is None or has_star_kwargs(node):  # what a splat passes is unknown: the wrapper stays
            return node
        return _unwrap_loader(node, ctx, loader, argument(node, 1, "device"))
    if method_of(node, "per_device_loader") and type(node.func.value) is cst.Call:  # type: ignore[attr-defined]
        inner = node.func.value  # type: ignore[attr-defined]
        if ctx.qualify(inner.func) == _LOADER + "ParallelLoader" and ctx.enabled("NM605") and positional_args(inner):
            return _unwrap_loader(
                node, ctx, positional_args(inner)[0], positional_args(node)[0] if positional_args(node) else None
            )
    if qualified.endswith("init_process_group") and ctx.enabled("NM606"):
        return _process_group(node, ctx)
    if qualified in _RANK and ctx.enabled("NM607"):
        ctx.hit("NM607")
        return _env_expression(ctx, _RANK[qualified], 1 if _RANK[qualified] == "WORLD_SIZE" else 0)
    if qualified == XM + "is_master_ordinal" and ctx.enabled("NM607"):
        local = kwarg(node, "local")
        global_master = local is not None and type(local.value) is cst.Name and local.value.value == "False"
        ctx.hit("NM607")
        return cst.parse_expression(f"{_env(ctx, 'RANK' if global_master else 'LOCAL_RANK', 0)} == 0")
    if qualified in ("torch_xla.amp.autocast", "torch.autocast", "torch.amp.autocast"):
        return _autocast(node, ctx, qualified)
    if qualified.startswith("torch_xla.amp.syncfree.") and ctx.enabled("NM610"):
        ctx.hit("NM610")
        return node.with_changes(
            func=cst.Attribute(value=ctx.module_ref("torch.optim"), attr=cst.Name(qualified.rpartition(".")[2]))
        )
    if qualified == "torch_xla.amp.GradScaler" and ctx.enabled("NM610"):
        ctx.hit("NM610")
        return cst.parse_expression(f'{code(ctx.module_ref("torch.amp"))}.GradScaler("neuron", enabled=False)')
    if qualified.startswith("torch_xla") and qualified not in _STATEMENT_LEVEL:
        todo(ctx, "NM918")
    produced = _state(ctx).produced
    if produced and any(id(a.value) in produced for a in node.args):
        return wrap_long(node)  # `DistributedSampler(..., rank=int(os.environ.get("RANK", 0)))` grew long
    return node


def _xla_literal(node: cst.Call, ctx: FileContext) -> cst.Call:
    """`torch.device("xla")`, `x.to("xla")` -> the neuron device."""
    positional = positional_args(node)
    if not positional or type(positional[0].value) is not cst.SimpleString or not ctx.enabled("NM602"):
        return node
    text = string_value(positional[0].value) or ""
    if not re.fullmatch(r"xla(:\d+)?", text):
        return node
    ctx.hit("NM602")
    return replace_arg(
        node,
        positional[0],
        positional[0].with_changes(value=with_string_value(positional[0].value, "neuron" + text[3:])),
    )


def _optimizer_step(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    if _multi_process(ctx) and not _REDUCED.search(ctx.text):
        todo(ctx, "NM916")
    optimizer = argument(node, 0, "optimizer")
    if optimizer is None or not ctx.enabled("NM604"):
        return node
    ctx.hit("NM604")
    step = f"{code(optimizer.value)}.step()"
    extra = kwarg(node, "optimizer_args")
    if extra is not None:
        step = f"{code(optimizer.value)}.step(**{code(extra.value)})"
    return cst.parse_expression(step)


def _unwrap_loader(node: cst.Call, ctx: FileContext, loader: cst.Arg, device: cst.Arg | None) -> cst.BaseExpression:
    ctx.hit("NM605")
    result = loader.value
    if device is not None:
        _state(ctx).unwrapped[id(result)] = (result, device.value)
    return result


def _process_group(node: cst.Call, ctx: FileContext) -> cst.Call:
    backend = argument(node, 0, "backend")
    if backend is None or string_value(backend.value) != "xla":
        return node
    ctx.hit("NM606")
    assert type(backend.value) is cst.SimpleString
    node = replace_arg(node, backend, backend.with_changes(value=with_string_value(backend.value, "neuron")))
    method = kwarg(node, "init_method")
    if method is not None and string_value(method.value) == "xla://":
        node = remove_arg(node, method)
    return node


def _autocast(node: cst.Call, ctx: FileContext, qualified: str) -> cst.BaseExpression:
    positional = positional_args(node)
    device = kwarg(node, "device_type") or (positional[0] if positional else None)
    if not ctx.enabled("NM610"):
        return node
    bf16 = f"{code(ctx.module_ref('torch'))}.bfloat16"
    if qualified == "torch_xla.amp.autocast":
        ctx.hit("NM610")
        dtype = kwarg(node, "dtype")
        new = cst.parse_expression(
            f'{code(ctx.module_ref("torch"))}.autocast("neuron", dtype={code(dtype.value) if dtype else bf16})'
        )
        assert type(new) is cst.Call
        return new
    if device is None or string_value(device.value) != "xla":
        return node
    ctx.hit("NM610")
    assert type(device.value) is cst.SimpleString
    node = replace_arg(node, device, device.with_changes(value=with_string_value(device.value, "neuron")))
    if may_add(node, "dtype"):
        node = add_kwarg(node, "dtype", bf16)
    return node


@on("Assign")
def loader_binding(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Remember `train_loader = <unwrapped loader>` so loops over it move their batches."""
    state = _state(ctx)
    unwrapped = state.unwrapped.get(id(node.value))
    if unwrapped is not None and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
        state.loaders[node.targets[0].target.value] = unwrapped[1]
    return node


@on("For", "NM605", "NM918")
def move_batches(node: cst.For, ctx: FileContext) -> cst.For:
    """First statement of a loop over an unwrapped loader: move the batch to the device."""
    state = _state(ctx)
    target: cst.BaseExpression = node.target
    iterator = node.iter
    if (
        type(iterator) is cst.Call
        and type(iterator.func) is cst.Name
        and iterator.func.value == "enumerate"
        and iterator.args
    ):
        iterator = iterator.args[0].value
        if type(target) is cst.Tuple and len(target.elements) == 2:
            target = target.elements[1].value
    unwrapped = state.unwrapped.get(id(iterator))
    device = unwrapped[1] if unwrapped is not None else None
    if device is None and type(iterator) is cst.Name:
        device = state.loaders.get(iterator.value)
    if device is None or not ctx.enabled("NM605") or type(node.body) is not cst.IndentedBlock:
        return node
    move = _move(target, device, node.body)
    if move is None:
        todo(ctx, "NM918", "MpDeviceLoader moved each batch to the device: move the batch with .to(device) here")
        return node
    if node.body.body and code(node.body.body[0]).strip() == move:
        return node
    ctx.hit("NM605")
    return node.with_changes(body=node.body.with_changes(body=[cst.parse_statement(move), *node.body.body]))


def _move(target: cst.BaseExpression, device: cst.BaseExpression, body: cst.IndentedBlock) -> str | None:
    """The statement that moves a loop's batch, by the shape of the loop target."""
    dev = code(device)
    if type(target) is cst.Tuple and all(type(e.value) is cst.Name for e in target.elements):
        names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
        return f"{', '.join(names)} = {', '.join(f'{n}.to({dev})' for n in names)}"
    if type(target) is not cst.Name:
        return None
    name = target.value
    text = code(body)
    if re.search(rf"\b{name}\s*\[\s*[\"']|\*\*{name}\b|\b{name}\.(?:items|keys|values)\(", text):
        return f"{name} = {{k: v.to({dev}) for k, v in {name}.items()}}"
    if re.search(rf"\b{name}\s*\[\s*\d", text):
        return f"{name} = [t.to({dev}) for t in {name}]"
    return f"{name} = {name}.to({dev})"


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
    """The variable a statement sets in `os.environ` (`os.environ["X"] = ...`, `setdefault`), if one of `names`."""
    if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    key: cst.BaseExpression | None = None
    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Subscript:
        sub = small.targets[0].target
        if last_name(sub.value) == "environ" and len(sub.slice) == 1 and type(sub.slice[0].slice) is cst.Index:
            key = sub.slice[0].slice.value
    elif type(small) is cst.Expr and type(small.value) is cst.Call and method_of(small.value, "setdefault"):
        func = small.value.func
        if type(func) is cst.Attribute and last_name(func.value) == "environ" and small.value.args:
            key = small.value.args[0].value
    name = string_value(key) if key is not None else None
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
