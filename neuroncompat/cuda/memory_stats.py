"""``torch.cuda.memory_stats()`` under the redirect: CUDA's keys, from the NeuronCore's allocator.

CUDA code reads the caching allocator's statistics by key: llama-cookbook's ``MemoryTrace`` reads
``stats["active_bytes.all.peak"]``, memory reports read ``allocated_bytes.all.peak`` and
``num_alloc_retries``. An allocator that is a PyTorch ``DeviceAllocator`` (the simulator's, and
TorchNeuron's caching allocator) reports the same ``DeviceStats`` keys through
``torch.accelerator.memory_stats()``; ``torch.neuron.memory_stats()`` may report them itself, or
fewer (how many, TorchNeuron does not document). So the redirect merges, first source winning:

1. ``torch.neuron.memory_stats(core)``;
2. ``torch.accelerator.memory_stats(core)`` (skipped where neuron's allocator is not a
   ``DeviceAllocator``: torch then raises instead of answering);
3. the four byte counters every TorchNeuron has as functions: ``allocated_bytes.all.current`` and
   ``.peak`` (``memory_allocated``, ``max_memory_allocated``), ``reserved_bytes.all.current`` and
   ``.peak`` (``memory_reserved``, ``max_memory_reserved``).

Nothing is made up: a key none of them reports raises :class:`MissingMemoryStat`, a ``KeyError``
saying which key and why (a CUDA statistic this allocator does not keep, or not a CUDA statistic at
all), where a 0 would let a memory report print a wrong number. ``.get(key, default)`` and ``in``
work as on CUDA's dict.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch

# The keys of CUDA's torch.cuda.memory_stats() (torch/cuda/memory.py, memory_stats docstring; c10's DeviceStats).
_POOLED = ("allocation", "segment", "active", "inactive_split")
_POOLED_BYTES = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
_POOLS = ("all", "large_pool", "small_pool")
_METRICS = ("current", "peak", "allocated", "freed")
_COUNTERS = (
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
    "num_oom_rejections",
    "max_split_size",
)
CUDA_KEYS: frozenset[str] = frozenset(
    [".".join(parts) for parts in itertools.product((*_POOLED, *_POOLED_BYTES), _POOLS, _METRICS)]
    + [".".join(parts) for parts in itertools.product(("oversize_allocations", "oversize_segments"), _METRICS)]
    + list(_COUNTERS)
)

# Step 3 of the module docstring: a key, and the torch.neuron (else torch.accelerator) function that answers it.
_FROM_COUNTERS = (
    ("allocated_bytes.all.current", "memory_allocated"),
    ("allocated_bytes.all.peak", "max_memory_allocated"),
    ("reserved_bytes.all.current", "memory_reserved"),
    ("reserved_bytes.all.peak", "max_memory_reserved"),
)


class MissingMemoryStat(KeyError):
    """A ``torch.cuda.memory_stats()`` key the NeuronCore's allocator does not report (the message says why)."""

    def __str__(self) -> str:
        return str(self.args[0])  # KeyError would print the message as a quoted repr


class CudaMemoryStats(dict[str, Any]):
    """The statistics of one NeuronCore, keyed as CUDA's; a missing key says why it is missing."""

    def __missing__(self, key: str) -> Any:
        if key in CUDA_KEYS:
            why = (
                "a CUDA caching-allocator statistic that this NeuronCore's allocator does not report "
                "(neither torch.neuron.memory_stats() nor torch.accelerator.memory_stats() has it)"
            )
        else:
            why = "not a CUDA memory statistic (CUDA's keys look like 'allocated_bytes.all.peak' or 'num_ooms')"
        raise MissingMemoryStat(
            f"torch.cuda.memory_stats()[{key!r}] under NEURONCOMPAT_CUDA=redirect: {why}. "
            f"Read it with .get({key!r}, 0) if a missing value may count as 0, or use "
            "torch.cuda.memory_allocated()/max_memory_allocated()/memory_reserved() (redirected)"
        )


def _call(function: Callable[[int], Any] | None, index: int) -> Any:
    """``function(index)``, or None where the function is absent or the allocator cannot answer it."""
    if function is None:
        return None
    try:
        return function(index)
    except RuntimeError:  # "Allocator for neuron is not a DeviceAllocator", or a counter this runtime lacks
        return None


def memory_stats(index: int | None = None) -> CudaMemoryStats:
    """The statistics of NeuronCore ``index`` (the current one for None), merged as the module docstring says."""
    neuron: Any = torch.neuron  # type: ignore[attr-defined]
    core = neuron.current_device() if index is None else index
    stats = CudaMemoryStats()
    for source in (getattr(neuron, "memory_stats", None), torch.accelerator.memory_stats):
        for key, value in (_call(source, core) or {}).items():
            stats.setdefault(key, value)
    for key, name in _FROM_COUNTERS:
        if key not in stats:
            value = _call(getattr(neuron, name, None) or getattr(torch.accelerator, name, None), core)
            if value is not None:
                stats[key] = value
    return CudaMemoryStats(sorted(stats.items()))  # CUDA's dict is sorted by key
