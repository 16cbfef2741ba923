"""Neuron implementations of the ``torch.cuda`` calls that have no ``torch.neuron`` twin.

- :func:`memory_summary`: CUDA's table has allocator internals (blocks, segments) Neuron does
  not report; this prints the counters ``torch.neuron`` has (allocated and reserved bytes,
  current and peak) in the same spirit.
- :func:`mem_get_info`: ``(free, total)`` from the NeuronCore's memory size and what is
  reserved on it (``torch.neuron`` has no ``mem_get_info``, transformers PR #47029).
- :class:`DeviceProperties`: name and memory of the NeuronCore, and ``major``/``minor`` of 0:
  there is no CUDA architecture, so every ``capability >= (x, y)`` check is False and
  capability-gated CUDA kernels (flash-attention, FP8, Triton) are skipped. Any other CUDA
  property raises with the fix.
- :class:`HostTimedEvent`: ``torch.cuda.Event(enable_timing=True)`` timing, done the way
  ``neuron-migrate`` NM903 tells users to: wait for the device, read ``time.perf_counter()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch


def neuron_call(name: str, accelerator_name: str | None = None) -> Any:
    """``torch.neuron.<name>``, else ``torch.accelerator.<accelerator_name>`` (generic API)."""
    found = getattr(torch.neuron, name, None)  # type: ignore[attr-defined]
    if found is None and accelerator_name is not None:
        found = getattr(torch.accelerator, accelerator_name, None)
    if found is None:
        raise RuntimeError(f"torch.neuron.{name} is missing from this TorchNeuron; upgrade torch-neuronx")
    return found


def _index(device: int | None) -> int:
    return torch.neuron.current_device() if device is None else device  # type: ignore[attr-defined]


def synchronize(device: int | None = None) -> None:
    neuron_call("synchronize", "synchronize")(*(() if device is None else (device,)))


def memory_summary(device: int | None = None, abbreviated: bool = False) -> str:
    index = _index(device)
    mib = 1024 * 1024
    allocated = neuron_call("memory_allocated", "memory_allocated")(index)
    peak = neuron_call("max_memory_allocated", "max_memory_allocated")(index)
    reserved = (
        neuron_call("memory_reserved", "memory_reserved")(index)
        if hasattr(torch.neuron, "memory_reserved")  # type: ignore[attr-defined]
        else allocated
    )
    lines = [
        f"|  NeuronCore memory summary, device neuron:{index} (NEURONCOMPAT_CUDA=redirect)  |",
        f"|  allocated: {allocated / mib:10.2f} MiB current, {peak / mib:10.2f} MiB peak  |",
        f"|  reserved:  {reserved / mib:10.2f} MiB current  |",
    ]
    return "\n".join(lines)


def mem_get_info(device: int | None = None) -> tuple[int, int]:
    index = _index(device)
    neuron: Any = torch.neuron  # type: ignore[attr-defined]
    total = neuron.get_device_properties(index).total_memory
    reserved = getattr(neuron, "memory_reserved", neuron.memory_allocated)(index)
    return total - reserved, total


@dataclass(frozen=True)
class DeviceProperties:
    """``torch.cuda.get_device_properties`` for a NeuronCore (see the module docstring)."""

    name: str
    total_memory: int
    index: int
    major: int = 0
    minor: int = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"torch.cuda.get_device_properties(...).{name}: a NeuronCore has no CUDA property {name!r} "
            "(NEURONCOMPAT_CUDA=redirect gives name, total_memory, major=0 and minor=0). Fix: drop the "
            "CUDA-specific tuning, or guard it with `if torch.version.cuda:` (None on Neuron)."
        )


def get_device_properties(device: int | None = None) -> DeviceProperties:
    index = _index(device)
    real = torch.neuron.get_device_properties(index)  # type: ignore[attr-defined]
    return DeviceProperties(name=real.name, total_memory=real.total_memory, index=index)


class HostTimedEvent:
    """A CUDA event for timing: ``record`` waits for the NeuronCore, then reads the host clock."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._time: float | None = None

    def record(self, stream: Any = None) -> None:
        synchronize()
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        synchronize()

    def query(self) -> bool:
        return True

    def wait(self, stream: Any = None) -> None:
        """Ops run in order on the NeuronCore's stream: nothing to wait for."""

    def elapsed_time(self, end: HostTimedEvent) -> float:
        """Milliseconds between this event's ``record`` and ``end``'s, as CUDA reports them."""
        if self._time is None or end._time is None:
            raise RuntimeError("elapsed_time needs both events recorded (call .record() on each first)")
        return (end._time - self._time) * 1000.0


def stream_context(stream: Any) -> Any:
    found = getattr(torch.neuron, "stream", None)  # type: ignore[attr-defined]
    return found(stream) if found is not None else contextlib.nullcontext()


@contextlib.contextmanager
def device_context(device: Any) -> Iterator[None]:
    """``with torch.cuda.device(i):`` -> the NeuronCore ``i`` is current inside the block."""
    if device is None or (isinstance(device, int) and device < 0):
        yield
        return
    previous = torch.neuron.current_device()  # type: ignore[attr-defined]
    torch.neuron.set_device(device)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        torch.neuron.set_device(previous)  # type: ignore[attr-defined]
