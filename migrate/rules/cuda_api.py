"""NM104 `torch.cuda.*` API calls -> `torch.neuron.*` / `torch.accelerator.*` (catalogue 3.3).

Names are resolved through the script's imports, so `from torch import cuda; cuda.empty_cache()`
and `import torch as T; T.cuda.synchronize()` are found too. Calls with no Neuron equivalent
(streams, events, graphs, nvtx, capability checks) are left to NM903/NM904 as TODOs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import code, family_state, method_of, on, positional_args, string_value, with_string_value
from migrate.rules.device import is_device_side, is_rank, rank_core
from migrate.rules.references import bindings, references
from migrate.rules.retired import retire
from migrate.rules.todo_catalogue import CUDA_ONLY_BLOCK, CUDA_ONLY_NAMES, CUDA_RUNTIME_MESSAGES, todo

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM104",
        name="cuda-api",
        safety="safe",
        summary="`torch.cuda.*` calls -> their `torch.neuron.*` or `torch.accelerator.*` equivalent.",
        rationale="transformers and accelerate already call `torch.neuron.is_available`, "
        "`device_count`, `set_device`, `current_device`, `manual_seed_all`, rng state, "
        "`empty_cache` and the allocated-memory stats, so those keep their names. The other memory "
        "statistics (`memory_reserved`, `max_memory_reserved`, `memory_stats`, `memory_summary`, "
        "`memory_snapshot`, the resets; `reset_max_memory_allocated` is `reset_peak_memory_stats`) are TorchNeuron's caching "
        "allocator's, read through the same `torch.neuron` module (its memory-profiling guide), which "
        "the dry run's device module has too; the `torch.accelerator` memory functions work on Neuron too "
        "(Neuron 2.34), and the guide says to call `torch.neuron.synchronize()` before reading a statistic. "
        "`mem_get_info` (which `torch.neuron` lacks, transformers "
        "#47029) and `synchronize` go through the generic `torch.accelerator` API, and so does the device-generic "
        "`getattr(torch, device_type, torch.cuda).mem_get_info()` (or `torch.get_device_module(...)`) where "
        "`device_type` is the current accelerator's (`torch.accelerator.current_accelerator().type`); another "
        "device type gets NM935's TODO. "
        "`torch.cuda.OutOfMemoryError` is `torch.OutOfMemoryError`. A bf16 readiness check that also "
        "demands CUDA (`torch.version.cuda and torch.cuda.is_bf16_supported() and dist.is_nccl_available() "
        "and nccl.version() >= (2, 10)`) keeps only its bf16 test: NeuronCores compute in bf16 and need no "
        "NCCL.",
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
            "memory_reserved",
            "max_memory_reserved",
            "memory_stats",
            "memory_summary",
            "memory_snapshot",
            "reset_peak_memory_stats",
            "reset_accumulated_memory_stats",
            "manual_seed_all",
            "get_rng_state",
            "set_rng_state",
            "get_rng_state_all",
            "set_rng_state_all",
        )
    },
    "manual_seed": ("torch.neuron", "manual_seed_all"),
    "synchronize": ("torch.accelerator", "synchronize"),
    "mem_get_info": ("torch.accelerator", "get_memory_info"),
    "reset_max_memory_allocated": ("torch.neuron", "reset_peak_memory_stats"),
}


def _target(qualified: str | None) -> tuple[str, str] | None:
    if qualified is None or not qualified.startswith("torch.cuda."):
        return None
    return _MAP.get(qualified[len("torch.cuda.") :])


@on("Attribute", "NM104")
def cuda_api_reference(node: cst.Attribute, ctx: FileContext) -> cst.BaseExpression:
    """`torch.cuda.X` -> its Neuron equivalent, called or not: `atexit.register(torch.cuda.empty_cache)` and
    `sync = torch.cuda.synchronize` are references to the same function as a call is."""
    attr = node.attr.value
    if attr not in _MAP and attr != "OutOfMemoryError" or not ctx.enabled("NM104"):
        return node
    qualified = ctx.qualify(node)
    if qualified == "torch.cuda.OutOfMemoryError":
        ctx.hit("NM104")
        return cst.Attribute(value=ctx.module_ref("torch"), attr=cst.Name("OutOfMemoryError"))
    target = _target(qualified)
    if target is None:
        return node
    module, name = target
    ctx.hit("NM104")
    return cst.Attribute(value=ctx.module_ref(module), attr=cst.Name(name))


@on("Call", "NM104", "NM106")
def cuda_api_call(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """A call of a name imported from `torch.cuda` (`from torch.cuda import empty_cache`), and NM106's
    `set_device` of a rank (attributes are renamed by `cuda_api_reference`, before their call is left)."""
    if type(node.func) is cst.Name and ctx.enabled("NM104"):
        qualified = ctx.qualify(node.func)
        target = _target(qualified)
        if qualified is not None and target is not None:
            module, name = target
            ctx.hit("NM104")
            retire(ctx, qualified)  # `from torch.cuda import empty_cache` goes with its last use
            node = node.with_changes(func=cst.Attribute(value=ctx.module_ref(module), attr=cst.Name(name)))
    if len(node.args) == 1 and not node.args[0].star and ctx.enabled("NM106"):
        index = node.args[0].value
        if ctx.qualify(node.func) == "torch.neuron.set_device" and is_rank(index):
            # the rank's own core under either reading of per-rank visibility (NM106): index 0 where a rank
            # sees only its cores, the rank where it sees all; the index-less "neuron" devices follow it
            ctx.hit("NM106")
            node = node.with_changes(args=[node.args[0].with_changes(value=rank_core(index, ctx))])
    return node


# `device_type = torch.accelerator.current_accelerator().type` (or `current_accelerator(True)`): the names a
# file binds to the current accelerator's type; `_memory_module` asks that a name is bound to nothing else.
_BINDING = r"^[ \t]*{name}[ \t]*(?::[^=\n]*)?=(?!=)([^\n]*)"
_ACCELERATOR_TYPE = re.compile(r"current_accelerator\([^)]*\)\s*\.\s*type\b")


def _is_accelerator_type(node: cst.BaseExpression | None, ctx: FileContext) -> bool:
    """`torch.accelerator.current_accelerator().type`, no argument at all, or a name the file binds only to that."""
    if node is None:
        return True
    text = code(node).strip()
    found = _ACCELERATOR_TYPE.search(text)
    if found is not None and found.end() == len(text):
        return True
    if type(node) is not cst.Name:
        return False
    values = re.findall(_BINDING.format(name=re.escape(node.value)), ctx.text, re.M)
    return bool(values) and all(_ACCELERATOR_TYPE.search(value) for value in values)


def _memory_module(node: cst.BaseExpression, ctx: FileContext) -> bool | None:
    """For a device module picked at run time, `getattr(torch, device_type[, torch.cuda])` or
    `torch.get_device_module(...)`: whether it is the current accelerator's; None for any other expression."""
    if type(node) is not cst.Call or any(arg.star for arg in node.args):
        return None
    positional = positional_args(node)
    kind: cst.BaseExpression | None
    if type(node.func) is cst.Name and node.func.value == "getattr" and len(positional) >= 2:
        if ctx.qualify(positional[0].value) != "torch":
            return None
        kind = positional[1].value
    elif ctx.qualify(node.func) == "torch.get_device_module":
        kind = positional[0].value if positional else None
    else:
        return None
    return _is_accelerator_type(kind, ctx)


@on("Call", "NM104", "NM935")
def device_module_memory_info(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    """NM104 for device-generic code: `getattr(torch, device_type, torch.cuda).mem_get_info()`, with `device_type`
    the current accelerator's, is `torch.accelerator.get_memory_info()` (`torch.neuron` has no `mem_get_info`);
    a device type the file does not tie to the current accelerator gets NM935's TODO (issue #41)."""
    if not method_of(node, "mem_get_info") or type(node.func) is not cst.Attribute:
        return node
    found = _memory_module(node.func.value, ctx)
    if found is None:
        return node
    if not found or any(arg.star or (arg.keyword and arg.keyword.value != "device") for arg in node.args):
        todo(ctx, "NM935")
        return node
    if not ctx.enabled("NM104"):
        return node
    ctx.hit("NM104")
    args = [arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for arg in node.args]
    function = cst.Attribute(value=ctx.module_ref("torch.accelerator"), attr=cst.Name("get_memory_info"))
    return node.with_changes(func=function, args=args)


# Operands of a bf16-readiness check that only CUDA can pass: `torch.version.cuda` (None elsewhere), NCCL.
_CUDA_GATES = ("torch.version.cuda", "torch.distributed.is_nccl_available", "torch.cuda.nccl")
_BF16 = frozenset({"torch.cuda.is_bf16_supported", "torch.neuron.is_bf16_supported"})


class _Names(cst.CSTVisitor):
    """The qualified names an expression reads."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.found: set[str] = set()

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        qualified = self.ctx.qualify(node)
        if qualified is not None:
            self.found.add(qualified)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        qualified = self.ctx.qualify(node)
        if qualified is not None:
            self.found.add(qualified)


def _reads(node: cst.BaseExpression, ctx: FileContext) -> set[str]:
    names = _Names(ctx)
    node.visit(names)
    return names.found


def _and_operands(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`a and b and c` -> `[a, b, c]` (libcst nests the chain to the left); a parenthesized part is one operand."""
    if type(node) is cst.BooleanOperation and type(node.operator) is cst.And and not node.lpar:
        return [*_and_operands(node.left), node.right]
    return [node]


@on("BooleanOperation", "NM104", "NM903")
def bf16_gate(node: cst.BooleanOperation, ctx: FileContext) -> cst.BaseExpression:
    """`torch.version.cuda and torch.cuda.is_bf16_supported() and dist.is_nccl_available() and nccl.version() >= (2, 10)`
    (llama-recipes' `bf16_ready`) -> `torch.neuron.is_bf16_supported()`.

    On Neuron `torch.version.cuda` is None and NCCL does not exist, so the check kept bf16 off even where
    NM104 renamed its `is_bf16_supported`; NeuronCores compute in bf16 and their collectives are the
    `neuron` backend, which needs no NCCL version. Only a chain that tests bf16 support loses these operands.
    """
    if type(node.operator) is not cst.And or not ctx.enabled("NM104"):
        return node
    operands = [*_and_operands(node.left), node.right]  # the chain's own parentheses are kept below
    reads = [_reads(operand, ctx) for operand in operands]
    if not any(found & _BF16 for found in reads):
        return node
    keep = [o for o, found in zip(operands, reads) if not any(q.startswith(_CUDA_GATES) for q in found)]
    if not keep or len(keep) == len(operands):
        return node
    ctx.hit("NM104")
    if any(q.startswith("torch.cuda.nccl") for found in reads for q in found):
        retire(ctx, "torch.cuda.nccl")
        nccl_todo = ("NM903", CUDA_RUNTIME_MESSAGES["nccl"])
        if nccl_todo in ctx.frames[-1].todos:
            ctx.frames[-1].todos.remove(nccl_todo)
    new = keep[0]
    for operand in keep[1:]:
        new = cst.BooleanOperation(left=new, operator=cst.And(), right=operand)
    return new.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else new


_DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel"})


class _CudaCalls(cst.CSTVisitor):
    """Collects the CUDA-only calls left in a block: `torch.cuda.*` (those NM104 had no equivalent for) and
    `DataParallel(...)`, whose scatter is CUDA's (NM926)."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.found: list[str] = []

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.ctx.qualify(node.func) or ""
        if qualified.startswith("torch.cuda.") or qualified in _DATA_PARALLEL:
            self.found.append(qualified)


@dataclass
class _CudaOnlyNames:
    """Names bound in blocks kept behind a CUDA check (`start, end = torch.cuda.Event(...), ...`): a later
    guarded block that reads them (`end.record()`) would fail on Neuron, so it keeps its CUDA check too."""

    names: set[str] = field(default_factory=set)


class _Unguard(cst.CSTTransformer):
    """Puts back the CUDA test NM104/NM103 renamed in one `if` test: `torch.neuron.is_available()`,
    `torch.neuron.device_count()` -> `torch.cuda.*`; `device.type == "neuron"` -> `"cuda"`."""

    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.reverted: Counter[str] = Counter()

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if self.ctx.qualify(updated.func) not in ("torch.neuron.is_available", "torch.neuron.device_count"):
            return updated
        if type(updated.func) is not cst.Attribute or type(updated.func.value) is not cst.Attribute:
            return updated  # `from torch import neuron; neuron.is_available()`: the user's own spelling
        self.reverted["NM104"] += 1
        neuron = updated.func.value  # `<torch>.neuron`, as NM104 wrote it
        return updated.with_changes(func=updated.func.with_changes(value=neuron.with_changes(attr=cst.Name("cuda"))))

    def leave_Comparison(self, original: cst.Comparison, updated: cst.Comparison) -> cst.Comparison:
        if len(updated.comparisons) != 1:
            return updated
        target = updated.comparisons[0]
        left, right = updated.left, target.comparator
        if type(right) is cst.SimpleString and is_device_side(left) and _renamed(right):
            self.reverted["NM103"] += 1
            return updated.with_changes(comparisons=[target.with_changes(comparator=_cuda(right))])
        if type(left) is cst.SimpleString and is_device_side(right) and _renamed(left):
            self.reverted["NM103"] += 1
            return updated.with_changes(left=_cuda(left))
        return updated


def _renamed(node: cst.SimpleString) -> bool:
    return (string_value(node) or "").split(":")[0] == "neuron"


def _cuda(node: cst.SimpleString) -> cst.SimpleString:
    return with_string_value(node, "cuda" + (string_value(node) or "")[len("neuron") :])


@dataclass
class _DeviceFlags:
    """Flags bound to a device-type test NM103 renamed (`use_cuda = device.type == "cuda"`), and those of them
    that guard a CUDA-only block, whose test must stay CUDA's (`cuda_only_block`, `keep_device_flags`)."""

    renamed: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)


def _flag_name(node: cst.Assign) -> str | None:
    """`use_cuda` of `use_cuda = <a device-type test NM103 renamed>`."""
    if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Name:
        return None
    return node.targets[0].target.value


@on("Assign", "NM103", "NM104")
def device_flag(node: cst.Assign, ctx: FileContext) -> cst.Assign:
    """Note `use_cuda = device.type == "cuda"` once NM103 renamed it: a later `if use_cuda:` is a device test."""
    hits = ctx.frames[-1].hits  # only a test renamed in this statement: most assignments are not read further
    if not (hits.get("NM103") or hits.get("NM104")):
        return node
    name = _flag_name(node)
    if name is not None and ctx.enabled("NM104"):
        unguard = _Unguard(ctx)
        node.value.visit(unguard)
        if unguard.reverted:
            family_state(ctx, "device-flags", _DeviceFlags).renamed.add(name)
    return node


@on("If", "NM104", "NM903")
def cuda_only_block(node: cst.If, ctx: FileContext) -> cst.If:
    """Never make a CUDA-only call reachable: `if torch.cuda.is_available(): print(torch.cuda.memory_summary())`.

    NM104 renames the guard, but a call in its body with no Neuron equivalent (memory_summary,
    streams, events) would then run on Neuron and fail. Such a guard keeps its CUDA test (False
    on Neuron, so the block is skipped as it was on any machine without CUDA) and gets a TODO.
    Guards by device type (`device.type == "cuda"`, renamed by NM103) and by device count
    (`torch.cuda.device_count() > 1`) get the same check, and `nn.DataParallel` is CUDA-only too
    (NM926): a script that ran on Neuron as written (`device = torch.accelerator.current_accelerator()`,
    its CUDA branch wrapping the model in DataParallel) keeps running there.
    """
    if not ctx.enabled("NM104"):
        return node
    # The test first: it is small, and only a test NM104/NM103 renamed makes the body worth reading. Reading
    # the body of every `if` re-walked each nested block once per enclosing `if`.
    unguard = _Unguard(ctx)
    test = node.test.visit(unguard)
    flags = family_state(ctx, "device-flags", _DeviceFlags)
    guarding = references([node.test]) & flags.renamed if flags.renamed else set()
    if not unguard.reverted and not guarding:
        return node
    calls = _CudaCalls(ctx)
    node.body.visit(calls)
    kept = family_state(ctx, "cuda-only-names", _CudaOnlyNames)
    own = bindings(node.body)
    needs = sorted((references([node.body]) - own) & kept.names)
    if not calls.found and not needs:
        return node
    kept.names |= own
    flags.kept |= guarding  # `keep_device_flags` puts their CUDA test back where they are bound
    frame = ctx.frames[-1]
    for rule_id, count in unguard.reverted.items():
        frame.hits[rule_id] -= count
        if frame.hits[rule_id] <= 0:
            del frame.hits[rule_id]
    cuda_calls = sorted({q.rpartition(".")[2] for q in calls.found if q not in _DATA_PARALLEL})
    if cuda_calls and ctx.enabled("NM903"):
        ctx.todo("NM903", CUDA_ONLY_BLOCK.format(names=", ".join(cuda_calls)))
    elif needs and ctx.enabled("NM903"):
        ctx.todo("NM903", CUDA_ONLY_NAMES.format(names=", ".join(needs)))
    return node.with_changes(test=test)


class _KeepFlags(cst.CSTTransformer):
    """Puts the CUDA test back into the assignments of the flags in `names`, counting what it reverted."""

    def __init__(self, ctx: FileContext, names: set[str]) -> None:
        super().__init__()
        self.ctx = ctx
        self.names = names
        self.reverted: Counter[str] = Counter()

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign:
        if _flag_name(updated) not in self.names:
            return updated
        unguard = _Unguard(self.ctx)
        value = updated.value.visit(unguard)
        self.reverted.update(unguard.reverted)
        return updated.with_changes(value=value)


@on("Module")
def keep_device_flags(node: cst.Module, ctx: FileContext) -> cst.Module:
    """`use_cuda = device.type == "cuda"` keeps its CUDA test when an `if use_cuda:` guards CUDA-only code.

    NM103 renamed the test where it was bound, before the blocks it guards were read; a block calling
    `torch.cuda.Event` would then run on Neuron and fail, where the original took its other branch (issue #41).
    The flag stays CUDA's (False on Neuron, as on any machine without CUDA) and the block has NM903's TODO.
    """
    flags = family_state(ctx, "device-flags", _DeviceFlags)
    if not flags.kept:
        return node
    keep = _KeepFlags(ctx, flags.kept)
    new = node.visit(keep)
    assert type(new) is cst.Module
    hits = ctx.frames[0].hits
    for rule_id, count in keep.reverted.items():
        hits[rule_id] -= count
        if hits[rule_id] <= 0:
            del hits[rule_id]
    return new


@on("Module", "NM104")
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
