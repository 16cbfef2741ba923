"""``safetensors_device``: safetensors loads onto a NeuronCore (accelerate's multi-process ``load_state``)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType

import pytest
import torch


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file({"0.weight": torch.arange(12.0).reshape(4, 3), "0.bias": torch.ones(4)}, str(path))
    return path


def test_gap_safetensors_rejects_a_neuron_device(shim: ModuleType, weights: Path) -> None:
    from safetensors.torch import load_file

    with pytest.raises(Exception, match="device neuron:1 is invalid"):
        load_file(str(weights), device="neuron:1")


def test_load_file_and_load_model_land_on_the_core(
    shim: ModuleType, weights: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import safetensors.torch

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        loaded = safetensors.torch.load_file(str(weights), device="neuron:1")
        safetensors.torch.load_file(str(weights), device="neuron:1")
    assert {t.device for t in loaded.values()} == {torch.device("neuron", 1)}
    assert torch.equal(loaded["0.weight"].cpu(), torch.arange(12.0).reshape(4, 3))
    assert caplog.text.count("[safetensors_device] load_file(device='neuron:1')") == 1
    assert shim.status()["safetensors_device"].state == "applied"

    model = torch.nn.Sequential(torch.nn.Linear(3, 4)).to("neuron:1")
    missing, unexpected = safetensors.torch.load_model(model, str(weights), device="neuron:1")
    assert (missing, unexpected) == (set(), [])
    assert model[0].weight.device == torch.device("neuron", 1)
    assert torch.equal(model[0].weight.cpu(), torch.arange(12.0).reshape(4, 3))

    torch.neuron.set_device(1)
    try:  # an index-less "neuron" is the current core
        assert safetensors.torch.load_file(str(weights), device="neuron")["0.bias"].device.index == 1
    finally:
        torch.neuron.set_device(0)


def test_other_devices_are_passed_through(shim: ModuleType, weights: Path, caplog: pytest.LogCaptureFixture) -> None:
    import safetensors.torch

    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        assert {t.device.type for t in safetensors.torch.load_file(str(weights)).values()} == {"cpu"}
        assert {t.device.type for t in safetensors.torch.load_file(str(weights), device="cpu").values()} == {"cpu"}
    assert "[safetensors_device]" not in caplog.text


def test_disabled_by_name(shim: ModuleType, weights: Path) -> None:
    import safetensors.torch

    shim.apply(skip=["safetensors_device"])
    assert shim.status()["safetensors_device"].state == "disabled"
    with pytest.raises(Exception, match="device neuron:0 is invalid"):
        safetensors.torch.load_file(str(weights), device="neuron:0")
