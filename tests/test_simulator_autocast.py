"""``torch.autocast("neuron")`` applies CUDA's whole autocast policy, taken from torch's own registrations.

TorchNeuron documents ``torch.autocast("neuron")`` but not its op lists (docs/simulator.md: unknown
on trn2). The simulator registers for AutocastPrivateUse1 what torch registers for AutocastCUDA, from
the same op-list macros (ATen/autocast_mode.h): lower precision, float32, float32 with dtype,
promote, and binary_cross_entropy refused.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _autocast_ops(key: str) -> set[str]:
    return {
        name
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
    }


def test_every_op_cuda_autocasts_is_autocast_on_neuron_and_no_other(neuron: object) -> None:
    cuda = _autocast_ops("AutocastCUDA")
    assert len(cuda) > 100  # the registrations are there, in a CPU build too
    assert _autocast_ops("AutocastPrivateUse1") == cuda


def test_norms_softmax_and_losses_stay_float32_under_bf16_autocast_as_on_cuda(neuron: object) -> None:
    torch.manual_seed(0)
    linear, norm = torch.nn.Linear(16, 16).to("neuron"), torch.nn.LayerNorm(16).to("neuron")
    x, target = torch.randn(4, 16, device="neuron"), torch.randint(0, 16, (4,), device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        h = linear(x)
        dtypes = {
            "linear": h.dtype,
            "layer_norm": norm(h).dtype,
            "softmax": torch.softmax(h, -1).dtype,
            "cross_entropy": F.cross_entropy(h, target).dtype,
            "mse_loss": F.mse_loss(h, torch.zeros_like(h)).dtype,
            "sum of bf16": h.sum().dtype,  # fp32_set_opt_dtype
            "addcmul of bf16 and fp32": torch.addcmul(x, h, x).dtype,  # promote
            "relu": torch.relu(h).dtype,  # not listed: runs in its input's dtype
        }
    assert dtypes == {
        "linear": torch.bfloat16,
        "layer_norm": torch.float32,
        "softmax": torch.float32,
        "cross_entropy": torch.float32,
        "mse_loss": torch.float32,
        "sum of bf16": torch.float32,
        "addcmul of bf16 and fp32": torch.float32,
        "relu": torch.bfloat16,
    }


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda(neuron: object) -> None:
    p, t = torch.rand(4, device="neuron"), torch.rand(4, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)
        assert F.binary_cross_entropy_with_logits(p, t).dtype == torch.float32
    assert F.binary_cross_entropy(p, t).dtype == torch.float32
