"""``diffusers_complex``: a diffusers model that computes complex64 (QwenImage's rotary embeddings) warns once
when it is put on a NeuronCore, says so louder when ``TORCH_NEURONX_COMPLEX_DECOMPOSE`` is off, and changes
nothing; real-valued models (the SD UNet, Flux) say nothing."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")

from neuroncompat.testing import tiny_pipeline  # noqa: E402  (after the skip)

WARNING = "[diffusers_complex] QwenImageTransformer2DModel computes complex64 (its rotary embeddings) on the NeuronCore"


def _qwen_transformer() -> Any:
    return tiny_pipeline("qwenimage").transformer


def test_gap_complex_rotary_embeddings_reach_the_device(neuron: object) -> None:
    """QwenImage's rotary embedding moves complex64 frequencies to the device (the simulator accepts them)."""
    transformer = _qwen_transformer().to("neuron")
    freqs = transformer.pos_embed([(1, 4, 4)], device=torch.device("neuron"), max_txt_seq_len=7)
    assert {f.dtype for f in freqs} == {torch.complex64} and {f.device.type for f in freqs} == {"neuron"}


def test_a_complex_model_on_the_device_warns_once(
    shim: ModuleType, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", raising=False)
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        pipe = tiny_pipeline("qwenimage")
        pipe.transformer.to("cpu")  # not on the device: nothing to say
        assert WARNING not in caplog.text
        pipe.to("neuron")
        pipe.transformer.to("neuron")
    assert caplog.text.count(WARNING) == 1
    assert "Compile the whole model" in caplog.text and "compile_repeated_blocks" in caplog.text
    assert next(pipe.transformer.parameters()).device.type == "neuron"  # nothing changed


def test_decomposition_turned_off_is_named(
    shim: ModuleType, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCH_NEURONX_COMPLEX_DECOMPOSE", "0")
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        _qwen_transformer().to("neuron")
    assert "with TORCH_NEURONX_COMPLEX_DECOMPOSE=0: neuronx-cc rejects complex dtypes (NCC_EVRF004)" in caplog.text


def test_real_valued_models_say_nothing(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        tiny_pipeline("sd").to("neuron")
        tiny_pipeline("flux").to("neuron")
    assert "[diffusers_complex]" not in caplog.text


def test_disabled_by_name(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply(skip=["diffusers_complex"])
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        _qwen_transformer().to("neuron")
    assert "[diffusers_complex]" not in caplog.text
