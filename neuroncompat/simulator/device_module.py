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


def empty_cache() -> None:
    """The simulator frees payloads as soon as their tensors die; there is no cache."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def get_device_properties(device: Any = None) -> NeuronDeviceProperties:
    index = _index(device)
    return NeuronDeviceProperties(name=_DEVICE_NAME, total_memory=state.CORE_MEMORY_BYTES, index=index)


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


# -- random number generation ---------------------------------------------------------------
# One (seed, offset) generator per core, its state 16 bytes as torch.cuda's: see simulator.rng.
def manual_seed(seed: int) -> None:
    state.generator(state.current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(max(state.cores(), 1)):
        state.generator(i).manual_seed(int(seed))


def seed() -> None:
    state.generator(state.current_device()).random_seed()


def seed_all() -> None:
    for i in range(max(state.cores(), 1)):
        state.generator(i).random_seed()


def initial_seed() -> int:
    return state.generator(state.current_device()).initial_seed()


def get_rng_state(device: Any = None) -> torch.Tensor:
    return state.generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    state.generator(_index(device)).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [state.generator(i).get_state() for i in range(state.cores())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for i, s in enumerate(new_states):
        set_rng_state(s, i)


# -- memory ---------------------------------------------------------------------------------
def memory_allocated(device: Any = None) -> int:
    return state.allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return state.peak(_index(device))


def memory_reserved(device: Any = None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    state.reset_peak(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def memory_stats(device: Any = None) -> dict[str, int]:
    index = _index(device)
    return {
        "allocated_bytes.all.current": state.allocated(index),
        "allocated_bytes.all.peak": state.peak(index),
        "reserved_bytes.all.current": state.allocated(index),
        "reserved_bytes.all.peak": state.peak(index),
    }
