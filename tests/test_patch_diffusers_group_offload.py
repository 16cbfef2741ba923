"""``diffusers_group_offload``: ``use_stream=True`` runs without streams where ``torch.neuron`` has none."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


def _pipe() -> Any:
    from neuroncompat.testing import stable_diffusion_pipeline

    pipe = stable_diffusion_pipeline()
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _image(pipe: Any) -> Any:
    generator = torch.Generator("cpu").manual_seed(0)
    return pipe("a cat", num_inference_steps=2, generator=generator, output_type="np").images


def _offload(pipe: Any) -> None:
    pipe.enable_group_offload(onload_device=torch.device("neuron"), offload_type="leaf_level", use_stream=True)


@pytest.fixture
def no_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch.neuron without ``Stream``: TorchNeuron does not document one."""
    monkeypatch.delattr(torch.neuron, "Stream")


def test_gap_use_stream_raises_without_streams(shim: ModuleType, no_streams: None) -> None:
    with pytest.raises(ValueError, match="Pass `use_stream=False`"):
        _offload(_pipe())


def test_offloads_without_streams(shim: ModuleType, no_streams: None, caplog: pytest.LogCaptureFixture) -> None:
    expected = _image(_pipe())
    shim.apply()
    pipe = _pipe()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        _offload(pipe)
        pipe.vae.enable_group_offload(onload_device="neuron", use_stream=True, offload_type="leaf_level")
    assert pipe.unet.conv_in.weight.device.type == "cpu"  # offloaded between uses
    assert (abs(_image(pipe) - expected)).max() < 1e-6
    assert caplog.text.count("group offloading use_stream=True -> False") == 1


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_streams_are_kept_where_the_backend_has_them(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """The simulator's torch.neuron has Stream: the user's request stands."""
    shim.apply()
    pipe = _pipe()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        _offload(pipe)
        _image(pipe)
    assert "[diffusers_group_offload]" not in caplog.text


def test_disabled_by_name(shim: ModuleType, no_streams: None) -> None:
    shim.apply(skip=["diffusers_group_offload"])
    with pytest.raises(ValueError, match="Pass `use_stream=False`"):
        _offload(_pipe())
