"""NM9xx cannot migrate: annotate with `# TODO(neuron-migrate NM9xx): why and what to do`.

Each TODO's text: docs/rules.md (NM9xx). These constructs have no faithful automatic rewrite; the comment goes
above the statement, the code stays as it is (still valid Python), and the report lists each
TODO with file:line. A TODO is added once per statement and rule, so reruns are no-ops.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import callee_name, kwarg, on
from migrate.rules.todo_messages import MESSAGES, TODOS

_EXAMPLES = {
    "NM901": (
        "from vllm import LLM, SamplingParams\n",
        "# TODO(neuron-migrate NM901): {m}\nfrom vllm import LLM, SamplingParams\n",
    ),
    "NM902": ("import deepspeed\n", "# TODO(neuron-migrate NM902): {m}\nimport deepspeed\n"),
    "NM903": (
        "import torch\nstart = torch.cuda.Event(enable_timing=True)\n",
        "import torch\n# TODO(neuron-migrate NM903): {m}\nstart = torch.cuda.Event(enable_timing=True)\n",
    ),
    "NM904": (
        "import torch\nmajor, _ = torch.cuda.get_device_capability()\n",
        "import torch\n# TODO(neuron-migrate NM904): {m}\nmajor, _ = (8, 0)\n",
    ),
    "NM905": ("import triton\n", "# TODO(neuron-migrate NM905): {m}\nimport triton\n"),
    "NM906": (
        "from unsloth import FastLanguageModel\n",
        "# TODO(neuron-migrate NM906): {m}\nfrom unsloth import FastLanguageModel\n",
    ),
    "NM907": (
        "from flash_attn import flash_attn_func\n",
        "# TODO(neuron-migrate NM907): {m}\nfrom flash_attn import flash_attn_func\n",
    ),
    "NM908": (
        "from transformers import BitsAndBytesConfig\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
        "from transformers import BitsAndBytesConfig\n# TODO(neuron-migrate NM908): {m}\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
    ),
    "NM909": (
        'model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
        '# TODO(neuron-migrate NM909): {m}\nmodel = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
    ),
}
# TODO rules only annotate, so they are safe, except where the TODO also replaces a call that
# raises without CUDA: the replacement value decides which branch the script takes.
_UNSAFE = {
    "NM904": "capability checks now see (8, 0): code gated on major >= 8 takes its Ampere path (bf16)",
}
RULES: tuple[Rule, ...] = tuple(
    Rule(
        id=rule_id,
        name=name,
        summary=f"TODO: {title}.",
        rationale=why,
        before=_EXAMPLES[rule_id][0],
        after=_EXAMPLES[rule_id][1].replace("{m}", message),
        safety="unsafe" if rule_id in _UNSAFE else "safe",
        safety_reason=_UNSAFE.get(rule_id, ""),
        todo=True,
    )
    for rule_id, (name, title, why, message) in TODOS.items()
)

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


def _todo(ctx: FileContext, rule_id: str) -> None:
    if ctx.enabled(rule_id):
        ctx.todo(rule_id, MESSAGES[rule_id])


@on("Import")
def import_todo(node: cst.Import, ctx: FileContext) -> cst.Import:
    for alias in node.names:
        head = cst.Module([]).code_for_node(alias.name).split(".")[0]
        if head in _PACKAGES:
            _todo(ctx, _PACKAGES[head])
    return node


@on("ImportFrom")
def import_from_todo(node: cst.ImportFrom, ctx: FileContext) -> cst.ImportFrom:
    if node.module is not None and not node.relative:
        head = cst.Module([]).code_for_node(node.module).split(".")[0]
        if head in _PACKAGES:
            _todo(ctx, _PACKAGES[head])
    return node


@on("Call")
def call_todo(node: cst.Call, ctx: FileContext) -> cst.BaseExpression:
    qualified = ctx.qualify(node.func) or ""
    if qualified.startswith("torch.cuda."):
        rest = qualified[len("torch.cuda.") :]
        if rest.split(".")[0] in _CUDA_RUNTIME:
            _todo(ctx, "NM903")
        elif rest == "get_device_capability" and ctx.enabled("NM904"):
            _todo(ctx, "NM904")
            return cst.parse_expression("(8, 0)")  # it raises without CUDA: the TODO says what stands in
        elif rest == "get_arch_list":
            _todo(ctx, "NM904")  # returns [] without CUDA: nothing crashes, the check is still meaningless
    elif qualified.startswith("torch.utils.cpp_extension.") or qualified.startswith("apex."):
        _todo(ctx, "NM905")
    name = callee_name(node)
    if name == "BitsAndBytesConfig" or name in (
        "GPTQConfig",
        "AwqConfig",
        "HqqConfig",
        "TorchAoConfig",
        "FbgemmFp8Config",
    ):
        _todo(ctx, "NM908")
    elif name and name.startswith("replace_llama_attn_with_flash_attn"):
        _todo(ctx, "NM907")
    if kwarg(node, "max_memory") is not None and name == "from_pretrained":
        _todo(ctx, "NM909")
    deepspeed = kwarg(node, "deepspeed")
    if (
        deepspeed is not None
        and (name or "").endswith(("Arguments", "Config"))
        and not (type(deepspeed.value) is cst.Name and deepspeed.value.value == "None")
    ):
        _todo(ctx, "NM902")
    return node


@on("Attribute")
def attribute_todo(node: cst.Attribute, ctx: FileContext) -> cst.Attribute:
    """`with torch.cuda.stream(s):` is a call, but `torch.cuda.graphs`/`nvtx` may be used bare."""
    if node.attr.value in ("nvtx", "CUDAGraph") and (ctx.qualify(node) or "").startswith("torch.cuda."):
        _todo(ctx, "NM903")
    return node
