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


def register(lib: torch.library.Library) -> None:
    """Register the factory kernels on ``lib`` (an ``aten`` IMPL library kept alive by the caller)."""
    lib.impl("empty.memory_format", _empty, "PrivateUse1")
    lib.impl("empty_strided", _empty_strided, "PrivateUse1")
