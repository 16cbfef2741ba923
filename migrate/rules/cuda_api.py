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
        before='import torch\nif torch.cuda.is_available():\n    torch.cuda.empty_cache()\n'
        'torch.cuda.synchronize()\n',
        after='import torch\nif torch.neuron.is_available():\n    torch.neuron.empty_cache()\n'
        'torch.accelerator.synchronize()\n',
    ),
)

# torch.cuda.<name> -> (module, new name)
_MAP: dict[str, tuple[str, str]] = {
    **{n: ("torch.neuron", n) for n in (
        "is_available", "device_count", "set_device", "current_device", "get_device_name",
        "get_device_properties", "is_bf16_supported", "empty_cache", "memory_allocated",
        "max_memory_allocated", "reset_peak_memory_stats", "manual_seed_all", "get_rng_state",
        "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    )},
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
    return _MAP.get(qualified[len("torch.cuda."):])


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
    if node.attr.value == "OutOfMemoryError" and ctx.enabled("NM104") and ctx.qualify(node) == "torch.cuda.OutOfMemoryError":
        ctx.hit("NM104")
        return cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name("OutOfMemoryError"))
    return node
