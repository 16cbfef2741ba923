"""``mem_get_info``: ``getattr(torch, device_type, torch.cuda).mem_get_info()`` answers on Neuron (issue 41).

The simulated ``torch.neuron`` has no ``mem_get_info``, as TorchNeuron's documented memory API has none.
"""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
import torch

MIB = 1 << 20


def device_generic_free_memory(device: object = None) -> tuple[int, int]:
    """The spelling of a library-style script: the accelerator's own module, else CUDA's."""
    device_type = torch.accelerator.current_accelerator().type
    module = getattr(torch, device_type, torch.cuda)
    return module.mem_get_info() if device is None else module.mem_get_info(device)


def test_the_device_module_has_no_mem_get_info_without_the_shim(neuron: object) -> None:
    with pytest.raises(AttributeError, match="mem_get_info"):
        device_generic_free_memory()


def test_mem_get_info_answers_free_and_total_of_the_core(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    torch.neuron.set_device(0)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        free, total = device_generic_free_memory()
        before, _ = device_generic_free_memory("neuron:1")
        block = torch.empty(64 * MIB, dtype=torch.uint8, device="neuron:1")
        after, total_1 = device_generic_free_memory(torch.device("neuron", 1))
        del block
    assert total == total_1 == torch.neuron.get_device_properties(0).total_memory
    assert 0 < free <= total
    assert before - after >= 64 * MIB  # the block is held on core 1
    assert caplog.text.count("[mem_get_info]") == 1 and "torch.accelerator.get_memory_info" in caplog.text
    assert shim.status()["mem_get_info"].state == "applied"
    with pytest.raises(ValueError, match="expected a neuron device, got cuda:0"):
        torch.neuron.mem_get_info("cuda:0")


def test_without_the_generic_api_it_answers_from_the_core_size(
    shim: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend whose allocator torch.accelerator cannot ask: total memory less what this process holds."""
    shim.apply()

    def refused(index: int) -> tuple[int, int]:
        raise RuntimeError("Allocator for neuron is not a DeviceAllocator")

    monkeypatch.setattr(torch.accelerator, "get_memory_info", refused)
    block = torch.empty(8 * MIB, dtype=torch.uint8, device="neuron:1")
    free, total = torch.neuron.mem_get_info(1)
    assert total == torch.neuron.get_device_properties(1).total_memory
    assert free == total - torch.neuron.memory_reserved(1) and free <= total - 8 * MIB
    del block


def test_disabled_by_name(shim: ModuleType) -> None:
    shim.apply(skip=["mem_get_info"])
    assert shim.status()["mem_get_info"].state == "disabled"
    assert not hasattr(torch.neuron, "mem_get_info")
