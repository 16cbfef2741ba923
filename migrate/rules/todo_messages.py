"""The NM9xx TODO texts: (name, title, why, the comment's message) per rule id.

Kept apart from `todo.py` so rewrite families that also leave a TODO (quantization) can use
the same words without depending on the TODO family's hooks.
"""

from __future__ import annotations

TODOS: dict[str, tuple[str, str, str, str]] = {
    "NM901": (
        "vllm",
        "vLLM inference engine",
        "vLLM's CUDA engine does not run on TorchNeuron and its API (batched prompts, "
        "SamplingParams, RequestOutput) differs from transformers.",
        'vLLM does not run on Neuron; use model.generate(..., cache_implementation="static") on device_map="neuron"',
    ),
    "NM902": (
        "deepspeed",
        "DeepSpeed",
        "DeepSpeed has no Neuron accelerator and the accelerate wizard rejects it on Neuron.",
        'DeepSpeed does not run on Neuron; ZeRO-3 -> fsdp="full_shard auto_wrap" with fsdp_config={"fsdp_version": 2}, ZeRO-1/2 -> DDP or shard_grad_op',
    ),
    "NM903": (
        "cuda-runtime",
        "CUDA streams, events, graphs, nvtx, IPC",
        "No Neuron equivalent exists for CUDA streams, events, CUDA graphs, nvtx ranges or CUDA IPC.",
        "no Neuron equivalent for this CUDA runtime API; time with time.perf_counter() + torch.accelerator.synchronize()",
    ),
    "NM904": (
        "cuda-capability",
        "CUDA compute-capability checks",
        "`get_device_capability()` has no Neuron meaning and raises without CUDA; bf16 is "
        "supported on every Trainium generation. The call becomes `(8, 0)` (an Ampere-class "
        "answer), so checks such as `major >= 8` choose bf16; the TODO asks to remove the check.",
        "no compute capability on Neuron: get_device_capability() is now (8, 0), so capability checks take "
        "their bf16 path; bf16 is always supported, flash-attention never is",
    ),
    "NM905": (
        "custom-kernels",
        "Triton, apex and custom CUDA extensions",
        "Triton kernels, apex fused optimizers/amp and `torch.utils.cpp_extension` CUDA builds are CUDA-only.",
        "CUDA-only kernels; use torch.optim.AdamW / plain PyTorch ops (NKI for custom kernels)",
    ),
    "NM906": (
        "unsloth",
        "Unsloth",
        "Unsloth patches transformers/TRL with Triton kernels at import time and needs CUDA.",
        "Unsloth needs CUDA; load with AutoModelForCausalLM.from_pretrained(dtype=torch.bfloat16) and peft.get_peft_model",
    ),
    "NM907": (
        "flash-attn-liger",
        "flash-attn and Liger kernels used directly",
        "The flash-attn package and Liger's Triton kernels are CUDA-only; monkeypatches "
        "such as `replace_llama_attn_with_flash_attn()` must go.",
        'CUDA-only attention/loss kernels; use attn_implementation="sdpa" and torch.nn.functional.cross_entropy',
    ),
    "NM908": (
        "quantized-weights",
        "bitsandbytes / GPTQ / AWQ quantization",
        "Quantized kernels are CUDA-only. NM209 loads the model in bf16 instead: weights "
        "take about 4x (4-bit) or 2x (8-bit) more memory.",
        "bitsandbytes quantization is CUDA-only; the model now loads in bf16 (~4x the 4-bit memory), consider FSDP or more NeuronCores",
    ),
    "NM909": (
        "gpu-memory-budget",
        "`max_memory={gpu: ...}` budgets",
        "GPU-indexed memory budgets do not apply to NeuronCores and big-model sharding via "
        "device_map does not exist on Neuron.",
        "GPU memory budgets do not apply on Neuron; shard with FSDP2 or tensor parallelism instead",
    ),
}
# NM903 on an `if torch.cuda.is_available():` block that NM104 leaves guarded by CUDA.
CUDA_ONLY_BLOCK = (
    "this block calls torch.cuda.{names} (no Neuron equivalent), so it stays behind the CUDA check "
    "and is skipped on Neuron; port it to torch.accelerator / torch.neuron to run it there"
)
MESSAGES = {rule_id: message for rule_id, (_, _, _, message) in TODOS.items()}
