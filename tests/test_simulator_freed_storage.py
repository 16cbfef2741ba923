"""Reading device memory a tensor's storage no longer holds raises, as a device does; the process lives on.

FSDP2 frees a parameter between uses with ``untyped_storage().resize_(0)`` and views of it stay
around; reading one on a device is an illegal memory access. The simulator's CPU kernels would read
freed host memory instead (before issue 40: a segfault in ``copy_from``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

READS: dict[str, Callable[[torch.Tensor], object]] = {
    "elementwise op": lambda v: v + 1,
    "reduction": lambda v: v.sum(),
    "copy to the CPU": lambda v: v.cpu(),
    "copy into a CPU tensor": lambda v: torch.zeros(6).copy_(v),
    "copy from the CPU into it": lambda v: v.copy_(torch.ones(6)),
    "in-place op": lambda v: v.mul_(2),
    "copy to another core": lambda v: v.to("neuron:1"),
}


@pytest.mark.parametrize("read", READS.values(), ids=list(READS))
def test_a_view_of_freed_storage_raises_naming_the_tensors_and_the_storages_size(
    neuron: object, read: Callable[[torch.Tensor], object]
) -> None:
    x = torch.arange(8.0, device="neuron")
    view = x[2:]
    x.untyped_storage().resize_(0)
    message = r"illegal memory access on neuron:0: a tensor of size \[6\] .* needs 32 bytes of storage, but its storage holds 0 bytes"
    with pytest.raises(RuntimeError, match=message):
        read(view)


def test_a_shrunk_storage_raises_and_a_regrown_one_reads_again(neuron: object) -> None:
    """FSDP2's cycle: free, then resize back and copy the values in before the next use."""
    x = torch.arange(8.0, device="neuron:1")
    view = x[4:]
    x.untyped_storage().resize_(16)  # holds x[0:4] only
    assert x[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match=r"size \[4\] .* needs 32 bytes of storage, but its storage holds 16 bytes"):
        view.cpu()
    x.untyped_storage().resize_(32)
    x.copy_(torch.arange(8.0) * 10)
    assert view.cpu().tolist() == [40.0, 50.0, 60.0, 70.0]
    assert x.device == view.device == x.untyped_storage().device == torch.device("neuron:1")


def test_an_empty_view_of_freed_storage_reads_nothing_and_is_fine(neuron: object) -> None:
    x = torch.arange(8.0, device="neuron")
    empty = x[8:]
    x.untyped_storage().resize_(0)
    assert (empty + 1).numel() == 0 and empty.cpu().tolist() == []
