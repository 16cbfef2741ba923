"""``diffusers_precision``: fp16 diffusers loads on Neuron are warned about, and made bf16 on opt-in."""

from __future__ import annotations

import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


def _dtypes(pipe: Any) -> dict[str, torch.dtype]:
    return {name: module.dtype for name, module in pipe.components.items() if isinstance(module, torch.nn.Module)}


def _load(path: Path, **kwargs: Any) -> Any:
    from diffusers import DiffusionPipeline

    return DiffusionPipeline.from_pretrained(path, **kwargs)


def test_fp16_is_kept_and_warned_once(shim: ModuleType, tiny_sd: Path, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        pipe = _load(tiny_sd, dtype=torch.float16)
    assert set(_dtypes(pipe).values()) == {torch.float16}
    assert caplog.text.count("[diffusers_precision]") == 1
    assert "DiffusionPipeline.from_pretrained(dtype=torch.float16) kept: fp16 runs on Neuron" in caplog.text
    latents = pipe.to("neuron")("a cat", num_inference_steps=1, output_type="latent").images
    assert latents.dtype == torch.float16


def test_opt_in_loads_bf16(
    shim: ModuleType, tiny_sd: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NEURONCOMPAT_DIFFUSERS_DTYPE", "bf16")
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        pipe = _load(tiny_sd, torch_dtype=torch.float16)
        unet = type(pipe.unet).from_pretrained(tiny_sd, subfolder="unet", dtype=torch.float16)
    assert set(_dtypes(pipe).values()) == {torch.bfloat16} and unet.dtype == torch.bfloat16
    assert "DiffusionPipeline.from_pretrained(torch_dtype=torch.float16) -> torch.bfloat16" in caplog.text
    assert "UNet2DConditionModel.from_pretrained(dtype=torch.float16) -> torch.bfloat16" in caplog.text


def test_a_per_component_dict(shim: ModuleType, tiny_sd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONCOMPAT_DIFFUSERS_DTYPE", "bf16")
    shim.apply()
    pipe = _load(tiny_sd, dtype={"vae": torch.float32, "default": torch.float16})
    assert _dtypes(pipe) == {"vae": torch.float32, "unet": torch.bfloat16, "text_encoder": torch.bfloat16}


def test_bf16_and_fp32_say_nothing(shim: ModuleType, tiny_sd: Path, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        _load(tiny_sd, dtype=torch.bfloat16)
        _load(tiny_sd)
    assert "[diffusers_precision]" not in caplog.text


def test_disabled_by_name(
    shim: ModuleType, tiny_sd: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NEURONCOMPAT_DIFFUSERS_DTYPE", "bf16")
    shim.apply(skip=["diffusers_precision"])
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        pipe = _load(tiny_sd, dtype=torch.float16)
    assert set(_dtypes(pipe).values()) == {torch.float16}
    assert "[diffusers_precision]" not in caplog.text
