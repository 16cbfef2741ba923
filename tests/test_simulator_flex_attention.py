"""FlexAttention on the simulated device, as TorchNeuron 2.34 runs it ("FlexAttention runs faster with more
masks"; neuroncompat/simulator/flex_attention.py), with the CPU's numbers."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def _causal(b: object, h: object, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    return q >= kv


def _qkv(requires_grad: bool = False) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(1, 2, 128, 16, generator=generator, requires_grad=requires_grad) for _ in range(3)]


def test_a_graph_that_makes_device_tensors_goes_to_the_neuron_backend(neuron: object) -> None:
    """``create_block_mask(_compile=True)`` (transformers' flex mask) is such a graph: its only inputs are
    sizes and ``device="neuron"``. Inductor cannot lower it; auto-selection must see the device."""

    def ramp(n: int, device: torch.device) -> torch.Tensor:
        return torch.arange(n, device=device) * 2

    out = torch.compile(ramp)(8, torch.device("neuron"))
    assert out.device.type == "neuron" and out.tolist() == list(range(0, 16, 2))
    assert len(neuron.compiles()) == 1  # type: ignore[attr-defined]


def test_compiled_block_mask_on_the_device(neuron: object) -> None:
    with pytest.warns(DeprecationWarning, match="_compile flag"):
        mask = create_block_mask(_causal, 1, 1, 128, 128, device="neuron", _compile=True)
    reference = create_block_mask(_causal, 1, 1, 128, 128, device="cpu")
    assert mask.kv_num_blocks.device.type == "neuron"
    assert torch.equal(mask.to_dense().cpu(), reference.to_dense())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flex_attention_forward_and_backward_equal_the_cpus(neuron: object, compiled: bool) -> None:
    attend = torch.compile(flex_attention) if compiled else flex_attention
    q, k, v = _qkv(requires_grad=True)
    on_device = [t.detach().to("neuron").requires_grad_() for t in (q, k, v)]
    mask = create_block_mask(_causal, 1, 1, 128, 128, device="neuron")
    out = attend(*on_device, block_mask=mask)
    out.sum().backward()
    # The CPU reference: PyTorch refuses flex backward on the CPU, so its SDPA (same math, causal).
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected.sum().backward()
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
    for got, want in zip(on_device, (q, k, v), strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-5, atol=1e-6)  # type: ignore[union-attr]
    if compiled:
        assert len(neuron.compiles()) == 1  # type: ignore[attr-defined]


def test_other_devices_keep_pytorchs_check(neuron: object) -> None:
    q, k, v = _qkv(requires_grad=True)
    mask = create_block_mask(_causal, 1, 1, 128, 128, device="cpu")
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, k, v, block_mask=mask)


def test_disable_restores_pytorchs_check(neuron: object) -> None:
    from torch.nn.attention import flex_attention as module

    from neuroncompat.simulator import flex_attention as simulated

    (pytorchs,) = simulated._original
    assert module._validate_device is not pytorchs
    neuron.disable()  # type: ignore[attr-defined]
    try:
        assert module._validate_device is pytorchs
    finally:
        neuron.enable(cores=2)  # type: ignore[attr-defined]
