"""``param.data = tensor`` across the CPU and the simulated device, as on hardware.

PEFT's OLoRA/PiSSA initialisers (and other code that re-points a parameter) write
``lora_A.weight.data = R`` where the new LoRA weight is still on the CPU and ``R`` was computed from the
base weight on the accelerator. On CUDA, and on a PrivateUse1 backend with a regular TensorImpl such as
torch-neuronx, a CPU tensor and a device tensor have compatible implementations, so the parameter simply moves
to the device. A simulated tensor is a Python wrapper subclass, whose implementation is never compatible with
a CPU tensor's, so the same line raised ``variable.set_data(tensor) ... incompatible tensor type`` on the
simulator only (found running PEFT's ``olora_finetuning.py``).

While the simulator is on, such an assignment swaps the parameter's contents for the new data instead
(``torch.utils.swap_tensors``): the object the module holds stays the same, keeps its attributes, its
``requires_grad`` and its ``Parameter`` identity, and now lives where the data does. Assignments between
two CPU tensors go through ``set_data`` untouched. Between two simulated tensors ``set_data`` is compatible but
only reaches the wrapper, not the CPU payload that holds the values, so the assignment was silently ignored
(``p.data = p.data.to(dtype)``, PEFT's OLoRA base-weight update): the payload now follows. Whether torch-neuronx's TensorImpl is compatible with the
CPU's is not documented; this follows CUDA (docs/simulator.md).
"""

from __future__ import annotations

from typing import Any

import torch

from neuroncompat.simulator import state
from neuroncompat.simulator.tensor import NeuronTensor

_DATA: Any = torch._C.TensorBase.data  # the C++ getset descriptor: get returns a detached alias, set calls set_data
_OWNERS = (torch.nn.Parameter, NeuronTensor)  # CPU parameters, and every tensor on the simulated device


def _get(self: torch.Tensor) -> torch.Tensor:
    result: torch.Tensor = _DATA.__get__(self)
    return result


def _set(self: torch.Tensor, value: Any) -> None:
    on_device = isinstance(self, NeuronTensor), isinstance(value, NeuronTensor)
    if not state.enabled() or not isinstance(value, torch.Tensor) or not any(on_device):
        _DATA.__set__(self, value)
        return
    if all(on_device):
        # Compatible wrappers: set_data takes the new shape, dtype and core, but the values live in the
        # payload, which set_data cannot see; without this the assignment silently kept the old values.
        _DATA.__set__(self, value)
        self._elem = value._elem.detach()  # type: ignore[attr-defined]
        return
    replacement = value.detach().requires_grad_(self.requires_grad)
    kept = {name: attr for name, attr in vars(self).items() if name != "_elem"}
    replacement.__dict__.update(kept)  # attributes on the parameter (HF/PEFT flags) stay with it
    if type(self) is torch.nn.Parameter:
        replacement._is_param = True  # a device parameter is the device tensor flagged as one (Parameter.__new__)
    torch.utils.swap_tensors(self, replacement)


def install() -> None:
    """Route ``.data`` assignments on parameters and simulated tensors through :func:`_set`."""
    for owner in _OWNERS:
        owner.data = property(_get, _set)  # type: ignore[assignment]


def uninstall() -> None:
    for owner in _OWNERS:
        if "data" in vars(owner):
            delattr(owner, "data")
