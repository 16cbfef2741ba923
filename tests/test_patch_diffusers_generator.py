"""``diffusers_generator``: a neuron ``torch.Generator`` gives diffusers the noise of a CPU one seeded alike."""

from __future__ import annotations

import logging
from types import ModuleType

import pytest
import torch

pytest.importorskip("diffusers")


def _randn_tensor() -> object:
    from diffusers.utils.torch_utils import randn_tensor

    return randn_tensor


def _cpu_draws(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    generator = torch.Generator("cpu").manual_seed(seed)
    return [torch.randn(shape, generator=generator) for shape in shapes]


def test_gap_a_neuron_generator_does_not_give_the_cpu_noise(shim: ModuleType) -> None:
    """Without the shim the neuron generator reaches randn_tensor's CPU draw. The simulator draws it from
    the generator's own (seed, offset) stream (what CUDA's contract would reject outright); either way it
    is not the noise torch.Generator("cpu").manual_seed(seed) gives, which the Neuron examples use."""
    randn_tensor = _randn_tensor()
    latents = randn_tensor(
        (1, 4, 8, 8), generator=torch.Generator("neuron").manual_seed(7), device=torch.device("neuron")
    )
    assert latents.device.type == "neuron"
    assert not torch.equal(latents.cpu(), _cpu_draws(7, (1, 4, 8, 8))[0])


def test_draws_continue_one_cpu_stream(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    randn_tensor = _randn_tensor()
    generator = torch.Generator("neuron").manual_seed(7)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        first = randn_tensor((2, 3), generator=generator, device=torch.device("neuron"))
        second = randn_tensor((5,), generator=generator, device=torch.device("neuron"))
    expected = _cpu_draws(7, (2, 3), (5,))
    assert first.device == torch.device("neuron", 0)
    assert torch.equal(first.cpu(), expected[0]) and torch.equal(second.cpu(), expected[1])
    assert caplog.text.count("[diffusers_generator]") == 1
    assert "torch.Generator('neuron:0') seeded 7 -> draws from torch.Generator('cpu').manual_seed(7)" in caplog.text
    # a draw advances the device generator, as a draw on the device would; re-seeding restarts the stream
    assert generator.get_offset() == 8 + 8
    generator.manual_seed(7)
    assert torch.equal(randn_tensor((2, 3), generator=generator, device="neuron").cpu(), expected[0])


def test_a_list_of_generators_seeds_each_row(shim: ModuleType) -> None:
    shim.apply()
    generators = [torch.Generator("neuron").manual_seed(seed) for seed in (1, 2)]
    latents = _randn_tensor()((2, 3), generator=generators, device=torch.device("neuron"))
    assert torch.equal(latents.cpu(), torch.cat(_cpu_draws(1, (1, 3)) + _cpu_draws(2, (1, 3))))


def test_cpu_generators_are_upstreams(shim: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    shim.apply()
    generator = torch.Generator("cpu").manual_seed(3)
    with caplog.at_level(logging.INFO, logger="neuroncompat"):
        latents = _randn_tensor()((2, 3), generator=generator, device=torch.device("neuron"))
    assert torch.equal(latents.cpu(), _cpu_draws(3, (2, 3))[0])
    assert "[diffusers_generator]" not in caplog.text


def test_every_by_name_binding_is_patched(shim: ModuleType) -> None:
    """One function object, bound by name in ~350 modules, some imported after the shim: all see the fix."""
    shim.apply()
    import diffusers.schedulers.scheduling_ddpm as ddpm

    assert shim.status()["diffusers_generator"].state == "applied"
    noise = ddpm.randn_tensor((3,), generator=torch.Generator("neuron").manual_seed(5), device=torch.device("neuron"))
    assert torch.equal(noise.cpu(), _cpu_draws(5, (3,))[0])


def test_disabled_by_name_and_reverted(shim: ModuleType) -> None:
    randn_tensor = _randn_tensor()
    code = randn_tensor.__code__  # type: ignore[attr-defined]
    shim.apply(skip=["diffusers_generator"])
    assert shim.status()["diffusers_generator"].state == "disabled"
    assert randn_tensor.__code__ is code  # type: ignore[attr-defined]
    shim.revert()
    shim.apply()
    assert randn_tensor.__code__ is not code  # type: ignore[attr-defined]
    shim.revert()
    assert randn_tensor.__code__ is code  # type: ignore[attr-defined]
    import diffusers.utils.torch_utils as torch_utils

    assert not hasattr(torch_utils, "__neuroncompat_randn_tensor__")
