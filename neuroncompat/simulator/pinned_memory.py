"""Pinned host memory for the simulated device.

The Trainer's DataLoader pins batches by default (``dataloader_pin_memory=True``), which asks
the current accelerator's hooks for a pinned-memory allocator. A Python PrivateUse1 backend
cannot register one (``torch._C._acc.PrivateUse1Hooks`` exposes no allocator hook), so while the
simulator is on, ``Tensor.pin_memory`` returns the CPU tensor itself: page-locking changes
transfer speed, never values. Whether torch-neuronx's allocator pins is a question for hardware
(docs/gaps.md, "Other facts"); the simulator assumes it does.

DDP with ``find_unused_parameters=True`` (the Trainer's default for models that are not a
``PreTrainedModel``, such as a PEFT LoRA model) copies its used-parameter map through pinned
memory allocated in C++, out of reach of the override above. While the simulator is on, such a
DDP runs with ``find_unused_parameters=False``, logged: every parameter that needs a gradient
must then take part in each step (true of LoRA), or DDP raises where hardware would not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from neuroncompat.simulator import state

logger = logging.getLogger("neuroncompat.simulator")

_original: Callable[..., torch.Tensor] | None = None
_original_ddp_init: Callable[..., None] | None = None


def _pin_memory(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    if state.enabled() and self.device.type == "cpu":
        return self
    assert _original is not None
    return _original(self, *args, **kwargs)


def _ddp_init(self: DistributedDataParallel, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
    on_neuron = any(p.device.type == "neuron" for p in module.parameters())
    if state.enabled() and on_neuron and kwargs.get("find_unused_parameters"):
        kwargs["find_unused_parameters"] = False
        logger.warning(
            "simulator: DDP(find_unused_parameters=True) runs with False (its used-parameter map "
            "needs pinned memory a Python device cannot provide); on Trainium it runs as written"
        )
    assert _original_ddp_init is not None
    _original_ddp_init(self, module, *args, **kwargs)


def install() -> None:
    global _original, _original_ddp_init
    if _original is None:
        _original = torch.Tensor.pin_memory
        torch.Tensor.pin_memory = _pin_memory  # type: ignore[method-assign, assignment]
    if _original_ddp_init is None:
        _original_ddp_init = DistributedDataParallel.__init__
        DistributedDataParallel.__init__ = _ddp_init  # type: ignore[method-assign]


def uninstall() -> None:
    global _original, _original_ddp_init
    if _original is not None:
        torch.Tensor.pin_memory = _original  # type: ignore[method-assign]
        _original = None
    if _original_ddp_init is not None:
        DistributedDataParallel.__init__ = _original_ddp_init  # type: ignore[method-assign]
        _original_ddp_init = None
