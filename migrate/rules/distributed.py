"""NM401/NM403 distributed: nccl -> neuron, `ddp_backend` (docs/rules.md NM4xx).

`DistributedDataParallel(model, device_ids=[r], output_device=r)` is left as written: DDP
takes its device type from the module's parameters (on `neuron:r` once NM101/NM106 moved
it), and with `device_ids` it moves each CPU input batch to that device before the forward.
Dropping the ids (the retired NM402) stopped that move and made the forward mix `neuron:r`
and CPU tensors.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import (
    argument,
    callee_name,
    kwarg,
    on,
    remove_arg,
    replace_arg,
    string_value,
    with_string_value,
)
from migrate.rules.settings import setting, through

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM401",
        name="nccl-backend",
        safety="safe",
        summary='Process-group backend `"nccl"` -> `"neuron"`.',
        rationale='`dist.init_process_group(backend="neuron")` is the Neuron collective backend. '
        'The positional and keyword forms of `init_process_group`, `backend = "nccl"` constants '
        '(nanoGPT), argparse `--backend`/`--dist_backend` defaults and `"nccl" if ... else '
        '"gloo"` are rewritten; the guard follows through NM104.',
        before='import torch.distributed as dist\ndist.init_process_group("nccl")\n',
        after='import torch.distributed as dist\ndist.init_process_group("neuron")\n',
    ),
    Rule(
        id="NM403",
        name="ddp-backend-arg",
        safety="safe",
        summary='Drop `ddp_backend="nccl"` from TrainingArguments and TRL configs.',
        rationale='accelerate\'s Neuron branch sets `backend="neuron"` itself; an explicit nccl '
        "would be wrong on Trainium and is dropped for clarity.",
        before='args = TrainingArguments(output_dir="out", ddp_backend="nccl")\n',
        after='args = TrainingArguments(output_dir="out")\n',
    ),
)


def _nccl(node: cst.BaseExpression, ctx: FileContext) -> cst.BaseExpression | None:
    if type(node) is cst.SimpleString and string_value(node) == "nccl":
        return with_string_value(node, "neuron")
    return None


setting("NM401", r"backend|dist_backend|distributed_backend|process_group_backend", through(_nccl), kwargs=False)


@on("Call", "NM401", "NM403")
def distributed_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    qualified = ctx.qualify(node.func) or ""
    if qualified.endswith("init_process_group") and ctx.enabled("NM401"):
        arg = argument(node, 0, "backend")
        if arg is not None:
            new = through(_nccl)(arg.value, ctx)
            if new is not None:
                ctx.hit("NM401")
                return replace_arg(node, arg, arg.with_changes(value=new))
        return node
    ddp_backend = kwarg(node, "ddp_backend")
    if (
        ddp_backend is not None
        and through(_nccl)(ddp_backend.value, ctx) is not None
        and ctx.enabled("NM403")
        and (callee_name(node) or "").endswith(("Arguments", "Config"))
    ):
        ctx.hit("NM403")
        return remove_arg(node, ddp_backend)
    return node
