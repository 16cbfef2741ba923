"""Where the C++ device guard cannot be built: resolve index-less ``neuron`` in Python instead.

On a trn2 each rank calls ``torch.neuron.set_device(local_rank)`` (accelerate and torchrun-aware
scripts do), and from then on ``"neuron"`` without an index names that core, the way ``"cuda"``
names the current GPU. PyTorch resolves an index-less device in C++ through the backend's device
guard; the simulator's own C++ guard (``native_device``) answers with the current core, and then
this module is not installed. It is the fallback for machines without a C++ compiler, where the
only guard a Python backend can register (``torch._C._acc.DeviceGuard``) hard-codes
``getDevice()`` to index 0, ``setDevice`` to a no-op and has no ``synchronizeDevice``. Then the
entry points that resolve the index that way take the current core from the simulator first:

- ``Tensor.to`` (and with it ``Module.to``) and ``torch.as_tensor``: an index-less ``neuron``
  argument becomes ``neuron:{current}``; factories such as ``torch.ones(..., device="neuron")``
  reach the simulator's kernels with the index still unset and need nothing. ``torch.tensor`` is
  not wrapped: the wrapper would live in a file Dynamo skips (``compile_backend`` adds the
  simulator's files to its skip list), so every ``torch.tensor`` inside compiled code would become
  a graph break, which the real device does not have. Without the C++ guard,
  ``torch.tensor(data, device="neuron")`` lands on core 0.
- ``torch.accelerator``'s device-index and synchronize bindings (``current_device_index``,
  ``set_device_index``, ``device_index``, ``synchronize``) read and set the simulator's current
  core; ``synchronize`` waits for nothing, since every op has finished on the CPU when it returns.

Example (rank 1)::

    torch.neuron.set_device(1)
    torch.ones(2).to("neuron").device                 # neuron:1
    torch.accelerator.current_device_index()          # 1
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from neuroncompat.simulator import state

_NEURON = "neuron"
_originals: dict[tuple[object, str], Callable[..., Any]] = {}


def _resolved(device: Any) -> Any:
    """``device`` with the current core filled in when it is an index-less ``neuron``."""
    if device.__class__ is str:
        if device == _NEURON:
            return torch.device(_NEURON, state.current_device())
    elif device.__class__ is torch.device and device.type == _NEURON and device.index is None:
        return torch.device(_NEURON, state.current_device())
    return device


def _with_device_resolved(original: Callable[..., Any], positional: int | None) -> Callable[..., Any]:
    """Wrap ``original`` so its ``device`` argument (keyword, or at ``positional``) is resolved."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs:
            kwargs["device"] = _resolved(kwargs["device"])
        elif positional is not None and len(args) > positional:
            resolved = _resolved(args[positional])
            if resolved is not args[positional]:
                args = (*args[:positional], resolved, *args[positional + 1 :])
        return original(*args, **kwargs)

    call.__name__ = getattr(original, "__name__", "call")
    call.__doc__ = original.__doc__
    return call


# -- torch.accelerator's bindings ------------------------------------------------------------
def _get_device_index() -> int:
    return state.current_device()


def _set_device_index(index: int) -> None:
    if index >= 0:  # torch.accelerator.set_device_index: a negative index is a no-op
        state.set_current_device(index)


def _exchange_device(index: int) -> int:
    previous = state.current_device()
    _set_device_index(index)
    return previous


def _synchronize_device(index: int) -> None:
    """Every op has run to completion on the CPU by the time it returns: nothing is in flight."""
    if index >= 0:
        state.check_index(index)


_ACCELERATOR: dict[str, Callable[..., Any]] = {
    "_accelerator_getDeviceIndex": _get_device_index,
    "_accelerator_setDeviceIndex": _set_device_index,
    "_accelerator_exchangeDevice": _exchange_device,
    "_accelerator_maybeExchangeDevice": _exchange_device,
    "_accelerator_synchronizeDevice": _synchronize_device,
}


def _replace(owner: object, name: str, value: Callable[..., Any]) -> None:
    _originals[(owner, name)] = getattr(owner, name)
    setattr(owner, name, value)


def install() -> None:
    """Resolve index-less ``neuron`` to the current core (idempotent)."""
    if _originals:
        return
    # ``with torch.device(...)`` injects its device into the factories it finds, by identity, in a
    # cached set built on first use: build it now, so it holds the real ``torch.as_tensor`` (which
    # the wrapper calls) and not the wrapper (transformers detects a meta-device context that way).
    torch.utils._device._device_constructors()
    _replace(torch.Tensor, "to", _with_device_resolved(torch.Tensor.to, positional=1))  # args[0] is self
    _replace(torch, "as_tensor", _with_device_resolved(torch.as_tensor, positional=2))
    for name, value in _ACCELERATOR.items():
        _replace(torch._C, name, value)


def uninstall() -> None:
    for (owner, name), original in _originals.items():
        setattr(owner, name, original)
    _originals.clear()
