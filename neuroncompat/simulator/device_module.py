"""``torch.neuron`` for the simulated device: the API transformers, accelerate and TRL call.

The names and behaviour follow torch-neuronx's ``torch.neuron`` (and ``torch.cuda`` where the
two agree). Like the real module it has no ``mem_get_info`` (transformers PR #47029), so code
that relies on it fails here as it would on Trainium.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from neuroncompat.simulator import state

_DEVICE_NAME = "Trainium2 NeuronCore (simulated)"


@dataclass(frozen=True)
class NeuronDeviceProperties:
    """What ``get_device_properties`` reports for one logical NeuronCore."""

    name: str
    total_memory: int
    index: int


def _index(device: Any = None) -> int:
    if device is None:
        return state.current_device()
    if isinstance(device, int):
        index = device
    else:
        dev = torch.device(device)
        if dev.type != "neuron":
            raise ValueError(f"Expected a neuron device, got {dev}")
        index = dev.index if dev.index is not None else state.current_device()
    state.check_index(index)
    return index


def is_available() -> bool:
    return state.enabled()


def is_initialized() -> bool:
    return state.enabled()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return state.cores()


def current_device() -> int:
    return state.current_device()


def set_device(device: Any) -> None:
    state.set_current_device(_index(device))


@contextlib.contextmanager
def device(device: Any) -> Iterator[None]:
    """Context manager that makes ``device`` the current core, as ``torch.cuda.device``."""
    previous = state.current_device()
    set_device(device)
    try:
        yield
    finally:
        state.set_current_device(previous)


def synchronize(device: Any = None) -> None:
    """Ops run eagerly on the CPU, so there is nothing in flight to wait for."""
    _index(device)


# -- streams and events --------------------------------------------------------------------
# Every op runs to completion on the CPU before the next starts, so the simulated core has one
# in-order stream: extra streams (FSDP2 makes all-gather and reduce-scatter streams) and events
# are PyTorch's generic ``torch.Stream``/``torch.Event`` objects, ordering calls on them are
# no-ops, and ``stream(s)`` changes nothing.


def Stream(device: Any = None, priority: int = 0) -> torch.Stream:  # noqa: N802 (torch.cuda.Stream's name)
    return torch.Stream(device=torch.device("neuron", _index(device)), priority=priority)


def current_stream(device: Any = None) -> torch.Stream:
    return Stream(device)


def default_stream(device: Any = None) -> torch.Stream:
    return Stream(device)


def set_stream(stream: torch.Stream) -> None:
    """One in-order stream: selecting another changes nothing."""


@contextlib.contextmanager
def stream(stream: torch.Stream | None) -> Iterator[None]:
    """Context manager selecting ``stream``; with one in-order stream there is nothing to switch."""
    yield


Event = torch.Event


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    index = _index(device)
    return NeuronDeviceProperties(name=_DEVICE_NAME, total_memory=state.core_memory(), index=index)


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


# -- random number generation ---------------------------------------------------------------
# One (seed, offset) generator per core, its state 16 bytes as torch.cuda's (native/generator.cpp).
def _generator(index: int) -> torch.Generator:
    generator: torch.Generator = torch.ops.neuroncompat_sim.default_generator(index)
    return generator


def manual_seed(seed: int) -> None:
    _generator(state.current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(max(state.cores(), 1)):
        _generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator(state.current_device()).seed()


def seed_all() -> None:
    for i in range(max(state.cores(), 1)):
        _generator(i).seed()


def initial_seed() -> int:
    return _generator(state.current_device()).initial_seed()


def get_rng_state(device: Any = None) -> torch.Tensor:
    return _generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    _generator(_index(device)).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(state.cores())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# -- memory ---------------------------------------------------------------------------------
# The C++ allocator's figures, through torch.accelerator (what TorchNeuron's memory-profiling
# guide documents, and what neuron-migrate writes for torch.cuda.memory_*). Every op has finished
# when it returns, so no synchronize() is needed before reading them; calling it is harmless.
def memory_stats(device: Any = None) -> dict[str, Any]:
    """CUDA-style statistics: ``allocated_bytes.all.current``, ``reserved_bytes.large_pool.peak``, ..."""
    return dict(torch.accelerator.memory_stats(_index(device)))


def memory_allocated(device: Any = None) -> int:
    return torch.accelerator.memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return torch.accelerator.max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    return torch.accelerator.memory_reserved(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return torch.accelerator.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Give every core's cached free blocks back to the host (``memory_reserved`` drops)."""
    torch.accelerator.empty_cache()


def memory_snapshot() -> list[dict[str, Any]]:
    """Each block held by each core, in the shape of ``torch.cuda.memory_snapshot()``'s segments.

    Every block is its own segment here; ``allocated_size`` is 0 for a cached (free) block.
    """
    segments = []
    for core in range(state.cores()):
        flat = torch.ops.neuroncompat_sim.segments(core)
        for address, size, requested, in_use in zip(flat[0::4], flat[1::4], flat[2::4], flat[3::4], strict=True):
            block = {
                "address": address,
                "size": size,
                "requested_size": requested,
                "state": "active_allocated" if in_use else "inactive",
            }
            segments.append(
                {
                    "device": core,
                    "address": address,
                    "total_size": size,
                    "allocated_size": size if in_use else 0,
                    "active_size": size if in_use else 0,
                    "requested_size": requested,
                    "segment_type": "small" if size <= 1 << 20 else "large",
                    "blocks": [block],
                }
            )
    return segments


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of the core's statistics, laid out as ``torch.cuda.memory_summary``'s."""
    index = _index(device)
    stats = memory_stats(index)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Segments", "segment", False),
    ]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    line = "=" * 79
    out = [
        line,
        f" neuron memory summary, device ID {index:<10d} (simulated NeuronCore)",
        line,
        f" {'Metric':<31}| {'Cur Usage':>10} | {'Peak Usage':>10} | {'Tot Alloc':>10} | {'Tot Freed':>10} ",
        "-" * 79,
    ]
    for title, key, in_bytes in rows:
        for pool in pools:
            label = title if pool == "all" else f"      from {pool.replace('_pool', '')} pool"
            values = [stats.get(f"{key}.{pool}.{field}", 0) for field in ("current", "peak", "allocated", "freed")]
            cells = [_format_size(v) if in_bytes else str(v) for v in values]
            out.append(f" {label:<31}| {cells[0]:>10} | {cells[1]:>10} | {cells[2]:>10} | {cells[3]:>10} ")
        out.append("-" * 79)
    out.append(f" Allocation retries: {stats.get('num_alloc_retries', 0)}    OOMs: {stats.get('num_ooms', 0)}")
    out.append(line)
    return "\n".join(out) + "\n"


def _format_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if abs(value) < 1024:
            return f"{size} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"
