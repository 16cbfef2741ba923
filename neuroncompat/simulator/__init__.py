"""A simulated ``neuron`` device, so Hugging Face libraries take their real Neuron code paths.

``enable(cores=N)`` loads the simulator's C++ PrivateUse1 backend (``native_device``: tensors on
``neuron:N`` are plain tensors in host memory from its allocator, computed by the CPU's kernels),
names it ``neuron``, and installs ``torch.neuron``, a ``torch_neuronx`` import stub (and an ``nki``
one, :mod:`~neuroncompat.simulator.nki_stub`), a recording ``neuron`` torch.compile backend, and
:mod:`~neuroncompat.simulator.hub_kernels`, which runs layers that Hub kernels' Neuron mappings
replace with their own forward and reports the replacement, and lets flex attention take ``neuron`` tensors
(:mod:`~neuroncompat.simulator.flex_attention`) and gives ``varlen_attn`` a kernel
(:mod:`~neuroncompat.simulator.varlen_attention`), as TorchNeuron 2.34 runs both. transformers, accelerate and TRL then detect Neuron exactly as
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

``NEURON_RT_VISIBLE_CORES`` is honoured as the Neuron runtime documents it
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/guides/nrt-developer-guide.html,
rules in :mod:`neuroncompat.core_sets`): the process sees only the cores it names, renumbered from 0
(``2,3`` gives ``device_count() == 2``, as ``neuron:0`` and ``neuron:1``), and a set the runtime documents
as invalid (not contiguous, not increasing, not a core list) stops ``enable`` with the runtime's rule. A set
naming a core the simulated host lacks (``NEURONCOMPAT_SIMULATE_CORES`` or ``enable(cores=...)``) is refused
as ``nrt_init`` refuses too few free cores; without either, the simulated host is taken to have the cores
named. The runtime's own wording of these errors, and whether they come at ``import torch`` or at the
first device use, are not documented: here they come where the device is enabled (the autoload turns
the error into a warning and a process without the device, so the script's first ``neuron`` tensor fails).
The TRL guide's ``1,2`` (its collectives fail) is only refused by the shim's ``visible_cores`` patch.
"""

from __future__ import annotations

import logging
import os
import sys

import torch

from neuroncompat import core_sets, environment
from neuroncompat.detect import clear_availability_caches, detect_torch_neuronx
from neuroncompat.simulator import (
    compile_backend,
    device_checks,
    device_module,
    distributed,
    flex_attention,
    hub_kernels,
    integer_histc,
    native_device,
    nki_stub,
    state,
    torch_neuronx_stub,
    varlen_attention,
)
from neuroncompat.simulator.compile_backend import CompiledGraph, compiles, reset_compiles

__all__ = [
    "enable",
    "disable",
    "is_enabled",
    "register_backend",
    "compiles",
    "reset_compiles",
    "CompiledGraph",
]

logger = logging.getLogger("neuroncompat.simulator")

CORES_ENV = "NEURONCOMPAT_SIMULATE_CORES"
DEFAULT_CORES = environment.integer_default(CORES_ENV)
_registered: list[bool] = []
_autograd_threading: list[bool] = []  # the setting enable() found, restored by disable()


def register_backend() -> None:
    """Rename PrivateUse1 to ``neuron`` and register kernels, without making the device available.

    Possible once per process; later calls do nothing.
    """
    if _registered:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise RuntimeError(f"PrivateUse1 is already registered as {name!r}; cannot simulate Neuron in this process")
    library = native_device.load()  # its kernels register with the dispatcher as it loads
    if name == "privateuseone":
        torch.utils.rename_privateuse1_backend("neuron")
    native_device.register()
    device_checks.install(library)
    state.use_native(library)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    torch._register_device_module("neuron", device_module)
    _registered.append(True)
    compile_backend.register()
    varlen_attention.register()
    integer_histc.register()
    if torch.distributed.is_available():
        distributed.register()


def enable(cores: int | None = None, *, shim: bool = True) -> None:
    """Turn the simulated device on for a host of ``cores`` NeuronCores (default: env or 2), showing the
    process the ones ``NEURON_RT_VISIBLE_CORES`` names when it is set.

    A shim imported before (``import neuroncompat`` found no device) starts its patches now, as it would on a
    trn2; ``shim=False`` gives the device alone, for what measures the device itself (the benches of its
    step, its op coverage, the plan's accuracy) in a process that imported neuroncompat."""
    found = detect_torch_neuronx()
    if found.real_hardware_stack:
        raise RuntimeError(
            f"refusing to simulate Neuron: a real torch-neuronx is installed ({found.kind}, "
            f"{found.version}). The simulator is for machines without Trainium; unset "
            "NEURONCOMPAT_SIMULATE or uninstall torch-neuronx from this environment."
        )
    if cores is None:
        cores = environment.integer(CORES_ENV) if environment.is_set(CORES_ENV) else None
    cores = _visible_cores(cores)
    register_backend()
    _autograd_on_calling_thread()
    state.configure(cores, default_device=int(os.environ.get("LOCAL_RANK", 0)) % cores)
    torch_neuronx_stub.install()
    nki_stub.install()
    hub_kernels.install()
    flex_attention.install()
    clear_availability_caches()
    logger.debug("simulated Neuron device enabled with %d core(s)", cores)
    started = sys.modules.get("neuroncompat.shim")  # not imported here: the device never imports the shim itself
    if shim and started is not None:
        started.device_appeared()


def _visible_cores(host: int | None) -> int:
    """How many cores the process sees on a host of ``host`` (None: not given) NeuronCores."""
    value = os.environ.get(core_sets.ENV)
    if value is None:
        return host if host is not None else max(DEFAULT_CORES, _local_world_size())
    refused = core_sets.runtime_refusal(value)
    if refused is not None:
        raise RuntimeError(f"the simulated Neuron runtime cannot start: {refused}")
    named = core_sets.parse_cores(value)
    if host is not None and named[-1] >= host:
        raise RuntimeError(
            f"the simulated Neuron runtime cannot start: {core_sets.ENV}={value} names NeuronCore {named[-1]}, "
            f"but the simulated host has {host} (0-{host - 1}; {CORES_ENV} sets it)"
        )
    return len(named)


def _local_world_size() -> int:
    """Processes on this host under torchrun/accelerate: each needs its own core."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", 1))


def _autograd_on_calling_thread() -> None:
    """Run backward passes on the calling thread, so they work on every simulated core.

    The autograd engine sizes its per-device worker queues from the device guards' counts at a
    process's first ``backward()``: a backward touching a core past that count then hits an
    INTERNAL ASSERT (engine.cpp ``device_ready_queues_``). That happens when a CPU backward ran
    before the simulator was enabled, or when ``enable`` later asks for more cores. With autograd multithreading off the
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
    nki_stub.uninstall()
    hub_kernels.uninstall()
    flex_attention.uninstall()
    clear_availability_caches()


def is_enabled() -> bool:
    return state.enabled()
