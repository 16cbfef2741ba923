"""Process-wide state of the simulated Neuron device: whether it is on, its cores, the current core.

Kept apart from ``torch.neuron`` (``device_module``) so that module and ``enable``/``disable`` read
one source of truth, and so ``disable()`` can make the device unavailable without unregistering
it (PyTorch allows the PrivateUse1 backend to be renamed only once per process). The current core
lives in the C++ device guard's thread-local (``native/guard.cpp``), where PyTorch itself
reads it; memory and random state live in C++ too.
"""

from __future__ import annotations

import ctypes

from neuroncompat import environment

# Freed blocks a core keeps for reuse before returning memory to the host (docs/simulator.md).
CACHE_LIMIT_BYTES = 256 * 1024**2
MEMORY_ENV = "NEURONCOMPAT_SIMULATE_CORE_MEMORY"

_enabled = False
_cores = 0
_core_memory = 0  # configure() reads NEURONCOMPAT_SIMULATE_CORE_MEMORY
_native: ctypes.CDLL | None = None


def use_native(library: ctypes.CDLL) -> None:
    """The loaded C++ backend, which keeps the current core, the memory and the RNG state."""
    global _native
    _native = library


def _lib() -> ctypes.CDLL:
    if _native is None:
        raise RuntimeError("the simulated neuron device is not registered (neuroncompat.simulator.enable())")
    return _native


def configure(cores: int, default_device: int = 0) -> None:
    """Turn the device on with ``cores`` logical NeuronCores; threads start on ``default_device``.

    Under torchrun each process starts on its rank-local core, as TorchNeuron binds one
    (accelerate reads ``torch.neuron.current_device()`` for a rank's device).
    """
    global _enabled, _cores, _core_memory
    if cores < 1:
        raise ValueError(f"the simulated device needs at least one core, got cores={cores}")
    _core_memory = environment.size(MEMORY_ENV)
    lib = _lib()
    lib.neuroncompat_configure(cores, default_device)
    lib.neuroncompat_configure_memory(_core_memory, CACHE_LIMIT_BYTES)
    lib.neuroncompat_set_available(1)
    _enabled, _cores = True, cores


def deconfigure() -> None:
    global _enabled
    _enabled = False
    if _native is not None:
        _native.neuroncompat_set_available(0)


def enabled() -> bool:
    return _enabled


def cores() -> int:
    return _cores if _enabled else 0


def core_memory() -> int:
    """Bytes one simulated core can hold (the allocator's out-of-memory limit)."""
    return _core_memory


def current_device() -> int:
    return int(_lib().neuroncompat_current_device())


def set_current_device(index: int) -> None:
    check_index(index)
    _lib().neuroncompat_set_current_device(index)


def check_index(index: int) -> None:
    if not 0 <= index < max(_cores, 1):
        raise RuntimeError(
            f"neuron:{index} is not a valid device: {_cores} simulated NeuronCore(s) are visible "
            f"(valid indices 0..{_cores - 1})"
        )
