"""NM602, NM604, NM606, NM607, NM610: torch_xla calls with a native counterpart: the XLA device is the
neuron device, `xm.optimizer_step` is `optimizer.step()` (with a TODO where no DDP/FSDP reduces the gradients),
the `xla` process-group backend is `neuron`, rank helpers read torchrun's environment, XLA autocast is
`torch.autocast("neuron")`; what has none keeps a TODO.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    add_kwarg,
    argument,
    code,
    has_star_kwargs,
    kwarg,
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
from migrate.rules.todo_catalogue import todo
from migrate.rules.xla.names import _DEVICE, _LOADER, _RANK, _REDUCED, _STATEMENT_LEVEL, XM
from migrate.rules.xla.state import _env, _env_expression, _multi_process, _state

RULES: tuple[Rule, ...] = (
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
