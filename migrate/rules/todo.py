"""NM901-NM909: find what cannot migrate (CUDA-only packages and runtime APIs) and leave its TODO.

These constructs have no faithful automatic rewrite; the hooks here only detect them. The TODO
texts, examples and fix safety are entries of `migrate.rules.todo_catalogue`; each rule is
documented in docs/rules.md (NM9xx).
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import bnb_bits, callee_name, kwarg, on
from migrate.rules.todo_catalogue import BNB_LEFT, CUDA_RUNTIME_MESSAGES, quantized_load_message, todo

RULES: tuple[Rule, ...] = ()  # its rules (NM901-NM909) are `Rule`s of the TODO catalogue (`todo_catalogue/cuda.py`)

# top-level package imported -> TODO id
_PACKAGES = {
    "vllm": "NM901",
    "deepspeed": "NM902",
    "triton": "NM905",
    "apex": "NM905",
    "unsloth": "NM906",
    "unsloth_zoo": "NM906",
    "flash_attn": "NM907",
    "liger_kernel": "NM907",
    "auto_gptq": "NM908",
    "awq": "NM908",
    "gptqmodel": "NM908",
    "bitsandbytes": "NM908",
}
_CUDA_RUNTIME = (
    "Event",
    "Stream",
    "stream",
    "current_stream",
    "default_stream",
    "graph",
    "CUDAGraph",
    "graphs",
    "nvtx",
    "nccl",
    "ipc_collect",
    "cudart",
    "jiterator",
    "make_graphed_callables",
)


# an import of one of these packages gets its own text, not the rule's (NM908's is about a quantized load)
_IMPORT_MESSAGES = {"bitsandbytes": BNB_LEFT}


@on("Import", "NM901", "NM902", "NM905", "NM906", "NM907", "NM908")
def import_todo(node: cst.Import, ctx: FileContext) -> cst.Import:
    for alias in node.names:
        head = cst.Module([]).code_for_node(alias.name).split(".")[0]
        if head in _PACKAGES:
            todo(ctx, _PACKAGES[head], _IMPORT_MESSAGES.get(head))
    return node


@on("ImportFrom", "NM901", "NM902", "NM905", "NM906", "NM907", "NM908")
def import_from_todo(node: cst.ImportFrom, ctx: FileContext) -> cst.ImportFrom:
    if node.module is not None and not node.relative:
        head = cst.Module([]).code_for_node(node.module).split(".")[0]
        if head in _PACKAGES:
            todo(ctx, _PACKAGES[head], _IMPORT_MESSAGES.get(head))
    return node


@on("Call", "NM902", "NM903", "NM904", "NM905", "NM908", "NM909", "NM926")
def call_todo(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    qualified = ctx.qualify(node.func) or ""
    if qualified.startswith("torch.cuda."):
        rest = qualified[len("torch.cuda.") :]
        if rest.split(".")[0] in _CUDA_RUNTIME:
            todo(ctx, "NM903", CUDA_RUNTIME_MESSAGES.get(rest.split(".")[0]))
        elif rest == "get_device_capability" and ctx.enabled("NM904"):
            todo(ctx, "NM904")
            return cst.parse_expression("(8, 0)")  # it raises without CUDA: the TODO says what stands in
        elif rest == "get_arch_list":
            todo(ctx, "NM904")  # returns [] without CUDA: nothing crashes, the check is still meaningless
    elif qualified.startswith("torch.utils.cpp_extension.") or qualified.startswith("apex."):
        todo(ctx, "NM905")
    elif qualified in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel"):
        todo(ctx, "NM926")
    name = callee_name(node)
    if name == "BitsAndBytesConfig":
        todo(ctx, "NM908", quantized_load_message(bnb_bits(node)))
    elif name in ("GPTQConfig", "AwqConfig", "HqqConfig", "TorchAoConfig", "FbgemmFp8Config"):
        todo(ctx, "NM908", quantized_load_message(name))
    if kwarg(node, "max_memory") is not None and name == "from_pretrained":
        todo(ctx, "NM909")
    deepspeed = kwarg(node, "deepspeed")
    if (
        deepspeed is not None
        and (name or "").endswith(("Arguments", "Config"))
        and not (type(deepspeed.value) is cst.Name and deepspeed.value.value == "None")
    ):
        todo(ctx, "NM902")
    return node


@on("Attribute", "NM903")
def attribute_todo(node: cst.Attribute, ctx: FileContext) -> cst.Attribute:
    """`with torch.cuda.stream(s):` is a call, but `torch.cuda.graphs`/`nvtx` may be used bare."""
    if node.attr.value in ("nvtx", "CUDAGraph") and (ctx.qualify(node) or "").startswith("torch.cuda."):
        todo(ctx, "NM903")
    return node
