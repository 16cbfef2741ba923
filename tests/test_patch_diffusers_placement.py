"""``device_map`` and ``dispatch_model`` reach diffusers: pipelines and models placed with "balanced"/"auto"
load to the rank-local NeuronCore, not silently to the CPU."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


def _devices(pipe: Any) -> dict[str, str]:
    return {
        name: str(next(module.parameters()).device)
        for name, module in pipe.components.items()
        if isinstance(module, torch.nn.Module)
    }


def _pipeline(path: Path, **kwargs: Any) -> Any:
    from diffusers import DiffusionPipeline

    return DiffusionPipeline.from_pretrained(path, **kwargs)


def _unet(path: Path, **kwargs: Any) -> Any:
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel.from_pretrained(path, subfolder="unet", **kwargs)


def test_gap_balanced_and_auto_stay_on_the_cpu(shim: ModuleType, tiny_sd: Path) -> None:
    """accelerate's get_max_memory finds no Neuron memory: diffusers keeps everything on the CPU, silently."""
    assert set(_devices(_pipeline(tiny_sd, device_map="balanced")).values()) == {"cpu"}
    assert next(_unet(tiny_sd, device_map="auto").parameters()).device.type == "cpu"


def test_a_balanced_pipeline_loads_to_the_rank_local_core(
    shim: ModuleType, tiny_sd: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        pipe = _pipeline(tiny_sd, device_map="balanced")
    assert _devices(pipe) == {"unet": "neuron:1", "vae": "neuron:1", "text_encoder": "neuron:1"}
    assert pipe.hf_device_map == {"unet": 1, "vae": 1, "text_encoder": 1}
    assert 'DiffusionPipeline device_map="balanced": every component -> neuron:1' in caplog.text
    image = pipe("a cat", num_inference_steps=1, output_type="latent").images
    assert image.device == torch.device("neuron", 1)


@pytest.mark.parametrize("strategy", ["auto", "balanced"])
def test_a_model_loads_to_the_rank_local_core(shim: ModuleType, tiny_sd: Path, strategy: str) -> None:
    shim.apply()
    unet = _unet(tiny_sd, device_map=strategy)
    assert {p.device for p in unet.parameters()} == {torch.device("neuron", 0)}


def test_explicit_choices_are_kept(shim: ModuleType, tiny_sd: Path) -> None:
    shim.apply()
    assert next(_unet(tiny_sd, device_map="auto", max_memory={"cpu": "1GiB"}).parameters()).device.type == "cpu"
    assert set(_devices(_pipeline(tiny_sd, device_map="balanced", max_memory={"cpu": "1GiB"})).values()) == {"cpu"}
    assert next(_unet(tiny_sd, device_map={"": "cpu"}).parameters()).device.type == "cpu"


def test_spreading_a_pipeline_is_opt_in(shim: ModuleType, tiny_sd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NEURONCOMPAT_DEVICE_MAP=balanced: diffusers' own assignment over both cores (largest component first)."""
    monkeypatch.setenv("NEURONCOMPAT_DEVICE_MAP", "balanced")
    shim.apply()
    pipe = _pipeline(tiny_sd, device_map="balanced")
    assert _devices(pipe) == {"unet": "neuron:0", "vae": "neuron:1", "text_encoder": "neuron:1"}


def test_dispatch_model_is_rebound_in_diffusers(shim: ModuleType) -> None:
    """diffusers imports accelerate's dispatch_model by name: its bindings get the fixed one."""
    shim.apply()
    import accelerate
    import diffusers.models.modeling_utils as modeling_utils
    import diffusers.pipelines.pipeline_loading_utils as loading_utils

    assert modeling_utils.dispatch_model is accelerate.dispatch_model
    assert loading_utils.dispatch_model is accelerate.dispatch_model
    assert getattr(accelerate.dispatch_model, "__wrapped__", None) is not None
    model = torch.nn.Linear(2, 2)
    loading_utils.dispatch_model(model, device_map={"": 1})
    assert model.weight.device == torch.device("neuron", 1)


def test_disabled_by_name(shim: ModuleType, tiny_sd: Path) -> None:
    shim.apply(skip=["device_map"])
    assert set(_devices(_pipeline(tiny_sd, device_map="balanced")).values()) == {"cpu"}
