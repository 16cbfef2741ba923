"""``torch.nn.attention.varlen.varlen_attn`` on the ``neuron`` device, as TorchNeuron 2.34 documents ("The
torch.accelerator memory functions and torch.nn.attention.varlen.varlen_attn work on Neuron").

PyTorch 2.13 computes it with one of two CUDA kernels (``torch_attn::_varlen_attn`` calls
``aten::_flash_attention_forward``, or cuDNN's on CUDA); a CPU build has neither, so the simulator, which runs
each op with the CPU's kernel, fails there: "NotImplementedError: Could not run 'aten::_flash_attention_forward'
with arguments from the 'CPU' backend". There is no CPU kernel to borrow, so the simulator gives PyTorch's
three varlen custom ops (``_varlen_attn``, ``_varlen_attn_out``, ``_varlen_attn_backward``) a ``neuron`` kernel
of its own: each packed sequence is attended on its own, in float32, with flash attention's masking rules
(causal and sliding windows aligned bottom-right, grouped-query heads), and cast back to the input dtype; the
backward is the textbook softmax-attention gradient. The numbers are those of per-sequence
``scaled_dot_product_attention`` on the CPU to float32 rounding, not TorchNeuron's (its kernel is not
published). Paged KV caches (``block_table``, ``seqused_k``) are refused: inference-only and not imitated.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

# at module level: see compile_backend.py on why the simulator never imports a neuroncompat module lazily
from neuroncompat import hooks

_registered: list[bool] = []


def _window(window_size: list[int] | None, is_causal: bool) -> tuple[int, int]:
    left, right = (window_size or [-1, -1])[:2]
    if is_causal:
        right = 0
    return left, right


def _sequences(cu_seq_q: torch.Tensor, cu_seq_k: torch.Tensor | None) -> list[tuple[int, int, int, int]]:
    starts_q = cu_seq_q.cpu().tolist()
    starts_k = (cu_seq_k if cu_seq_k is not None else cu_seq_q).cpu().tolist()
    return [(starts_q[i], starts_q[i + 1], starts_k[i], starts_k[i + 1]) for i in range(len(starts_q) - 1)]


def _probabilities(
    q: torch.Tensor, k: torch.Tensor, scale: float, left: int, right: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax probabilities (H, Lq, Lk) and logsumexp (H, Lq) of one sequence, in float32."""
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    lq, lk = q.shape[0], k.shape[0]
    rows = torch.arange(lq, device=q.device).unsqueeze(1) + (lk - lq)  # bottom-right aligned, as flash attention
    cols = torch.arange(lk, device=q.device).unsqueeze(0)
    allowed = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if left >= 0:
        allowed &= cols >= rows - left
    if right >= 0:
        allowed &= cols <= rows + right
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probabilities = torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0)  # a row with nothing to attend is 0
    return probabilities, lse


def _grouped(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.repeat_interleave(heads // t.shape[1], dim=1) if t.shape[1] != heads else t


def _forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor | None,
    is_causal: bool,
    scale: float | None,
    window_size: list[int] | None,
    seqused_k: torch.Tensor | None,
    block_table: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    if seqused_k is not None or block_table is not None:
        raise NotImplementedError(
            "varlen_attn with seqused_k/block_table (a paged KV cache) is not imitated by the simulated neuron device"
        )
    left, right = _window(window_size, is_causal)
    heads = query.shape[1]
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    out = torch.zeros(query.shape, dtype=torch.float32, device=query.device)
    lse = torch.full((heads, query.shape[0]), float("-inf"), dtype=torch.float32, device=query.device)
    for q0, q1, k0, k1 in _sequences(cu_seq_q, cu_seq_k):
        q = query[q0:q1].float()
        k = _grouped(key[k0:k1].float(), heads)
        v = _grouped(value[k0:k1].float(), heads)
        probabilities, seq_lse = _probabilities(q, k, scale, left, right)
        out[q0:q1] = torch.einsum("hqk,khd->qhd", probabilities, v)
        lse[:, q0:q1] = seq_lse
    return out.to(query.dtype), lse


def _varlen_attn(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor | None,
    max_q: int,
    max_k: int,
    is_causal: bool = False,
    scale: float | None = None,
    window_size: list[int] | None = None,
    enable_gqa: bool = False,
    seqused_k: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out, lse = _forward(query, key, value, cu_seq_q, cu_seq_k, is_causal, scale, window_size, seqused_k, block_table)
    return out, lse, torch.zeros((2,), dtype=torch.uint64, device=query.device)


def _varlen_attn_out(
    out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor | None,
    max_q: int,
    max_k: int,
    is_causal: bool = False,
    scale: float | None = None,
    window_size: list[int] | None = None,
    enable_gqa: bool = False,
    seqused_k: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    result, lse = _forward(query, key, value, cu_seq_q, cu_seq_k, is_causal, scale, window_size, seqused_k, block_table)
    out.copy_(result)
    return lse


def _varlen_attn_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor,
    max_q: int,
    max_k: int,
    is_causal: bool,
    rng_state: torch.Tensor,
    scale: float | None = None,
    window_size: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    left, right = _window(window_size, is_causal)
    heads, kv_heads = query.shape[1], key.shape[1]
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    dq = torch.zeros(query.shape, dtype=torch.float32, device=query.device)
    dk = torch.zeros(key.shape, dtype=torch.float32, device=query.device)
    dv = torch.zeros(value.shape, dtype=torch.float32, device=query.device)
    for q0, q1, k0, k1 in _sequences(cu_seq_q, cu_seq_k):
        q = query[q0:q1].float()
        k = _grouped(key[k0:k1].float(), heads)
        v = _grouped(value[k0:k1].float(), heads)
        d_out = grad_out[q0:q1].float()
        probabilities, _ = _probabilities(q, k, scale, left, right)
        o = torch.einsum("hqk,khd->qhd", probabilities, v)
        d_v = torch.einsum("hqk,qhd->khd", probabilities, d_out)
        d_p = torch.einsum("qhd,khd->hqk", d_out, v)
        d_s = probabilities * (d_p - (d_out * o).sum(-1).transpose(0, 1).unsqueeze(-1))
        dq[q0:q1] = torch.einsum("hqk,khd->qhd", d_s, k) * scale
        d_k = torch.einsum("hqk,qhd->khd", d_s, q) * scale
        group = heads // kv_heads  # a key/value head serves `group` query heads: sum their gradients
        dk[k0:k1] = d_k.reshape(d_k.shape[0], kv_heads, group, -1).sum(2)
        dv[k0:k1] = d_v.reshape(d_v.shape[0], kv_heads, group, -1).sum(2)
    return dq.to(query.dtype), dk.to(key.dtype), dv.to(value.dtype)


def register() -> None:
    """Give PyTorch's varlen custom ops a ``neuron`` kernel once ``torch.nn.attention.varlen`` defines them.

    Not before: that module imports Dynamo (about 1.5 s of CPU) in every process the simulator starts in, and
    the ops do not exist until it is imported, so nothing can call them earlier.
    """
    hooks.when_imported("torch.nn.attention.varlen", _register_kernels, keep=True)


def _register_kernels(_varlen: ModuleType) -> None:
    """Register the kernels, once per process (the dispatcher keeps them)."""
    if _registered:
        return
    for name, kernel in (
        ("torch_attn::_varlen_attn", _varlen_attn),
        ("torch_attn::_varlen_attn_out", _varlen_attn_out),
        ("torch_attn::_varlen_attn_backward", _varlen_attn_backward),
    ):
        torch.library.register_kernel(name, "neuron", kernel)
    _registered.append(True)
