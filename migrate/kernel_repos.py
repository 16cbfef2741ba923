"""Hub kernel repos that have no Neuron build, and the PyTorch op that replaces each (docs/gaps.md#kernels).

A plain table that imports nothing, so that the two tools that name a replacement say the same:
neuron-migrate's NM928 TODO on `get_kernel("<repo>")` (`todo_message`) and the runtime shim's `kernels`
patch, whose error at `get_kernel` runs in the user's process and must not pull in the codemod's
libcst stack.

A repo counts as CUDA-only when it is listed below or published by an organisation in
`CUDA_ONLY_PUBLISHERS`: `kernels-community` has no `torch-neuron` build on record. The shim never
relies on the list to decide (it asks `kernels.has_kernel` on the machine); it only words its error.
"""

from __future__ import annotations

SDPA = (
    'torch.nn.functional.scaled_dot_product_attention (transformers: attn_implementation="sdpa"; '
    'diffusers: set_attention_backend("native"))'
)
NORM = "torch.nn.functional.rms_norm / layer_norm (the model's own norm layer)"

# repo id -> the PyTorch op (or model setting) that does what the kernel does.
TORCH_OP: dict[str, str] = {
    "kernels-community/activation": "torch.nn.functional.silu / gelu (silu_and_mul: F.silu(x[..., :d]) * x[..., d:])",
    "kernels-community/layer_norm": NORM,
    "kernels-community/rmsnorm": NORM,
    "kernels-community/triton-layer-norm": NORM,
    "kernels-community/flash-attn": SDPA,
    "kernels-community/flash-attn2": SDPA,
    "kernels-community/flash-attn3": SDPA,
    "kernels-community/flash-attn4": SDPA,
    "kernels-community/vllm-flash-attn3": SDPA,
    "kernels-community/aiter-flash-attn-ck": SDPA,
    # diffusers' sage_hub / sage_blackwell_hub attention backends (docs/gaps.md#kernels): CUDA kernels
    "SageAttention/sage-attention": SDPA,
    "SageAttention/sage-blackwell": SDPA,
    "kernels-community/rotary": "the model's own rotary embedding (plain torch ops)",
    "kernels-community/megablocks": "the model's own MoE layers (plain torch ops)",
    "kernels-community/finegrained-fp8": "bf16 weights with torch.matmul (no quantized kernels on Neuron)",
    "kernels-community/deep-gemm": "bf16 weights with torch.matmul (no quantized kernels on Neuron)",
    "Isotr0py/ggml": "a bf16 checkpoint (GGUF dequantization kernels are CUDA-only)",
}
CUDA_ONLY_PUBLISHERS = ("kernels-community",)
DEFAULT_OP = "the PyTorch op this kernel implements"
NKI_LIBRARY = "https://github.com/aws-neuron/nki-library"


def torch_op_for(repo_id: str) -> str:
    """What to use on Neuron instead of the kernels in `repo_id`."""
    return TORCH_OP.get(repo_id, DEFAULT_OP)


def known_cuda_only(repo_id: str) -> bool:
    """Whether `repo_id` is known to ship no `torch-neuron` build."""
    return repo_id in TORCH_OP or repo_id.split("/", 1)[0] in CUDA_ONLY_PUBLISHERS


def todo_message(repo_id: str) -> str:
    """The NM928 TODO on `get_kernel(repo_id)` of a CUDA-only repo."""
    return (
        f"{repo_id} has no Neuron build (Neuron loads build/torch-neuron/: pure Python and NKI), so get_kernel "
        f"raises there; use {torch_op_for(repo_id)}, or an NKI kernel ({NKI_LIBRARY}) from a repo with a "
        "torch-neuron build"
    )
