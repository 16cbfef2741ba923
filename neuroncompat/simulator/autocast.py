"""``torch.autocast("neuron")``: matmul-family ops run in the autocast dtype, the rest fall through.

PyTorch ships autocast kernels for CUDA, CPU, XPU, MPS, MTIA and MAIA, but none for PrivateUse1:
a backend registers its own. torch-neuronx does; the simulator registers the lower-precision
list that CUDA uses (the ops whose inputs autocast casts down), so the Trainer's and accelerate's
bf16 path behaves as on an accelerator. That is what reproduces TRL #7664: under bf16 autocast
``k_proj``/``v_proj`` return bf16, RoPE multiplies the keys by fp32 ``cos``/``sin`` and promotes
them back to fp32, and a static cache sized from the keys rejects the bf16 values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from neuroncompat.simulator.tensor import map_tensors

# CUDA's autocast "lower_precision_fp" list (aten/src/ATen/autocast_mode.cpp), by overload.
LOWER_PRECISION_OPS = (
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "scaled_dot_product_attention",
)

# The stubs' DispatchKey enum lacks the PrivateUse1 autocast key.
_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)  # type: ignore[attr-defined]


def _kernel(op: Callable[..., Any]) -> Callable[..., Any]:
    def run_in_autocast_dtype(*args: Any, **kwargs: Any) -> Any:
        dtype = torch.get_autocast_dtype("neuron")

        def cast(t: torch.Tensor) -> torch.Tensor:
            if t.is_floating_point() and t.dtype != torch.float64 and t.device.type == "neuron":
                return t.to(dtype)
            return t

        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*map_tensors(cast, args), **map_tensors(cast, kwargs))

    return run_in_autocast_dtype


def register(aten_lib: torch.library.Library, fallback_lib: torch.library.Library) -> None:
    """Every op falls through the autocast key except the lower-precision list, which casts."""
    fallback_lib.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    for name in LOWER_PRECISION_OPS:
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base)
        op = getattr(packet, overload or "default")
        aten_lib.impl(name, _kernel(op), "AutocastPrivateUse1")
