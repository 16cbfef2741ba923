"""``diffusers_warmup``: diffusers' caching-allocator warm-up allocates nothing on the NeuronCores."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


@pytest.fixture
def device_empties(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every ``torch.empty`` the loading code asks of the neuron device."""
    seen: list[Any] = []
    empty = torch.empty

    def recording_empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        if str(kwargs.get("device", "")).startswith("neuron"):
            seen.append(args)
        return empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", recording_empty)
    yield seen


def _unet(path: Path) -> Any:
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_pretrained(path, subfolder="unet", device_map="neuron")


def test_gap_the_warmup_allocates_on_the_device(shim: ModuleType, tiny_sd: Path, device_empties: list[Any]) -> None:
    unet = _unet(tiny_sd)
    elements = sum(p.numel() for p in unet.parameters())
    assert device_empties == [(elements // 2,)]


def test_no_warmup_on_neuron(
    shim: ModuleType, tiny_sd: Path, device_empties: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        unet = _unet(tiny_sd)
    assert device_empties == []
    assert next(unet.parameters()).device.type == "neuron"
    assert "UNet2DConditionModel: caching-allocator warm-up skipped on the NeuronCores" in caplog.text


def test_disabled_by_name(shim: ModuleType, tiny_sd: Path, device_empties: list[Any]) -> None:
    shim.apply(skip=["diffusers_warmup"])
    _unet(tiny_sd)
    assert len(device_empties) == 1
