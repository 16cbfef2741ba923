"""A CPU-backed ``neuron`` device, so Hugging Face libraries take their real Neuron code paths.

``enable(cores=N)`` registers ``neuron`` as PyTorch's PrivateUse1 device, installs
``torch.neuron`` and a ``torch_neuronx`` import stub, autocast on ``neuron`` and a recording
``neuron`` torch.compile backend. transformers, accelerate and TRL then detect Neuron exactly as
on a Trainium host: ``TrainingArguments`` picks ``neuron:0``, TRL pads to multiples of 128, and
the known gaps (``device_map="auto"`` landing on CPU, TRL #7664, TRL #7660) reproduce.

PyTorch lets PrivateUse1 be renamed once per process, so the registration is permanent;
``disable()`` makes the device unavailable (``torch.neuron.is_available()`` is False, the stub is
gone, library caches are cleared) but tensors already on it keep working. Tests that need a
process that never saw the device run in a subprocess.

``NEURONCOMPAT_SIMULATE=1`` enables it at ``import torch`` (the ``torch.backends`` entry point in
``neuroncompat_autoload``, so launchers see it too) and at ``import neuroncompat`` (cores from
``NEURONCOMPAT_SIMULATE_CORES``, default 2 or one per local rank under torchrun; each process
starts on its ``LOCAL_RANK`` core). ``backend="neuron"`` process groups run their collectives
over gloo (``simulator.distributed``). It refuses to start where a real torch-neuronx is
installed.
"""

from __future__ import annotations

import logging
import os

import torch

from neuroncompat.detect import clear_availability_caches, detect_torch_neuronx
from neuroncompat.simulator import (
    autocast,
    compile_backend,
    current_device,
    device_module,
    distributed,
    factories,
    native_device,
    pinned_memory,
    serialization,
    set_data,
    state,
    torch_neuronx_stub,
)
from neuroncompat.simulator.compile_backend import CompiledGraph, compiles, reset_compiles
from neuroncompat.simulator.tensor import NeuronTensor

__all__ = [
    "enable",
    "disable",
    "is_enabled",
    "register_backend",
    "compiles",
    "reset_compiles",
    "CompiledGraph",
    "NeuronTensor",
]

logger = logging.getLogger("neuroncompat.simulator")

DEFAULT_CORES = 2
_libraries: list[torch.library.Library] = []
_autograd_threading: list[bool] = []  # the setting enable() found, restored by disable()


class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self) -> bool:
        return state.enabled()

    def has_primary_context(self, dev_id: int) -> bool:
        return state.enabled()

    def is_built(self) -> bool:
        return True


class _Guard(torch._C._acc.DeviceGuard):
    def type_(self) -> torch._C._autograd.DeviceType:  # type: ignore[override]  # the stub's return type is wrong
        return torch._C._autograd.DeviceType.PrivateUse1


def register_backend() -> None:
    """Rename PrivateUse1 to ``neuron`` and register kernels, without making the device available.

    Possible once per process; later calls do nothing.
    """
    if _libraries:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise RuntimeError(f"PrivateUse1 is already registered as {name!r}; cannot simulate Neuron in this process")
    if name == "privateuseone":
        torch.utils.rename_privateuse1_backend("neuron")
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=False)
    torch._register_device_module("neuron", device_module)
    _register_guard_and_hooks()
    aten = torch.library.Library("aten", "IMPL")
    fallback = torch.library.Library("_", "IMPL")
    factories.register(aten)
    autocast.register(aten, fallback)
    _libraries.extend([aten, fallback])
    compile_backend.register()
    if torch.distributed.is_available():
        distributed.register()


def _register_guard_and_hooks() -> None:
    """PrivateUse1's device guard and hooks: the C++ ones, or where they cannot be built, Python's.

    Only the C++ guard can answer PyTorch's own "which core is current" (``native_device``). The
    Python fallback is what PyTorch lets a Python backend register: core 0 for every index-less
    ``neuron`` that PyTorch resolves in C++, which ``current_device`` then corrects where it can.
    """
    try:
        native_device.register()
    except native_device.NativeDeviceUnavailable as exc:
        logger.warning(
            "simulated neuron device: %s. Falling back to PyTorch's Python device guard: "
            "torch.tensor(..., device='neuron') and streams use core 0 whatever set_device chose, "
            "and torch.Generator(device='neuron') is unavailable (docs/simulator.md).",
            exc,
        )
        torch._C._acc.register_python_privateuseone_hook(_Hooks())
        torch._C._acc.register_python_privateuseone_device_guard(_Guard())
        return
    state.use_native(native_device.load())


def enable(cores: int | None = None) -> None:
    """Turn the simulated device on with ``cores`` NeuronCores (default: env or 2)."""
    found = detect_torch_neuronx()
    if found.real_hardware_stack:
        raise RuntimeError(
            f"refusing to simulate Neuron: a real torch-neuronx is installed ({found.kind}, "
            f"{found.version}). The simulator is for machines without Trainium; unset "
            "NEURONCOMPAT_SIMULATE or uninstall torch-neuronx from this environment."
        )
    if cores is None:
        cores = int(os.environ.get("NEURONCOMPAT_SIMULATE_CORES", 0)) or max(DEFAULT_CORES, _local_world_size())
    register_backend()
    _autograd_on_calling_thread()
    state.configure(cores, default_device=int(os.environ.get("LOCAL_RANK", 0)) % cores)
    torch_neuronx_stub.install()
    pinned_memory.install()
    if not native_device.registered():
        current_device.install()
    serialization.install()
    set_data.install()
    clear_availability_caches()
    logger.debug("simulated Neuron device enabled with %d core(s)", cores)


def _local_world_size() -> int:
    """Processes on this host under torchrun/accelerate: each needs its own core."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", 1))


def _autograd_on_calling_thread() -> None:
    """Run backward passes on the calling thread, so they work on every simulated core.

    The autograd engine sizes its per-device worker queues from the device guards' counts at a
    process's first ``backward()``: a backward touching a core past that count then hits an
    INTERNAL ASSERT (engine.cpp ``device_ready_queues_``). That happens when a CPU backward ran
    before the simulator was enabled, when ``enable`` later asks for more cores, and always with
    the Python fallback guard, which reports one device. With autograd multithreading off the
    engine uses the calling thread's queue for every device (what torch's own multi-threaded
    process group does). The setting is
    per thread: it covers the thread that enabled the simulator, where scripts, the Trainer
    and ``torchrun`` ranks run their backward passes.
    """
    if not _autograd_threading:
        _autograd_threading.append(torch._C._is_multithreading_enabled())
    torch._C._set_multithreading_enabled(False)


def disable() -> None:
    """Make the device unavailable again (its registration stays: see the module docstring)."""
    state.deconfigure()
    if _autograd_threading:
        torch._C._set_multithreading_enabled(_autograd_threading.pop())
    torch_neuronx_stub.uninstall()
    pinned_memory.uninstall()
    current_device.uninstall()
    serialization.uninstall()
    set_data.uninstall()
    clear_availability_caches()


def is_enabled() -> bool:
    return state.enabled()
