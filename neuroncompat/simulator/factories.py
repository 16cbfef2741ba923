"""Factory kernels for ``device="neuron"``: the ops that create a tensor from nothing.

Ops with a Neuron tensor argument reach ``NeuronTensor.__torch_dispatch__``; ops with none
(``torch.empty(..., device="neuron")``) reach the PrivateUse1 dispatch key instead. PyTorch's
composite factories (``zeros``, ``full``, ``arange``, ``randn``, ``tensor(...).to``) all bottom
out in ``empty``/``empty_strided`` followed by an in-place fill, so these two kernels are all the
backend needs.
"""

from __future__ import annotations

from typing import Any

import torch

from neuroncompat.simulator import state
from neuroncompat.simulator.tensor import NeuronTensor


def _index(device: Any) -> int:
    index = device.index if device is not None and device.index is not None else state.current_device()
    state.check_index(index)
    return index


def _empty(
    size: Any,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
    memory_format: torch.memory_format | None = None,
) -> NeuronTensor:
    elem = torch.empty(size, dtype=dtype, layout=layout, memory_format=memory_format)
    return NeuronTensor(elem, _index(device))


def _empty_strided(
    size: Any,
    stride: Any,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
) -> NeuronTensor:
    elem = torch.empty_strided(size, stride, dtype=dtype, layout=layout)
    return NeuronTensor(elem, _index(device))


# Ops that reach the backend key with Python dispatch excluded: ``torch.tensor(x,
# device="neuron")`` copies its data below the Python key.
_BELOW_PYTHON_OPS = ("_copy_from", "_copy_from_and_resize", "copy_", "_to_copy", "_local_scalar_dense")


def _below_python(op: torch._ops.OpOverload) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return NeuronTensor.__torch_dispatch__(op, (), args, kwargs)

    return kernel


def register(aten_lib: torch.library.Library) -> None:
    """Register the kernels on ``aten_lib`` (an ``aten`` IMPL library kept alive by the caller)."""
    aten_lib.impl("empty.memory_format", _empty, "PrivateUse1")
    aten_lib.impl("empty_strided", _empty_strided, "PrivateUse1")
    for name in _BELOW_PYTHON_OPS:
        aten_lib.impl(name, _below_python(getattr(torch.ops.aten, name).default), "PrivateUse1")
