"""``torch.cuda.*`` called from user code runs on the NeuronCore; library code gets the real answers.

Every public function (and the ``Stream``, ``Event``, ``device`` classes) of ``torch.cuda`` is
replaced by a stand-in that looks at its caller (:mod:`neuroncompat.cuda.callers`):

- from library code (torch, transformers, accelerate, TRL, PEFT, installed packages) it is the
  original: ``torch.cuda.is_available()`` stays False there, so the libraries take their Neuron
  paths (not accelerate#3020's wrong distributed type under Ascend's ``transfer_to_npu``);
- from user code it is the ``torch.neuron`` equivalent in :data:`MAPPED` (logged once per site
  with the ``neuron-migrate`` rule that rewrites it), or, for a call with no Neuron meaning
  (:data:`NO_EQUIVALENT`), a :class:`CudaRedirectError` naming the call, the line and the fix.

No fake compute capability: ``get_device_capability()`` answers ``(0, 0)`` (no CUDA
architecture), so ``capability >= (8, 0)`` checks select the portable path rather than a CUDA
kernel that does not exist here; ``get_device_properties`` has ``major``/``minor`` 0 too.

The stand-in classes keep ``isinstance(x, torch.cuda.Stream)`` working for library code (a
metaclass forwards the check to the real class).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, NamedTuple

# torch.neuron is registered at runtime (TorchNeuron, or the simulator), so torch's stubs lack it:
# its uses below carry `type: ignore[attr-defined]`.
import torch

from neuroncompat.cuda import memory_stats, runtime, sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.cuda.devices import index_of
from neuroncompat.patch import Patch


class CudaRedirectError(RuntimeError):
    """A ``torch.cuda`` call from user code that has no Neuron equivalent."""


class Mapping(NamedTuple):
    handler: Callable[..., Any]
    became: str
    rule: str | None = "NM104"


def _neuron(name: str, accelerator_name: str | None = None) -> Callable[..., Any]:
    """``torch.neuron.<name>(index, ...)``, the CUDA device argument turned into a core index."""

    def call(device: Any = None, *args: Any, **kwargs: Any) -> Any:
        function = runtime.neuron_call(name, accelerator_name)
        index = index_of(device)
        return function(*args, **kwargs) if index is None else function(index, *args, **kwargs)

    return call


def _neuron_plain(name: str) -> Callable[..., Any]:
    """``torch.neuron.<name>(...)`` with the arguments as given (seeds, states)."""
    return lambda *args, **kwargs: runtime.neuron_call(name)(*args, **kwargs)


def _set_device(device: Any) -> None:
    index = index_of(device)
    if index is not None and index >= 0:
        torch.neuron.set_device(index)  # type: ignore[attr-defined]


def _stream(device: Any = None, priority: int = 0, **kwargs: Any) -> Any:
    index = index_of(device)
    return torch.Stream(
        device=torch.device("neuron", torch.neuron.current_device() if index is None else index),  # type: ignore[attr-defined]
        priority=priority,
    )


_STATS = "torch.neuron.{}()"
MAPPED: dict[str, Mapping] = {
    "is_available": Mapping(lambda: torch.neuron.is_available(), "torch.neuron.is_available()"),  # type: ignore[attr-defined]
    "is_initialized": Mapping(lambda: torch.neuron.is_available(), "torch.neuron.is_available()"),  # type: ignore[attr-defined]
    "init": Mapping(lambda: None, "nothing (the Neuron runtime starts on first use)"),
    "device_count": Mapping(lambda: torch.neuron.device_count(), "torch.neuron.device_count()"),  # type: ignore[attr-defined]
    "current_device": Mapping(lambda: torch.neuron.current_device(), "torch.neuron.current_device()"),  # type: ignore[attr-defined]
    "set_device": Mapping(_set_device, "torch.neuron.set_device()"),
    "synchronize": Mapping(lambda device=None: runtime.synchronize(index_of(device)), "torch.neuron.synchronize()"),
    "empty_cache": Mapping(lambda: runtime.neuron_call("empty_cache", "empty_cache")(), "torch.neuron.empty_cache()"),
    "get_device_name": Mapping(_neuron("get_device_name"), "torch.neuron.get_device_name()"),
    "get_device_properties": Mapping(
        lambda device=None: runtime.get_device_properties(index_of(device)),
        "NeuronCore properties (name, total_memory; major=minor=0: no CUDA architecture)",
    ),
    "get_device_capability": Mapping(
        lambda device=None: (0, 0), "(0, 0): no CUDA architecture, capability checks take the portable path", "NM904"
    ),
    "get_arch_list": Mapping(lambda: [], "[] (no CUDA architectures)", "NM904"),
    "is_bf16_supported": Mapping(lambda *a, **k: True, "True (bf16 runs on every NeuronCore)"),
    "is_tf32_supported": Mapping(lambda: False, "False (no TF32 on Neuron)", "NM206"),
    "can_device_access_peer": Mapping(
        lambda *a: False, "False (NeuronCores exchange data through collectives)", "NM903"
    ),
    "is_current_stream_capturing": Mapping(lambda: False, "False (no CUDA graph capture)", "NM903"),
    "manual_seed": Mapping(_neuron_plain("manual_seed_all"), "torch.neuron.manual_seed_all()"),
    "manual_seed_all": Mapping(_neuron_plain("manual_seed_all"), "torch.neuron.manual_seed_all()"),
    "seed": Mapping(_neuron_plain("seed"), "torch.neuron.seed()"),
    "seed_all": Mapping(_neuron_plain("seed_all"), "torch.neuron.seed_all()"),
    "initial_seed": Mapping(_neuron_plain("initial_seed"), "torch.neuron.initial_seed()"),
    "get_rng_state": Mapping(_neuron("get_rng_state"), "torch.neuron.get_rng_state()"),
    "get_rng_state_all": Mapping(_neuron_plain("get_rng_state_all"), "torch.neuron.get_rng_state_all()"),
    "set_rng_state": Mapping(
        lambda new_state, device="cuda": runtime.neuron_call("set_rng_state")(new_state, index_of(device)),
        "torch.neuron.set_rng_state()",
    ),
    "set_rng_state_all": Mapping(_neuron_plain("set_rng_state_all"), "torch.neuron.set_rng_state_all()"),
    "memory_allocated": Mapping(_neuron("memory_allocated", "memory_allocated"), _STATS.format("memory_allocated")),
    "max_memory_allocated": Mapping(
        _neuron("max_memory_allocated", "max_memory_allocated"), _STATS.format("max_memory_allocated")
    ),
    "memory_reserved": Mapping(_neuron("memory_reserved", "memory_reserved"), _STATS.format("memory_reserved")),
    "max_memory_reserved": Mapping(
        _neuron("max_memory_reserved", "max_memory_reserved"), _STATS.format("max_memory_reserved")
    ),
    "memory_cached": Mapping(_neuron("memory_reserved", "memory_reserved"), _STATS.format("memory_reserved")),
    "max_memory_cached": Mapping(
        _neuron("max_memory_reserved", "max_memory_reserved"), _STATS.format("max_memory_reserved")
    ),
    "memory_stats": Mapping(
        lambda device=None: memory_stats.memory_stats(index_of(device)),
        "torch.neuron.memory_stats(), keyed as CUDA's",
    ),
    "reset_peak_memory_stats": Mapping(
        _neuron("reset_peak_memory_stats", "reset_peak_memory_stats"), _STATS.format("reset_peak_memory_stats")
    ),
    "reset_max_memory_allocated": Mapping(
        _neuron("reset_peak_memory_stats", "reset_peak_memory_stats"), _STATS.format("reset_peak_memory_stats")
    ),
    "reset_max_memory_cached": Mapping(
        _neuron("reset_peak_memory_stats", "reset_peak_memory_stats"), _STATS.format("reset_peak_memory_stats")
    ),
    "memory_summary": Mapping(
        lambda device=None, abbreviated=False: runtime.memory_summary(index_of(device), abbreviated),
        "a summary of torch.neuron's memory counters",
        None,
    ),
    "mem_get_info": Mapping(
        lambda device=None: runtime.mem_get_info(index_of(device)), "(total - reserved, total) of the NeuronCore"
    ),
    "current_stream": Mapping(_stream, "the NeuronCore's stream (torch.Stream on neuron)", "NM903"),
    "default_stream": Mapping(_stream, "the NeuronCore's stream (torch.Stream on neuron)", "NM903"),
    "set_stream": Mapping(lambda stream: None, "nothing (one in-order stream per NeuronCore)", "NM903"),
    "stream": Mapping(runtime.stream_context, "torch.neuron.stream()", "NM903"),
}

# Classes: called from user code they build the Neuron object; isinstance keeps meaning the real class.
CLASSES: dict[str, Mapping] = {
    "Stream": Mapping(_stream, "torch.Stream on the NeuronCore", "NM903"),
    "Event": Mapping(
        runtime.HostTimedEvent, "a host-timed event: waits for the NeuronCore, then time.perf_counter()", "NM903"
    ),
    "device": Mapping(
        lambda device: runtime.device_context(index_of(device)), "that NeuronCore made current in the block"
    ),
}

_MEMORY_FIX = (
    "remove it: the Neuron runtime manages NeuronCore memory itself "
    "(torch.cuda.memory_allocated() and max_memory_allocated() are redirected)"
)
_MONITOR_FIX = "read NeuronCore utilization and memory with neuron-top or neuron-monitor, outside the script"
_GRAPH_FIX = "remove the CUDA graph capture: torch.compile(model, backend='neuron') compiles the whole graph"
NO_EQUIVALENT: dict[str, str] = {
    **dict.fromkeys(
        (
            "utilization",
            "temperature",
            "power_draw",
            "clock_rate",
            "memory_usage",
            "device_memory_used",
            "list_gpu_processes",
        ),
        _MONITOR_FIX,
    ),
    **dict.fromkeys(
        (
            "set_per_process_memory_fraction",
            "get_per_process_memory_fraction",
            "caching_allocator_alloc",
            "caching_allocator_delete",
            "caching_allocator_enable",
            "caching_allocator_disabled",
            "change_current_allocator",
            "get_allocator_backend",
            "use_mem_pool",
            "memory_snapshot",
            "memory_stats_as_nested_dict",
            "reset_accumulated_memory_stats",
            "host_memory_stats",
            "host_memory_stats_as_nested_dict",
            "reset_accumulated_host_memory_stats",
            "reset_peak_host_memory_stats",
            "ipc_collect",
        ),
        _MEMORY_FIX,
    ),
    **dict.fromkeys(("make_graphed_callables", "graph_pool_handle"), _GRAPH_FIX),
}
_GENERIC_FIX = "remove the call, or guard it with `if torch.version.cuda:` (None on Neuron, so the block is skipped)"


def _location(frame: Any) -> str:
    return f"{sites.display(frame.f_code.co_filename)}:{frame.f_lineno}"


def _for_user_code(original: Callable[..., Any], on_user: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` for library callers (they see the real device); ``on_user(frame, ...)`` for user code."""

    @functools.wraps(original)
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return original(*args, **kwargs)
        return on_user(frame, *args, **kwargs)

    return stand_in


def _redirecting(name: str, original: Callable[..., Any], mapping: Mapping) -> Callable[..., Any]:
    call = f"torch.cuda.{name}()"

    def redirect(frame: Any, *args: Any, **kwargs: Any) -> Any:
        sites.record(frame, call, mapping.became, mapping.rule)
        return mapping.handler(*args, **kwargs)

    return _for_user_code(original, redirect)


def _refusing(name: str, original: Callable[..., Any], fix: str) -> Callable[..., Any]:
    call = f"torch.cuda.{name}()"

    def refuse(frame: Any, *args: Any, **kwargs: Any) -> Any:
        sites.record(frame, call, "error: no Neuron equivalent", "NM903")
        raise CudaRedirectError(
            f"{call} at {_location(frame)} has no Neuron equivalent, so NEURONCOMPAT_CUDA=redirect "
            f"cannot run it. Fix: {fix}."
        )

    return _for_user_code(original, refuse)


class _StandInClass(type):
    """Metaclass of a stand-in for a ``torch.cuda`` class (see the module docstring)."""

    _real: type
    _mapping: Mapping
    _call: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return cls._real(*args, **kwargs)
        sites.record(frame, cls._call, cls._mapping.became, cls._mapping.rule)
        return cls._mapping.handler(*args, **kwargs)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls._real)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, cls._real)


def _stand_in_class(name: str, real: type, mapping: Mapping) -> type:
    return _StandInClass(
        name, (), {"_real": real, "_mapping": mapping, "_call": f"torch.cuda.{name}()", "__doc__": real.__doc__}
    )


def public_functions() -> dict[str, Callable[..., Any]]:
    """The functions ``torch.cuda`` defines (not the helpers it imports)."""
    return {
        name: value
        for name, value in vars(torch.cuda).items()
        if not name.startswith("_") and inspect.isfunction(value) and (value.__module__ or "").startswith("torch.cuda")
    }


def install(patch: Patch) -> None:
    cuda = torch.cuda
    for name, function in public_functions().items():
        mapping = MAPPED.get(name)
        if mapping is not None:
            patch.replace(cuda, name, _redirecting(name, function, mapping))
        else:
            patch.replace(cuda, name, _refusing(name, function, NO_EQUIVALENT.get(name, _GENERIC_FIX)))
    for name, mapping in CLASSES.items():
        patch.replace(cuda, name, _stand_in_class(name, getattr(cuda, name), mapping))
