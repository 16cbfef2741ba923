"""``torch.neuron.memory_stats()`` on the simulated device has CUDA's keys (issue 27, M6).

CUDA-style code reads ``torch.cuda.memory_stats()`` by key (llama-cookbook's ``MemoryTrace`` reads
``active_bytes.all.peak``; memory reports read ``allocated_bytes.all.peak`` and
``num_alloc_retries``), and ``neuron-migrate`` rewrites those calls to ``torch.neuron``. The
simulator's answer is its C++ allocator's ``DeviceStats``, so every CUDA key but one is there; the
redirect's own merging and its errors for missing keys are tested in ``tests/isolated/redirect_cases.py``.
"""

from __future__ import annotations

import pytest
import torch

from neuroncompat.cuda.memory_stats import CUDA_KEYS

# reads the simulated cores' memory statistics (scripts/determinism.sh repeats these)
pytestmark = pytest.mark.device_stats


def test_memory_stats_has_every_key_of_cudas_but_the_fraction_policy_counter(neuron: object) -> None:
    """Only ``num_oom_rejections`` (CUDA's per-process memory-fraction policy) has no counterpart."""
    x = torch.empty(256, 256, device="neuron:1")
    stats = torch.neuron.memory_stats(1)
    assert CUDA_KEYS - set(stats) == {"num_oom_rejections"}
    assert set(stats) <= CUDA_KEYS, "no keys CUDA does not have"
    assert stats == dict(torch.accelerator.memory_stats(1))
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated(1)
    assert stats["allocated_bytes.all.peak"] == torch.neuron.max_memory_allocated(1)
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved(1)
    assert stats["active_bytes.all.peak"] >= stats["allocated_bytes.all.current"] >= 256 * 256 * 4
    assert stats["allocation.all.allocated"] >= 1 and stats["num_ooms"] == 0
    del x


def test_a_cpu_kernels_raw_scratch_memory_goes_back_to_the_core(own_core: int) -> None:
    """A bf16 matmul's CPU kernel (oneDNN) takes scratch memory with ``raw_allocate`` from the core's pool and
    frees it with ``raw_deallocate``; before the host redirect's ``raw_deleter`` gave it back to the pool, each
    such matmul left its scratch counted in ``memory_allocated`` (about 194 KiB per 256x256 product), so a bf16
    training step's measured peak grew step after step (issue 42's accuracy check found it)."""
    a = torch.randn(256, 256, device=f"neuron:{own_core}", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device=f"neuron:{own_core}", dtype=torch.bfloat16)
    torch.mm(a, b)  # the first product may set up what the kernel library keeps for good
    before = torch.neuron.memory_allocated(own_core)
    for _ in range(5):
        torch.mm(a, b)
    assert torch.neuron.memory_allocated(own_core) == before
