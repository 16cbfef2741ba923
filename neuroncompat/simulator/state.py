"""Process-wide state of the simulated Neuron device: cores, current core, RNG, memory.

Kept apart from the tensor and the ``torch.neuron`` module so both read one source of truth,
and so ``disable()`` can make the device unavailable without unregistering it (PyTorch allows
the PrivateUse1 backend to be renamed only once per process).
"""

from __future__ import annotations

import ctypes
import threading
import weakref

import torch

from neuroncompat.simulator.rng import CoreGenerator

# Logical NeuronCore memory on Trn2 with the default LNC=2: 96 GiB HBM per chip, 4 logical cores.
CORE_MEMORY_BYTES = 24 * 1024**3

_enabled = False
_cores = 0
_default_device = 0
_local = threading.local()  # the current core per thread, without the C++ guard (native_device)
_native: ctypes.CDLL | None = None  # the C++ guard's library: it keeps the current core instead
_generators: dict[int, CoreGenerator] = {}
_lock = threading.Lock()
# storage key -> [live wrappers, bytes, core]; allocated/peak bytes per core.
_storages: dict[int, list[int]] = {}
_allocated: dict[int, int] = {}
_peak: dict[int, int] = {}


def configure(cores: int, default_device: int = 0) -> None:
    """Turn the device on with ``cores`` logical NeuronCores; threads start on ``default_device``.

    Under torchrun each process starts on its rank-local core, as TorchNeuron binds one
    (accelerate reads ``torch.neuron.current_device()`` for a rank's device).
    """
    global _enabled, _cores, _default_device
    if cores < 1:
        raise ValueError(f"the simulated device needs at least one core, got cores={cores}")
    _enabled, _cores, _default_device = True, cores, default_device
    if _native is not None:
        _native.neuroncompat_configure(cores, default_device)
        _native.neuroncompat_set_available(1)
    for i in range(cores):
        _generators.setdefault(i, CoreGenerator())
        _allocated.setdefault(i, 0)
        _peak.setdefault(i, 0)


def deconfigure() -> None:
    global _enabled
    _enabled = False
    if _native is not None:
        _native.neuroncompat_set_available(0)


def use_native(library: ctypes.CDLL) -> None:
    """Keep the current core in the C++ device guard's thread-local, where PyTorch reads it."""
    global _native
    _native = library


def enabled() -> bool:
    return _enabled


def cores() -> int:
    return _cores if _enabled else 0


def current_device() -> int:
    if _native is not None:
        return int(_native.neuroncompat_current_device())
    return getattr(_local, "device", _default_device)


def set_current_device(index: int) -> None:
    check_index(index)
    if _native is not None:
        _native.neuroncompat_set_current_device(index)
    else:
        _local.device = index


def check_index(index: int) -> None:
    if not 0 <= index < max(_cores, 1):
        raise RuntimeError(
            f"neuron:{index} is not a valid device: {_cores} simulated NeuronCore(s) are visible "
            f"(valid indices 0..{_cores - 1})"
        )


def generator(index: int) -> CoreGenerator:
    gen = _generators.get(index)
    if gen is None:
        gen = _generators[index] = CoreGenerator()
    return gen


def track_allocation(elem: torch.Tensor, index: int) -> None:
    """Count the payload's storage against its core while any payload on it is alive.

    The finalizer hangs on the CPU payload, not on the wrapper: ``nn.Module.to`` swaps wrapper
    tensors with ``torch.utils.swap_tensors``, which refuses tensors that carry weakrefs.
    """
    if type(elem) is not torch.Tensor or elem.is_meta:
        return
    storage = elem.untyped_storage()
    key = storage.data_ptr()
    if key == 0:
        return
    with _lock:
        entry = _storages.get(key)
        if entry is None:
            nbytes = storage.nbytes()
            _storages[key] = [1, nbytes, index]
            total = _allocated.get(index, 0) + nbytes
            _allocated[index] = total
            if total > _peak.get(index, 0):
                _peak[index] = total
        else:
            entry[0] += 1
    weakref.finalize(elem, _release, key)


def _release(key: int) -> None:
    with _lock:
        entry = _storages.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            del _storages[key]
            _allocated[entry[2]] = _allocated.get(entry[2], 0) - entry[1]


def allocated(index: int) -> int:
    return _allocated.get(index, 0)


def peak(index: int) -> int:
    return _peak.get(index, 0)


def reset_peak(index: int) -> None:
    _peak[index] = _allocated.get(index, 0)
