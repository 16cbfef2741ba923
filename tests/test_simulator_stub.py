"""The ``torch_neuronx`` stub carries TorchNeuron's documented module-level names (#23 item 7).

``UntypedStorage.is_neuron`` and ``torch.neuron.memory_summary`` (the other small false fails of item 7) are
covered in test_simulator_native.py (storages, memory statistics).
"""

from __future__ import annotations

import importlib
import sys

import pytest
import torch

from neuroncompat.simulator import torch_neuronx_stub


@pytest.mark.device_stats
def test_the_memory_functions_are_at_module_level(neuron: object) -> None:
    import torch_neuronx  # type: ignore[import-not-found]

    x = torch.ones(256, device="neuron")
    torch.neuron.synchronize()  # type: ignore[attr-defined]
    for name in torch_neuronx_stub.MEMORY_NAMES:
        assert callable(getattr(torch_neuronx, name)), name
    assert torch_neuronx.memory_allocated() == torch.neuron.memory_allocated() > 0  # type: ignore[attr-defined]
    assert torch_neuronx.memory_stats()["allocated_bytes.all.current"] == torch_neuronx.memory_allocated()
    assert "Allocated memory" in torch_neuronx.memory_summary()
    del x


def test_neuron_dynamo_backend_is_a_module_and_a_backend(neuron: object) -> None:
    import torch_neuronx

    helpers = importlib.import_module("torch_neuronx.neuron_dynamo_backend")
    assert helpers is torch_neuronx.neuron_dynamo_backend
    from torch_neuronx.neuron_dynamo_backend import get_dynamo_metrics  # type: ignore[import-not-found]

    before = get_dynamo_metrics()["graphs_compiled"]
    torch.compile(lambda x: x * 2, backend=torch_neuronx.neuron_dynamo_backend)(torch.ones(3, device="neuron"))
    torch.compile(lambda x: x + 1, backend="neuron")(torch.ones(3, device="neuron"))
    metrics = torch_neuronx.get_dynamo_metrics()
    assert metrics["graphs_compiled"] == before + 2 and metrics["graphs_rejected"] == 0
    assert len(metrics["signatures"]) == before + 2


def test_the_stub_goes_with_the_device(neuron: object) -> None:
    neuron.disable()  # type: ignore[attr-defined]
    assert "torch_neuronx" not in sys.modules and "torch_neuronx.neuron_dynamo_backend" not in sys.modules
    neuron.enable(cores=2)  # type: ignore[attr-defined]
    assert sys.modules["torch_neuronx"].__spec__.submodule_search_locations == []
