"""Every op that allocates for a device tensor allocates on that tensor's core, not the current one.

CUDA's generated kernels run under a device guard of ``self``'s device; the simulator's kernels of
its own (resize_, set_, _copy_from_and_resize, storage resize) do the same, so a tensor on
neuron:1 keeps its memory on core 1, counted there, and saves and loads back as neuron:1.

The tests that count bytes use two cores no other thread uses (``own_core`` and the one below it): a thread an
earlier test left in the worker allocates and frees on core 0, and moved its count by 2 KiB once.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
import torch

# reads the simulated cores' memory statistics (scripts/determinism.sh repeats these)
pytestmark = pytest.mark.device_stats

N = 1 << 16  # 256 KiB of float32


def _set_then_grow(x: torch.Tensor) -> None:
    x.set_()
    x.resize_(N)


def _set_storage_beyond_its_end(x: torch.Tensor) -> None:
    storage = torch.empty(4, device=x.device).untyped_storage()
    x.set_(storage, 0, (N,), (1,))  # set_ grows the storage to fit


GROWS: dict[str, Callable[[torch.Tensor], object]] = {
    "resize_": lambda x: x.resize_(N),
    "resize_as_": lambda x: x.resize_as_(torch.empty(N)),
    "_copy_from_and_resize": lambda x: torch.ops.aten._copy_from_and_resize(torch.ones(N), x),
    "set_() then resize_": _set_then_grow,
    "set_(storage) past its end": _set_storage_beyond_its_end,
    "untyped_storage().resize_": lambda x: x.untyped_storage().resize_(4 * N),
}


def _allocated(current: int, other: int) -> list[int]:
    return [torch.accelerator.memory_allocated(core) for core in (current, other)]


@pytest.mark.parametrize("grow", GROWS.values(), ids=list(GROWS))
def test_a_tensor_on_another_core_grows_there_not_on_the_current_one(
    own_core: int, grow: Callable[[torch.Tensor], object]
) -> None:
    other = own_core - 1
    x = torch.ones(2, device=f"neuron:{other}")
    before = _allocated(own_core, other)
    grow(x)
    after = _allocated(own_core, other)
    assert x.device == x.untyped_storage().device == torch.device(f"neuron:{other}")
    assert after[0] == before[0]
    assert after[1] - before[1] >= 4 * N - 512  # the new bytes, less the 2 ones' 512-byte block freed
    assert torch.neuron.current_device() == own_core


def test_a_resized_tensor_saves_and_loads_back_on_its_core(neuron: object) -> None:
    torch.neuron.set_device(0)
    x = torch.ones(2, device="neuron:1")
    x.resize_(N).fill_(3.0)
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert loaded.device == loaded.untyped_storage().device == torch.device("neuron:1")
    assert torch.equal(loaded.cpu(), torch.full((N,), 3.0))


def test_a_freed_storage_stays_on_its_core_and_takes_a_shard_from_it(own_core: int) -> None:
    """FSDP1's ``shard()``: free the flat parameter (``resize_(0)``), then ``set_`` it to its shard on the core.

    TorchNeuron frees to a null pointer tagged with the storage's device, as CUDA does; a "cpu" storage there
    made ``set_`` fail ("Attempted to set the storage of a tensor on device cpu ...") and regrow on core 0."""
    other = torch.device("neuron", own_core - 1)
    flat = torch.arange(8.0, device=other)
    shard = flat[4:].clone()
    flat.untyped_storage().resize_(0)
    assert flat.untyped_storage().device == other
    flat.set_(shard.untyped_storage(), 0, (4,), (1,))
    assert flat.device == other and flat.cpu().tolist() == [4.0, 5.0, 6.0, 7.0]
    regrown = torch.ones(2, device=other)
    regrown.untyped_storage().resize_(0)
    before = _allocated(own_core, other.index)
    regrown.untyped_storage().resize_(4 * N)
    assert regrown.untyped_storage().device == other
    after = _allocated(own_core, other.index)
    assert after[0] == before[0] and after[1] - before[1] >= 4 * N


def test_record_stream_accepts_a_neuron_stream_and_refuses_another(neuron: object) -> None:
    """FSDP1 records each gradient on its post-backward stream (TorchNeuron implements ``record_stream``)."""
    x = torch.ones(4, device="neuron:1")
    x.record_stream(torch.neuron.current_stream(1))
    with pytest.raises(RuntimeError, match="expected a neuron stream"):
        x.record_stream(torch.Stream(device="cpu"))
