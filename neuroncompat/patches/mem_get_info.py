"""``mem_get_info``: the device module answers ``mem_get_info()``, which device-generic code calls on it.

Gap (docs/gaps.md#mem_get_info): library-style scripts ask the free memory of whatever accelerator they run on
with ``getattr(torch, device_type, torch.cuda).mem_get_info()``, ``device_type`` from
``torch.accelerator.current_accelerator().type``. On Neuron that is ``torch.neuron.mem_get_info()``, and
TorchNeuron documents no such function: its memory API (the memory-profiling guide,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html) is
``memory_allocated``/``memory_reserved``/``memory_stats``, their peaks and resets, ``memory_summary`` and the
snapshots; transformers learnt the same (its PR #47029). The call dies with ``AttributeError: module
'torch.neuron' has no attribute 'mem_get_info'``, and no codemod sees a call through ``getattr``.

Fix: ``torch.neuron.mem_get_info(device=None)`` is added, with CUDA's signature and answer, ``(free, total)`` in
bytes of one NeuronCore (the current one, or ``device``: an index, ``"neuron:1"``, a ``torch.device``). It is
computed from what the backend reports: ``torch.accelerator.get_memory_info(index)`` (PyTorch's generic
answer; AWS documents ``torch.accelerator`` code as needing no change, not whether the Neuron allocator answers
this one, so a ``RuntimeError`` from it is taken as "no"), else the core's size from
``get_device_properties(index).total_memory`` less what this process's allocator holds
(``memory_reserved``, else ``memory_allocated``). The first call logs once where the answer comes from.
Stands down where ``torch.neuron`` already has ``mem_get_info``: TorchNeuron's own is then left alone.

Example::

    device_type = torch.accelerator.current_accelerator().type             # "neuron"
    free, total = getattr(torch, device_type, torch.cuda).mem_get_info()
    # before: AttributeError: module 'torch.neuron' has no attribute 'mem_get_info'
    # after:  (free, total) bytes of the current NeuronCore
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


class MemGetInfo(Patch):
    id = "mem_get_info"
    reason = "torch.neuron has no mem_get_info, which device-generic code calls as getattr(torch, device_type)"
    targets = ("torch",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        neuron = getattr(module, "neuron", None)
        if neuron is None or hasattr(neuron, "mem_get_info"):
            return False
        self.replace(neuron, "mem_get_info", self._mem_get_info(neuron))
        return True

    def _mem_get_info(self, neuron: ModuleType) -> Any:
        patch = self

        def mem_get_info(device: Any = None) -> tuple[int, int]:
            """``(free, total)`` bytes of a NeuronCore, as ``torch.cuda.mem_get_info`` answers for a GPU."""
            import torch

            index = _core_index(neuron, device)
            try:
                free, total = torch.accelerator.get_memory_info(index)
                source = "torch.accelerator.get_memory_info"
            except (RuntimeError, AttributeError):  # a backend without the generic memory API
                total = neuron.get_device_properties(index).total_memory
                held = getattr(neuron, "memory_reserved", None) or neuron.memory_allocated
                free, source = total - held(index), "the core's total_memory less this process's reserved memory"
            patch.changed("torch.neuron.mem_get_info() answered from %s (TorchNeuron has no mem_get_info)", source)
            return int(free), int(total)

        return mem_get_info


def _core_index(neuron: ModuleType, device: Any) -> int:
    """The NeuronCore index ``device`` names (None: the current core), as ``torch.cuda`` reads its argument."""
    import torch

    if device is None:
        return int(neuron.current_device())
    if isinstance(device, int):
        return device
    target = torch.device(device)
    if target.type != "neuron":
        raise ValueError(f"torch.neuron.mem_get_info: expected a neuron device, got {target}")
    return int(neuron.current_device()) if target.index is None else target.index
