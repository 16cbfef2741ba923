"""NM104 `torch.cuda.*` API calls -> `torch.neuron.*` / `torch.accelerator.*` (catalogue 3.3).

Names are resolved through the script's imports, so `from torch import cuda; cuda.empty_cache()`
and `import torch as T; T.cuda.synchronize()` are found too. Calls with no Neuron equivalent
(streams, events, graphs, nvtx, capability checks) are left to NM903/NM904 as TODOs.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import on
from migrate.rules.references import references
from migrate.rules.todo_catalogue import CUDA_ONLY_BLOCK

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM104",
        name="cuda-api",
        safety="safe",
        summary="`torch.cuda.*` calls -> their `torch.neuron.*` or `torch.accelerator.*` equivalent.",
        rationale="transformers and accelerate already call `torch.neuron.is_available`, "
        "`device_count`, `set_device`, `current_device`, `manual_seed_all`, rng state, "
        "`empty_cache` and the allocated-memory stats, so those keep their names. Reserved-memory "
        "stats, `mem_get_info` and `synchronize` go through the generic `torch.accelerator` API "
        "(torch >= 2.6), whose Neuron support does not depend on torch-neuronx naming. "
        "`torch.cuda.OutOfMemoryError` is `torch.OutOfMemoryError`.",
        before="import torch\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\ntorch.cuda.synchronize()\n",
        after="import torch\nif torch.neuron.is_available():\n    torch.neuron.empty_cache()\n"
        "torch.accelerator.synchronize()\n",
    ),
)

# torch.cuda.<name> -> (module, new name)
_MAP: dict[str, tuple[str, str]] = {
    **{
        n: ("torch.neuron", n)
        for n in (
            "is_available",
            "device_count",
            "set_device",
            "current_device",
            "get_device_name",
            "get_device_properties",
            "is_bf16_supported",
            "empty_cache",
            "memory_allocated",
            "max_memory_allocated",
            "reset_peak_memory_stats",
            "manual_seed_all",
            "get_rng_state",
            "set_rng_state",
            "get_rng_state_all",
            "set_rng_state_all",
        )
    },
    "manual_seed": ("torch.neuron", "manual_seed_all"),
    "synchronize": ("torch.accelerator", "synchronize"),
    "memory_reserved": ("torch.accelerator", "memory_reserved"),
    "max_memory_reserved": ("torch.accelerator", "max_memory_reserved"),
    "memory_stats": ("torch.accelerator", "memory_stats"),
    "mem_get_info": ("torch.accelerator", "get_memory_info"),
    "reset_max_memory_allocated": ("torch.accelerator", "reset_peak_memory_stats"),
}


def _target(qualified: str | None) -> tuple[str, str] | None:
    if qualified is None or not qualified.startswith("torch.cuda."):
        return None
    return _MAP.get(qualified[len("torch.cuda.") :])


@on("Call")
def cuda_api_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    if not ctx.enabled("NM104"):
        return node
    target = _target(ctx.qualify(node.func))
    if target is None:
        return node
    module, name = target
    ctx.hit("NM104")
    return node.with_changes(func=cst.Attribute(value=ctx.module_ref(module), attr=cst.Name(name)))


@on("Attribute")
def cuda_oom(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    if (
        node.attr.value == "OutOfMemoryError"
        and ctx.enabled("NM104")
        and ctx.qualify(node) == "torch.cuda.OutOfMemoryError"
    ):
        ctx.hit("NM104")
        return cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name("OutOfMemoryError"))
    return node


class _CudaCalls(cst.CSTVisitor):
    """Collects the `torch.cuda.*` calls left in a block (those NM104 had no equivalent for)."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.found: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func) or ""
        if qualified.startswith("torch.cuda."):
            self.found.append(qualified)


class _Unguard(cst.CSTTransformer):
    """`torch.neuron.is_available()` -> `torch.cuda.is_available()` inside one `if` test."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.reverted = 0

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.ctx.qualify(updated.func) != "torch.neuron.is_available":
            return updated
        if type(updated.func) is not cst.Attribute or type(updated.func.value) is not cst.Attribute:
            return updated  # `from torch import neuron; neuron.is_available()`: the user's own spelling
        self.reverted += 1
        neuron = updated.func.value  # `<torch>.neuron`, as NM104 wrote it
        return updated.with_changes(func=updated.func.with_changes(value=neuron.with_changes(attr=cst.Name("cuda"))))


@on("If")
def cuda_only_block(node: cst.If, ctx: FileContext) -> cst.If:
    """Never make a CUDA-only call reachable: `if torch.cuda.is_available(): print(torch.cuda.memory_summary())`.

    NM104 renames the guard, but a call in its body with no Neuron equivalent (memory_summary,
    streams, events) would then run on Neuron and fail. Such a guard keeps its CUDA test (False
    on Neuron, so the block is skipped as it was on any machine without CUDA) and gets a TODO.
    """
    if not ctx.enabled("NM104"):
        return node
    calls = _CudaCalls(ctx)
    node.body.visit(calls)
    if not calls.found:
        return node
    unguard = _Unguard(ctx)
    test = node.test.visit(unguard)
    if not unguard.reverted:
        return node
    frame = ctx.frames[-1]
    frame.hits["NM104"] -= unguard.reverted
    if frame.hits["NM104"] <= 0:
        del frame.hits["NM104"]
    if ctx.enabled("NM903"):
        names = ", ".join(sorted({q.rpartition(".")[2] for q in calls.found}))
        ctx.todo("NM903", CUDA_ONLY_BLOCK.format(names=names))
    return node.with_changes(test=test)


@on("Module")
def unused_cuda_import(node: cst.Module, ctx: FileContext) -> cst.Module:
    """`from torch import cuda` goes once NM104 rewrote every `cuda.*` use (now `torch.neuron.*`)."""
    if ctx.imports.local_name_for("torch.cuda") is None or not ctx.frames[0].hits.get("NM104"):
        return node
    body = list(node.body)
    for index, stmt in enumerate(body):
        if type(stmt) is not cst.SimpleStatementLine or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if type(small) is not cst.ImportFrom or isinstance(small.names, cst.ImportStar) or small.relative:
            continue
        if not (type(small.module) is cst.Name and small.module.value == "torch"):
            continue
        names = list(small.names)
        cuda = [a for a in names if type(a.name) is cst.Name and a.name.value == "cuda"]
        if not cuda:
            continue
        asname = cuda[0].asname
        local = asname.name.value if asname is not None and type(asname.name) is cst.Name else "cuda"
        if local in references(body[:index] + body[index + 1 :]):
            return node
        keep = [a for a in names if a is not cuda[0]]
        if keep:
            keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            body[index] = stmt.with_changes(body=[small.with_changes(names=keep)])
        elif index + 1 < len(body):
            following = body[index + 1]
            body[index + 1] = following.with_changes(leading_lines=[*stmt.leading_lines, *following.leading_lines])
            del body[index]
        else:
            del body[index]
        return node.with_changes(body=body)
    return node
