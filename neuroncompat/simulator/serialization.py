"""``torch.load(..., map_location="neuron:N")`` for the simulated device.

Loading onto a device makes PyTorch allocate a storage on it (``torch.UntypedStorage(n,
device=...)`` in ``torch/_utils.py``), which needs the backend's C++ allocator. A Python-defined
device cannot register one, and the allocation crashes the process (SIGSEGV): the Trainer's
``resume_from_checkpoint`` loads the optimizer state with ``map_location=args.device``. On a trn2
the same call loads onto the NeuronCore. While the simulator is on, a ``torch.load`` whose
``map_location`` is a ``neuron`` device loads on the CPU and then moves every tensor of the result
(through dicts, lists and tuples) to that core, which gives the caller what the hardware would.
Other ``map_location`` forms (callables, dicts) are left to PyTorch.

Example::

    state = torch.load("optimizer.pt", map_location="neuron:1")   # tensors on neuron:1
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from neuroncompat.simulator import state

_original: Callable[..., Any] | None = None


def _neuron_target(map_location: Any) -> torch.device | None:
    if isinstance(map_location, (str, torch.device)):
        try:
            device = torch.device(map_location)
        except RuntimeError:
            return None
        if device.type == "neuron":
            return torch.device("neuron", state.current_device() if device.index is None else device.index)
    return None


def _moved(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return type(value)((k, _moved(v, device)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_moved(v, device) for v in value)
    return value


def _load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
    assert _original is not None
    device = _neuron_target(map_location) if state.enabled() else None
    if device is None:
        return _original(f, map_location, *args, **kwargs)
    return _moved(_original(f, "cpu", *args, **kwargs), device)


def install() -> None:
    global _original
    if _original is None:
        _original = torch.load
        torch.load = _load


def uninstall() -> None:
    global _original
    if _original is not None:
        torch.load = _original
        _original = None
