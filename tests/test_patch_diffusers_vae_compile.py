"""``diffusers_vae_compile``: ``torch.compile(pipe.vae)`` also compiles the ``decode`` that pipelines call."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


def _pipe() -> Any:
    from neuroncompat.testing import stable_diffusion_pipeline

    pipe = stable_diffusion_pipeline().to("neuron")
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _run(pipe: Any) -> None:
    pipe("a cat", num_inference_steps=2, generator=torch.Generator("cpu").manual_seed(0), output_type="latent")
    pipe.vae.decode(torch.zeros(1, 4, 32, 32, device="neuron"))


def _compiled() -> list[str]:
    """The function of each graph the simulated backend compiled (``decode``, ``encode``, ``forward``)."""
    from neuroncompat import simulator

    return [graph.code.rsplit("(", 1)[-1].rstrip(")").split(".")[-1] for graph in simulator.compiles()]


def test_gap_compiling_the_vae_module_compiles_no_decode(shim: ModuleType) -> None:
    pipe = _pipe()
    pipe.vae = torch.compile(pipe.vae, backend="neuron", fullgraph=True, dynamic=False)
    _run(pipe)
    assert _compiled() == []


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_decode_and_encode_are_compiled(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    pipe = _pipe()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        pipe.vae = torch.compile(pipe.vae, backend="neuron", fullgraph=True, dynamic=False)
    _run(pipe)
    _run(pipe)
    assert _compiled() == ["decode"]
    pipe.vae.encode(torch.zeros(1, 3, 64, 64, device="neuron"))
    assert _compiled() == ["decode", "encode"]
    assert "torch.compile(AutoencoderKL) also compiles its decode and encode" in caplog.text


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
def test_module_compile_in_place(shim: ModuleType) -> None:
    """``vae.compile()`` compiles ``_call_impl`` only: decode and encode follow."""
    shim.apply()
    pipe = _pipe()
    pipe.vae.compile(backend="neuron", dynamic=False)
    _run(pipe)
    assert _compiled() == ["decode"]


def test_a_decode_the_user_compiled_is_kept(shim: ModuleType) -> None:
    shim.apply()
    pipe = _pipe()
    own = torch.compile(pipe.vae.decode, backend="neuron", dynamic=False)
    pipe.vae.decode = own
    torch.compile(pipe.vae, backend="neuron")
    assert pipe.vae.decode is own
    assert "encode" in pipe.vae.__dict__


def test_other_modules_and_revert(shim: ModuleType) -> None:
    shim.apply()
    pipe = _pipe()
    torch.compile(pipe.unet, backend="neuron")
    assert "decode" not in pipe.unet.__dict__
    torch.compile(pipe.vae, backend="neuron")
    assert {"decode", "encode"} <= set(pipe.vae.__dict__)
    shim.revert()
    assert not {"decode", "encode"} & set(pipe.vae.__dict__)


def test_disabled_by_name(shim: ModuleType) -> None:
    shim.apply(skip=["diffusers_vae_compile"])
    pipe = _pipe()
    torch.compile(pipe.vae, backend="neuron")
    assert "decode" not in pipe.vae.__dict__
