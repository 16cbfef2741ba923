"""``diffusers_attention``: CUDA-only diffusers attention backends become the native SDPA one on Neuron."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

import pytest
import torch

pytest.importorskip("diffusers")


def _unet() -> Any:
    """The tiny pipeline's UNet on the device (its processors call SDPA; the registry holds the backend)."""
    from neuroncompat.testing import stable_diffusion_pipeline

    return stable_diffusion_pipeline().unet.to("neuron")


def _flux() -> Any:
    """A tiny Flux transformer on the device, diffusers' test config: its processors dispatch by backend."""
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(0)
    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=4,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=[4, 4, 8],
    ).to("neuron")


def _active() -> str:
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    return str(_AttentionBackendRegistry._active_backend.value)


def _backends(model: Any) -> set[str | None]:
    """The backend each attention processor will dispatch to (None: the registry's active one)."""
    from diffusers.models.attention import AttentionModuleMixin

    return {
        getattr(m.processor._attention_backend, "value", None)
        for m in model.modules()
        if isinstance(m, AttentionModuleMixin)
    }


def _forward(flux: Any) -> torch.Tensor:
    """One Flux forward on the device (4 latent tokens, 3 text tokens)."""
    return flux(
        hidden_states=torch.randn(1, 4, 4, device="neuron"),
        encoder_hidden_states=torch.randn(1, 3, 32, device="neuron"),
        pooled_projections=torch.randn(1, 32, device="neuron"),
        timestep=torch.tensor([1.0], device="neuron"),
        img_ids=torch.zeros(4, 3, device="neuron"),
        txt_ids=torch.zeros(3, 3, device="neuron"),
    ).sample


@pytest.fixture(autouse=True)
def _registry_restored() -> Any:
    """set_attention_backend also sets the registry's process-wide active backend: put it back."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    before = _AttentionBackendRegistry._active_backend
    yield
    _AttentionBackendRegistry._active_backend = before


@pytest.mark.parametrize("backend", ["flash", "sage", "xformers"])
def test_gap_a_cuda_backend_raises(shim: ModuleType, backend: str) -> None:
    with pytest.raises(RuntimeError, match="is not usable because of missing package"):
        _unet().set_attention_backend(backend)


@pytest.mark.slow  # a fresh interpreter per case, over 10 s on 2 busy cores: not in the quick subset
@pytest.mark.parametrize("backend", ["flash", "flash_hub", "sage_hub", "_native_cudnn", "XFORMERS"])
def test_set_attention_backend_becomes_native(shim: ModuleType, caplog: pytest.LogCaptureFixture, backend: str) -> None:
    shim.apply()
    flux = _flux()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        flux.set_attention_backend(backend)
        flux.set_attention_backend(backend)
    assert _backends(flux) == {"native"} and _active() == "native"
    assert _forward(flux).device.type == "neuron"
    expected = f'FluxTransformer2DModel.set_attention_backend("{backend.lower()}") -> "native"'
    assert caplog.text.count(expected) == 1


def test_a_unet_sets_the_active_backend(shim: ModuleType) -> None:
    """UNet processors call SDPA themselves; set_attention_backend sets the registry's backend for the rest."""
    shim.apply()
    _unet().set_attention_backend("flash")
    assert _active() == "native"


@pytest.mark.parametrize("backend", ["native", "_native_math", "flex"])
def test_backends_that_run_on_neuron_are_kept(shim: ModuleType, caplog: pytest.LogCaptureFixture, backend: str) -> None:
    """PyTorch SDPA, and PyTorch FlexAttention since Neuron 2.34 ("FlexAttention runs faster with more masks")."""
    shim.apply()
    flux = _flux()
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        flux.set_attention_backend(backend)
    assert _backends(flux) == {backend}
    assert "[diffusers_attention]" not in caplog.text
    if backend == "flex":  # runs, with SDPA's numbers (float32 rounding: the two sum in different orders)
        torch.manual_seed(1)
        out = _forward(flux)
        flux.set_attention_backend("native")
        torch.manual_seed(1)
        assert out.device.type == "neuron"
        torch.testing.assert_close(out, _forward(flux), rtol=1e-5, atol=1e-5)


def test_one_attention_module(shim: ModuleType) -> None:
    shim.apply()
    from diffusers.models.attention import AttentionModuleMixin

    module = next(m for m in _flux().modules() if isinstance(m, AttentionModuleMixin))
    module.set_attention_backend("sage")
    assert module.processor._attention_backend.value == "native"


def test_the_context_manager(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    import diffusers
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    before = _AttentionBackendRegistry._active_backend
    flux = _flux()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        with diffusers.attention_backend("flash_hub"):
            assert _active() == "native"
            _forward(flux)
    assert _AttentionBackendRegistry._active_backend == before
    assert 'attention_backend("flash_hub") -> "native"' in caplog.text


def test_the_environment_default(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    """DIFFUSERS_ATTN_BACKEND is read at import into the registry: a CUDA one found there becomes native."""
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    _AttentionBackendRegistry._active_backend = AttentionBackendName.SAGE  # as DIFFUSERS_ATTN_BACKEND=sage would
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        shim.apply()
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName.NATIVE
    assert 'DIFFUSERS_ATTN_BACKEND="sage" -> "native"' in caplog.text
    _forward(_flux())
    shim.revert()
    assert _AttentionBackendRegistry._active_backend == AttentionBackendName.SAGE


def test_xformers_is_skipped(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    from neuroncompat.testing import stable_diffusion_pipeline

    pipe = stable_diffusion_pipeline().to("neuron")
    with pytest.raises(ModuleNotFoundError):
        pipe.enable_xformers_memory_efficient_attention()
    shim.apply()
    with caplog.at_level(logging.WARNING, logger="neuroncompat"):
        pipe.enable_xformers_memory_efficient_attention()
        pipe.unet.enable_xformers_memory_efficient_attention()
    assert "StableDiffusionPipeline.enable_xformers_memory_efficient_attention() skipped" in caplog.text
    assert "UNet2DConditionModel.enable_xformers_memory_efficient_attention() skipped" in caplog.text
    assert _active() == "native"


def test_disabled_by_name(shim: ModuleType) -> None:
    shim.apply(skip=["diffusers_attention"])
    assert shim.status()["diffusers_attention"].state == "disabled"
    with pytest.raises(RuntimeError, match="not usable"):
        _unet().set_attention_backend("flash")
