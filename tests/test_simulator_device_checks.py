"""Device checks follow CUDA's rules as torch's source states them; an invalid core index raises everywhere.

torchgen's generated check (every positional and out= tensor on one device, 0-dim CPU tensors
included) for ops without ``device_check: NoCheck`` in torch's native_functions.yaml; for NoCheck
ops the kernel's own: TensorIterator takes a 0-dim CPU input as a scalar, ``index`` takes CPU
indices, ``index_put`` moves indices and a 0-dim value, copies cross devices.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from neuroncompat.simulator import device_checks


def test_a_device_index_into_a_cpu_tensor_raises_cudas_error(neuron: object) -> None:
    with pytest.raises(
        RuntimeError, match=r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"
    ):
        torch.arange(4.0)[torch.tensor([0, 2], device="neuron")]


def test_cpu_values_put_into_a_device_tensor_raise_unless_0_dim(neuron: object) -> None:
    x = torch.zeros(4, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*neuron:0 and cpu"):
        x[torch.tensor([0, 2])] = torch.tensor([5.0, 6.0])
    x[torch.tensor([0, 2])] = torch.tensor(5.0)  # a 0-dim value is moved to the device, as index_put_ does
    x[torch.tensor([1])] = torch.tensor([7.0], device="neuron")  # CPU indices, device values
    assert x.cpu().tolist() == [5.0, 7.0, 5.0, 0.0]
    assert x[torch.tensor([1, 2])].cpu().tolist() == [7.0, 5.0]  # CPU indices read


def test_a_0_dim_cpu_tensor_is_a_scalar_only_in_elementwise_ops(neuron: object) -> None:
    t = torch.arange(4.0, device="neuron")
    assert (t * torch.tensor(2.0)).cpu().tolist() == [0.0, 2.0, 4.0, 6.0]  # TensorIterator: a CPU scalar
    assert torch.where(t > 1, t, torch.tensor(-1.0)).cpu().tolist() == [-1.0, -1.0, 2.0, 3.0]
    with pytest.raises(
        RuntimeError,
        match=r"Expected all tensors to be on the same device, but got index is on cpu, different from other "
        r"tensors on neuron:0 \(when checking argument in method wrapper_PrivateUse1__index_select\)",
    ):
        t.index_select(0, torch.tensor(2))
    with pytest.raises(RuntimeError, match="but got mat2 is on cpu, different from other tensors on neuron:0"):
        torch.mm(t.reshape(2, 2), torch.eye(2))
    with pytest.raises(RuntimeError, match="neuron:0 and cpu"):
        t + torch.ones(4)
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        t + torch.ones(4, device="neuron:1")


def test_copies_cross_devices(neuron: object) -> None:
    x = torch.zeros(3, device="neuron:1")
    x.copy_(torch.ones(3))
    torch._foreach_copy_([x], [torch.full((3,), 2.0)])
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]


INVALID: dict[str, Callable[[], object]] = {
    "torch.accelerator.memory_allocated": lambda: torch.accelerator.memory_allocated(99),
    "torch.accelerator.memory_stats": lambda: torch.accelerator.memory_stats(2),
    "torch.accelerator.reset_peak_memory_stats": lambda: torch.accelerator.reset_peak_memory_stats(2),
    "torch.neuron.max_memory_allocated": lambda: torch.neuron.max_memory_allocated(5),
    "torch.neuron.Stream": lambda: torch.neuron.Stream(device=7),
    "torch.neuron.synchronize": lambda: torch.neuron.synchronize(4),
    "torch.neuron.set_device": lambda: torch.neuron.set_device(2),
    "a tensor on neuron:2": lambda: torch.ones(1, device="neuron:2"),
}


@pytest.mark.parametrize("call", INVALID.values(), ids=list(INVALID))
def test_an_invalid_core_index_raises_everywhere(neuron: object, call: Callable[[], object]) -> None:
    with pytest.raises(RuntimeError, match=r"is not a valid device: 2 simulated NeuronCore\(s\) are visible"):
        call()


def test_the_unchecked_ops_are_torchs_own_native_functions_entries() -> None:
    unchecked = device_checks.unchecked_ops()
    assert {"add.Tensor", "index.Tensor", "_index_put_impl_", "copy_", "where.self"} <= unchecked
    assert not {"index_select", "mm", "embedding", "cat"} & unchecked
    text = "- func: a.out(Tensor self) -> Tensor\n  device_check: NoCheck   # TensorIterator\n- func: b(Tensor x) -> Tensor\n"
    assert device_checks.parse_unchecked(text) == frozenset({"a.out"})
