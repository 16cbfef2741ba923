"""The tiny SD, SDXL, Flux and QwenImage pipelines of ``neuroncompat.testing`` on the simulated device (issue 24).

Each runs eagerly and compiled (``backend="neuron"``, ``fullgraph=True``, ``dynamic=False``) and gives the
CPU's images: the simulated device computes with the CPU's kernels, so any difference is a placement or a
simulator bug. The compiled runs count the graphs docs/gaps.md ("diffusers dry run") gives. Offloading, which the Python-era simulator broke (``NeuronTensor.__new__(requires_grad=)`` in
``enable_sequential_cpu_offload``), runs on the native device and matches too; group offloading moves with
``tensor.data = <device tensor>``, which stock torch refuses between the CPU and a PrivateUse1 device, so it runs
with the shim (patch ``cross_device_data``) and fails without it, as on a trn2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("diffusers")

from neuroncompat.testing import tiny_pipeline  # noqa: E402  (after the skip)

COMPILE = {"backend": "neuron", "fullgraph": True, "dynamic": False}


def _generator() -> torch.Generator:
    return torch.Generator("cpu").manual_seed(0)


def _call(kind: str, pipe: Any, **changes: Any) -> np.ndarray:
    """Two denoising steps at the size each tiny pipeline is made for, as a float array."""
    arguments: dict[str, Any] = {"num_inference_steps": 2, "generator": _generator(), "output_type": "np"}
    if kind == "qwenimage":
        length = changes.pop("prompt_length", 7)
        embeds = torch.randn(1, length, 16, generator=torch.Generator().manual_seed(1)).to(pipe.device)
        mask = torch.ones(1, length, dtype=torch.long, device=pipe.device)  # the pipeline uses them as given
        arguments.update(prompt_embeds=embeds, prompt_embeds_mask=mask, height=32, width=32, true_cfg_scale=1.0)
    elif kind == "flux":
        arguments.update(prompt="a cat", height=16, width=16, max_sequence_length=48)
    else:
        arguments.update(prompt="a cat")
    arguments.update(changes)
    return pipe(**arguments).images


@pytest.fixture
def static_shapes(neuron: object) -> Iterator[Any]:
    """The simulated device with Dynamo's static shapes (what the shim's dynamic_shapes patch sets)."""
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        yield neuron


def _compiled_by(simulator: Any) -> list[str]:
    return [graph.code.rsplit("(", 1)[-1].rstrip(")") for graph in simulator.compiles()]


@pytest.mark.parametrize("kind", ["sd", pytest.param("sdxl", marks=pytest.mark.slow), "flux", "qwenimage"])
def test_eager_pipeline_on_the_device_equals_the_cpu(kind: str, neuron: object) -> None:
    expected = _call(kind, tiny_pipeline(kind))
    got = _call(kind, tiny_pipeline(kind).to("neuron"))
    np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.slow  # compiles a UNet and a decoder
def test_compiled_sd_pipeline_equals_the_cpu_with_two_graphs(static_shapes: Any) -> None:
    expected = _call("sd", tiny_pipeline("sd"))
    pipe = tiny_pipeline("sd").to("neuron")
    pipe.unet = torch.compile(pipe.unet, **COMPILE)
    pipe.vae.decode = torch.compile(pipe.vae.decode, **COMPILE)
    np.testing.assert_allclose(_call("sd", pipe), expected, atol=1e-5)
    np.testing.assert_allclose(
        _call("sd", pipe, num_inference_steps=3), _call("sd", tiny_pipeline("sd"), num_inference_steps=3), atol=1e-5
    )
    assert sorted(_compiled_by(static_shapes)) == ["AutoencoderKL.decode", "UNet2DConditionModel.forward"]


@pytest.mark.slow  # compiles the SDXL UNet
def test_compiled_sdxl_unet_equals_the_cpu(static_shapes: Any) -> None:
    expected = _call("sdxl", tiny_pipeline("sdxl"))
    pipe = tiny_pipeline("sdxl").to("neuron")
    pipe.unet = torch.compile(pipe.unet, **COMPILE)
    np.testing.assert_allclose(_call("sdxl", pipe), expected, atol=1e-5)
    assert _compiled_by(static_shapes) == ["UNet2DConditionModel.forward"]


def _regional(pipe: Any) -> Any:
    """The TorchNeuron launch post's regional compile: the repeated blocks, and the decode."""
    pipe.transformer.compile_repeated_blocks(**COMPILE)
    pipe.vae.decode = torch.compile(pipe.vae.decode, **COMPILE)
    return pipe


@pytest.mark.slow  # compiles the Flux blocks and the decoder
def test_regionally_compiled_flux_equals_the_cpu(static_shapes: Any) -> None:
    expected = _call("flux", tiny_pipeline("flux"))
    pipe = _regional(tiny_pipeline("flux").to("neuron"))
    np.testing.assert_allclose(_call("flux", pipe), expected, atol=1e-5)
    graphs = _compiled_by(static_shapes)
    assert sorted(set(graphs)) == [
        "AutoencoderKL.decode",
        "FluxSingleTransformerBlock.forward",
        "FluxTransformerBlock.forward",
    ]
    assert len(graphs) == 3  # one block of each class: no stride guard splits a single block's graph
    _call("flux", pipe, num_inference_steps=3)
    assert len(static_shapes.compiles()) == 3  # more steps: no graph


@pytest.mark.slow  # compiles the QwenImage blocks
def test_qwenimage_blocks_recompile_per_prompt_length(static_shapes: Any) -> None:
    """Its embeddings are padded to the longest prompt only, so a new prompt length is a new block graph."""
    expected = _call("qwenimage", tiny_pipeline("qwenimage"))
    pipe = tiny_pipeline("qwenimage").to("neuron")
    pipe.transformer.compile_repeated_blocks(**COMPILE)
    np.testing.assert_allclose(_call("qwenimage", pipe), expected, atol=1e-5)
    assert _compiled_by(static_shapes) == ["QwenImageTransformerBlock.forward"]
    _call("qwenimage", pipe)
    assert len(static_shapes.compiles()) == 1
    _call("qwenimage", pipe, prompt_length=9)
    assert len(static_shapes.compiles()) == 2


OFFLOADS: dict[str, Callable[[Any], None]] = {
    "sequential": lambda pipe: pipe.enable_sequential_cpu_offload(device="neuron"),
    "model": lambda pipe: pipe.enable_model_cpu_offload(device="neuron"),
    "group": lambda pipe: pipe.enable_group_offload(
        onload_device=torch.device("neuron"), offload_type="block_level", num_blocks_per_group=1
    ),
}


@pytest.mark.parametrize("offload", sorted(OFFLOADS))
def test_offloaded_pipeline_equals_the_cpu(offload: str, shim: Any) -> None:
    expected = _call("sd", tiny_pipeline("sd"))
    if offload == "group":  # moves with `tensor.data =`, refused across the CPU and the device as by stock torch
        pipe = tiny_pipeline("sd")
        OFFLOADS[offload](pipe)
        with pytest.raises(RuntimeError, match="incompatible tensor type"):
            _call("sd", pipe)
        shim.apply()  # patch cross_device_data
    pipe = tiny_pipeline("sd")
    OFFLOADS[offload](pipe)
    np.testing.assert_allclose(_call("sd", pipe), expected, atol=1e-5)
