"""NM9xx cannot migrate: annotate with `# TODO(neuron-migrate NM9xx): why and what to do`.

Research note section 5. These constructs have no faithful automatic rewrite; the comment goes
above the statement, the code stays as it is (still valid Python), and the report lists each
TODO with file:line. A TODO is added once per statement and rule, so reruns are no-ops.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule, register
from migrate.rules.base import callee_name, kwarg, on

_TODOS = {
    "NM901": ("vllm", "vLLM inference engine",
              "vLLM's CUDA engine does not run on TorchNeuron and its API (batched prompts, "
              "SamplingParams, RequestOutput) differs from transformers.",
              "vLLM does not run on Neuron; use model.generate(..., cache_implementation=\"static\") on device_map=\"neuron\""),
    "NM902": ("deepspeed", "DeepSpeed",
              "DeepSpeed has no Neuron accelerator and the accelerate wizard rejects it on Neuron.",
              "DeepSpeed does not run on Neuron; ZeRO-3 -> fsdp=\"full_shard auto_wrap\" with fsdp_config={\"fsdp_version\": 2}, ZeRO-1/2 -> DDP or shard_grad_op"),
    "NM903": ("cuda-runtime", "CUDA streams, events, graphs, nvtx, IPC",
              "No Neuron equivalent exists for CUDA streams, events, CUDA graphs, nvtx ranges "
              "or CUDA IPC.",
              "no Neuron equivalent for this CUDA runtime API; time with time.perf_counter() + torch.accelerator.synchronize()"),
    "NM904": ("cuda-capability", "CUDA compute-capability checks",
              "`get_device_capability()` has no Neuron meaning; bf16 is supported on every "
              "Trainium generation.",
              "no compute capability on Neuron; bf16 is always supported, flash-attention never is"),
    "NM905": ("custom-kernels", "Triton, apex and custom CUDA extensions",
              "Triton kernels, apex fused optimizers/amp and `torch.utils.cpp_extension` CUDA "
              "builds are CUDA-only.",
              "CUDA-only kernels; use torch.optim.AdamW / plain PyTorch ops (NKI for custom kernels)"),
    "NM906": ("unsloth", "Unsloth",
              "Unsloth patches transformers/TRL with Triton kernels at import time and needs CUDA.",
              "Unsloth needs CUDA; load with AutoModelForCausalLM.from_pretrained(dtype=torch.bfloat16) and peft.get_peft_model"),
    "NM907": ("flash-attn-liger", "flash-attn and Liger kernels used directly",
              "The flash-attn package and Liger's Triton kernels are CUDA-only; monkeypatches "
              "such as `replace_llama_attn_with_flash_attn()` must go.",
              "CUDA-only attention/loss kernels; use attn_implementation=\"sdpa\" and torch.nn.functional.cross_entropy"),
    "NM908": ("quantized-weights", "bitsandbytes / GPTQ / AWQ quantization",
              "Quantized kernels are CUDA-only. NM209 loads the model in bf16 instead: weights "
              "take about 4x (4-bit) or 2x (8-bit) more memory.",
              "bitsandbytes quantization is CUDA-only; the model now loads in bf16 (~4x the 4-bit memory), consider FSDP or more NeuronCores"),
    "NM909": ("gpu-memory-budget", "`max_memory={gpu: ...}` budgets",
              "GPU-indexed memory budgets do not apply to NeuronCores and big-model sharding via "
              "device_map does not exist on Neuron.",
              "GPU memory budgets do not apply on Neuron; shard with FSDP2 or tensor parallelism instead"),
}
_EXAMPLES = {
    "NM901": ('from vllm import LLM, SamplingParams\n',
              '# TODO(neuron-migrate NM901): {m}\nfrom vllm import LLM, SamplingParams\n'),
    "NM902": ('import deepspeed\n', '# TODO(neuron-migrate NM902): {m}\nimport deepspeed\n'),
    "NM903": ('import torch\nstart = torch.cuda.Event(enable_timing=True)\n',
              'import torch\n# TODO(neuron-migrate NM903): {m}\nstart = torch.cuda.Event(enable_timing=True)\n'),
    "NM904": ('import torch\nmajor, _ = torch.cuda.get_device_capability()\n',
              'import torch\n# TODO(neuron-migrate NM904): {m}\nmajor, _ = torch.cuda.get_device_capability()\n'),
    "NM905": ('import triton\n', '# TODO(neuron-migrate NM905): {m}\nimport triton\n'),
    "NM906": ('from unsloth import FastLanguageModel\n', '# TODO(neuron-migrate NM906): {m}\nfrom unsloth import FastLanguageModel\n'),
    "NM907": ('from flash_attn import flash_attn_func\n', '# TODO(neuron-migrate NM907): {m}\nfrom flash_attn import flash_attn_func\n'),
    "NM908": ('from transformers import BitsAndBytesConfig\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n',
              'from transformers import BitsAndBytesConfig\n# TODO(neuron-migrate NM908): {m}\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n'),
    "NM909": ('model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
              '# TODO(neuron-migrate NM909): {m}\nmodel = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n'),
}
MESSAGES = {rule_id: message for rule_id, (_, _, _, message) in _TODOS.items()}
for rule_id, (name, title, why, message) in _TODOS.items():
    before, after = _EXAMPLES[rule_id]
    register(Rule(id=rule_id, name=name, summary=f"TODO: {title}.", rationale=why, before=before,
                  after=after.replace("{m}", message), todo=True))

# top-level package imported -> TODO id
_PACKAGES = {
    "vllm": "NM901", "deepspeed": "NM902", "triton": "NM905", "apex": "NM905",
    "unsloth": "NM906", "unsloth_zoo": "NM906", "flash_attn": "NM907", "liger_kernel": "NM907",
    "auto_gptq": "NM908", "awq": "NM908", "gptqmodel": "NM908",
}
_CUDA_RUNTIME = ("Event", "Stream", "stream", "current_stream", "default_stream", "graph", "CUDAGraph",
                 "graphs", "nvtx", "nccl", "ipc_collect", "cudart", "jiterator", "make_graphed_callables")


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
def call_todo(node: cst.Call, ctx: FileContext) -> cst.Call:
    qualified = ctx.qualify(node.func) or ""
    if qualified.startswith("torch.cuda."):
        rest = qualified[len("torch.cuda."):]
        if rest.split(".")[0] in _CUDA_RUNTIME:
            _todo(ctx, "NM903")
        elif rest in ("get_device_capability", "get_arch_list"):
            _todo(ctx, "NM904")
    elif qualified.startswith("torch.utils.cpp_extension.") or qualified.startswith("apex."):
        _todo(ctx, "NM905")
    name = callee_name(node)
    if name == "BitsAndBytesConfig" or name in ("GPTQConfig", "AwqConfig", "HqqConfig", "TorchAoConfig", "FbgemmFp8Config"):
        _todo(ctx, "NM908")
    elif name and name.startswith("replace_llama_attn_with_flash_attn"):
        _todo(ctx, "NM907")
    if kwarg(node, "max_memory") is not None and name == "from_pretrained":
        _todo(ctx, "NM909")
    deepspeed = kwarg(node, "deepspeed")
    if deepspeed is not None and (name or "").endswith(("Arguments", "Config")) and not (isinstance(deepspeed.value, cst.Name) and deepspeed.value.value == "None"):
        _todo(ctx, "NM902")
    return node


@on("Attribute")
def attribute_todo(node: cst.Attribute, ctx: FileContext) -> cst.Attribute:
    """`with torch.cuda.stream(s):` is a call, but `torch.cuda.graphs`/`nvtx` may be used bare."""
    if node.attr.value in ("nvtx", "CUDAGraph") and (ctx.qualify(node) or "").startswith("torch.cuda."):
        _todo(ctx, "NM903")
    return node
