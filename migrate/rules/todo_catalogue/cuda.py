"""The TODOs for what only runs on CUDA: packages (vLLM, DeepSpeed, Triton, Unsloth, flash-attn,
bitsandbytes) and `torch.cuda` runtime APIs (streams, graphs, capability checks, memory budgets), which have no
faithful rewrite, so the script keeps them behind a TODO.
"""

from __future__ import annotations

from migrate.registry import Rule

# NM903 on an `if torch.cuda.is_available():` block that NM104 leaves guarded by CUDA.
CUDA_ONLY_BLOCK = (
    "this block calls torch.cuda.{names} (no Neuron equivalent), so it stays behind the CUDA check "
    "and is skipped on Neuron; port it to torch.accelerator / torch.neuron to run it there"
)

# NM903 on a guarded block that reads names only a block kept behind its CUDA check (CUDA_ONLY_BLOCK) binds.
CUDA_ONLY_NAMES = (
    "this block uses {names}, set only in a block above that stays behind its CUDA check, so it stays behind "
    "the CUDA check too and is skipped on Neuron; port both to torch.accelerator / torch.neuron to run them there"
)

# NM908 on what a script still takes from bitsandbytes once NM209/NM210 rewrote the rest (its import, a
# quantized layer it builds): not the model-memory text, which is about a quantized load.
BNB_LEFT = (
    "bitsandbytes is CUDA-only and is not installed with TorchNeuron; NM209/NM210 replaced quantized loads, "
    "quantized Linear layers and 8-bit optimizers, replace what this line still uses with its torch equivalent"
)


RULES: tuple[Rule, ...] = (
    Rule(
        id="NM901",
        name="vllm",
        summary="TODO: vLLM inference engine.",
        rationale="vLLM's CUDA engine does not run on TorchNeuron and its API (batched prompts, SamplingParams, "
        "RequestOutput) differs from transformers.",
        message='vLLM does not run on Neuron; use model.generate(..., cache_implementation="static") on device_map="neuron"',
        before="from vllm import LLM, SamplingParams\n",
        after="{t}from vllm import LLM, SamplingParams\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM902",
        name="deepspeed",
        summary="TODO: DeepSpeed.",
        rationale="DeepSpeed has no Neuron accelerator and the accelerate wizard rejects it on Neuron.",
        message='DeepSpeed does not run on Neuron; ZeRO-3 -> fsdp="full_shard auto_wrap" with fsdp_config={"fsdp_version": 2}, ZeRO-1/2 -> DDP or shard_grad_op',
        before="import deepspeed\n",
        after="{t}import deepspeed\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM903",
        name="cuda-runtime",
        summary="TODO: CUDA streams, events, graphs, nvtx, IPC.",
        rationale="No Neuron equivalent exists for CUDA streams, events, CUDA graphs, nvtx ranges, CUDA IPC or NCCL. "
        "Events get a text about timing, NCCL checks one about collectives; the rest this entry's.",
        message="no Neuron equivalent for this CUDA runtime API (streams, graphs, nvtx, IPC); remove it or keep it behind a CUDA check",
        before="import torch\nstream = torch.cuda.Stream()\n",
        after="import torch\n{t}stream = torch.cuda.Stream()\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM904",
        name="cuda-capability",
        summary="TODO: CUDA compute-capability checks.",
        rationale="`get_device_capability()` has no Neuron meaning and raises without CUDA; bf16 is supported on every "
        "Trainium generation. The call becomes `(8, 0)` (an Ampere-class answer), so checks such as `major >= "
        "8` choose bf16; the TODO asks to remove the check.",
        message="no compute capability on Neuron: get_device_capability() is now (8, 0), so capability checks take their bf16 path; bf16 is always supported, flash-attention never is",
        before="import torch\nmajor, _ = torch.cuda.get_device_capability()\n",
        after="import torch\n{t}major, _ = (8, 0)\n",
        safety="unsafe",
        safety_reason="capability checks now see (8, 0): code gated on major >= 8 takes its Ampere path (bf16)",
        todo=True,
    ),
    Rule(
        id="NM905",
        name="custom-kernels",
        summary="TODO: Triton, apex and custom CUDA extensions.",
        rationale="Triton kernels, apex fused optimizers/amp and `torch.utils.cpp_extension` CUDA builds are CUDA-only.",
        message="CUDA-only kernels; use torch.optim.AdamW / plain PyTorch ops (NKI for custom kernels)",
        before="import triton\n",
        after="{t}import triton\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM906",
        name="unsloth",
        summary="TODO: Unsloth.",
        rationale="Unsloth patches transformers/TRL with Triton kernels at import time and needs CUDA.",
        message="Unsloth needs CUDA; load with AutoModelForCausalLM.from_pretrained(dtype=torch.bfloat16) and peft.get_peft_model",
        before="from unsloth import FastLanguageModel\n",
        after="{t}from unsloth import FastLanguageModel\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM907",
        name="flash-attn-liger",
        summary="TODO: flash-attn and Liger kernels used directly.",
        rationale="The flash-attn package and Liger's Triton kernels are CUDA-only; monkeypatches such as "
        "`replace_llama_attn_with_flash_attn()` must go.",
        message='CUDA-only attention/loss kernels; use attn_implementation="sdpa" and torch.nn.functional.cross_entropy',
        before="from flash_attn import flash_attn_func\n",
        after="{t}from flash_attn import flash_attn_func\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM908",
        name="quantized-weights",
        summary="TODO: bitsandbytes / GPTQ / AWQ quantization.",
        rationale="Quantized kernels are CUDA-only. NM209 loads the model in bf16 instead: weights take about 4x "
        "(4-bit) or 2x (8-bit) more memory.",
        message="bitsandbytes quantization is CUDA-only; the model now loads in bf16 (~4x the 4-bit memory), consider FSDP or more NeuronCores",
        before="from transformers import BitsAndBytesConfig\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
        after="from transformers import BitsAndBytesConfig\n{t}bnb_config = BitsAndBytesConfig(load_in_4bit=True)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM909",
        name="gpu-memory-budget",
        summary="TODO: `max_memory={gpu: ...}` budgets.",
        rationale="GPU-indexed memory budgets do not apply to NeuronCores and big-model sharding via device_map does "
        "not exist on Neuron.",
        message="GPU memory budgets do not apply on Neuron; shard with FSDP2 or tensor parallelism instead",
        before='model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
        after='{t}model = AutoModelForCausalLM.from_pretrained(name, max_memory={0: "40GiB"})\n',
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM925",
        name="legacy-tensor-type",
        summary="TODO: legacy CUDA tensor types NM108 cannot rewrite.",
        rationale="`torch.cuda.FloatTensor` and the other legacy CUDA types raise without CUDA. NM108 rewrites casts and "
        "calls whose arguments are clearly sizes or data; a single argument that may be either, keywords, "
        "`isinstance` checks or the type passed on are left with this TODO. Under `NEURONCOMPAT_CUDA=redirect` "
        "the types build, cast and match tensors on the NeuronCore, so the script runs unchanged meanwhile.",
        message="legacy CUDA tensor type: use torch.empty(*size, dtype=..., device=...) for sizes, "
        "torch.tensor(data, dtype=..., device=...) for data, .to(device, dtype) for casts, x.dtype/x.device "
        "for checks; NEURONCOMPAT_CUDA=redirect runs it unchanged meanwhile",
        before="import torch\nnoise = torch.cuda.FloatTensor(batch)\n",
        after="import torch\n{t}noise = torch.cuda.FloatTensor(batch)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM926",
        name="data-parallel",
        summary="TODO: `torch.nn.DataParallel`.",
        rationale="DataParallel runs one process over several devices and scatters each batch with CUDA's "
        "communication kernels (`torch.nn.parallel.comm`), which do not exist for NeuronCores: with more than "
        "one core it fails. On Neuron each process owns its cores: data parallelism is one process per core "
        "(torchrun) with DistributedDataParallel. A DataParallel behind a CUDA check (`device.type == "
        '"cuda"`, `torch.cuda.device_count() > 1`) keeps that check (NM104/NM103 leave it), so the block is '
        "skipped on Neuron as on any machine without CUDA.",
        message="nn.DataParallel scatters batches with CUDA kernels and fails on NeuronCores; for data parallelism "
        "launch one process per core with torchrun and wrap the model in DistributedDataParallel",
        before="import torch\nmodel = torch.nn.DataParallel(model)\n",
        after="import torch\n{t}model = torch.nn.DataParallel(model)\n",
        safety="safe",
        todo=True,
    ),
    Rule(
        id="NM935",
        name="device-module-memory-info",
        summary="TODO: `mem_get_info()` of a device module picked at run time.",
        rationale="Device-generic code asks the module of a device type for free memory: `getattr(torch, device_type, "
        "torch.cuda).mem_get_info()`, `torch.get_device_module(name).mem_get_info()`. TorchNeuron's "
        "`torch.neuron` has no `mem_get_info` (transformers #47029), so on Neuron the call fails. Where the "
        "type is the current accelerator's (`torch.accelerator.current_accelerator().type`, or no argument), "
        "NM104 rewrites it to `torch.accelerator.get_memory_info()`, the same `(free, total)`; for any other "
        "expression the codemod cannot tell which module it names, and leaves this TODO.",
        message="torch.neuron has no mem_get_info: if this device type is the current accelerator's, call "
        "torch.accelerator.get_memory_info() (the same (free, total)); otherwise keep this call off Neuron",
        before="import torch\nfree, total = getattr(torch, args.device_type).mem_get_info()\n",
        after="import torch\n{t}free, total = getattr(torch, args.device_type).mem_get_info()\n",
        safety="safe",
        todo=True,
    ),
)

# NM903's text per CUDA runtime API (`torch.cuda.<name>`); others get the entry's own text.
CUDA_RUNTIME_MESSAGES: dict[str, str] = {
    "nccl": (
        "NCCL is CUDA's collective library and does not exist on Neuron, whose collectives are the neuron "
        "process-group backend: drop this NCCL check (bf16 and collectives need no NCCL version there)"
    ),
    "Event": "CUDA events do not exist on Neuron; time with time.perf_counter() around torch.accelerator.synchronize()",
}
