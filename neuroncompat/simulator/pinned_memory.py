"""Pinned host memory for the simulated device.

The Trainer's DataLoader pins batches by default (``dataloader_pin_memory=True``), which asks
the current accelerator's hooks for a pinned-memory allocator. A Python PrivateUse1 backend
cannot register one (``torch._C._acc.PrivateUse1Hooks`` exposes no allocator hook), so while the
simulator is on, ``Tensor.pin_memory`` returns the CPU tensor itself: page-locking changes
transfer speed, never values. Whether torch-neuronx's allocator pins is a question for hardware
(research/neuron_gaps.md §3.18); the simulator assumes it does.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from neuroncompat.simulator import state

_original: Callable[..., torch.Tensor] | None = None


def _pin_memory(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    if state.enabled() and self.device.type == "cpu":
        return self
    assert _original is not None
    return _original(self, *args, **kwargs)


def install() -> None:
    global _original
    if _original is None:
        _original = torch.Tensor.pin_memory
        torch.Tensor.pin_memory = _pin_memory  # type: ignore[method-assign]


def uninstall() -> None:
    global _original
    if _original is not None:
        torch.Tensor.pin_memory = _original  # type: ignore[method-assign]
        _original = None
