"""A ``torch_neuronx`` module for the simulator, so libraries detect Neuron as on hardware.

transformers (``is_torch_neuron_available``), accelerate (``is_neuron_available``) and TRL all
start with ``importlib.util.find_spec("torch_neuronx")`` and then look at ``torch.neuron``. The
stub is placed in ``sys.modules`` with a real ``ModuleSpec`` only while simulating.

It also carries the module-level names TorchNeuron documents, so a script that calls them does not fail its
dry run for a name the hardware has:

- ``torch_neuronx.memory_*`` (memory-profiling guide, "the torch_neuronx.memory_* APIs",
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html): the page's
  table of names is not readable, so every ``torch.neuron`` memory function is here under its CUDA name
  (``memory_stats``, ``memory_allocated``, ``max_memory_allocated``, ``memory_reserved``,
  ``max_memory_reserved``, ``memory_summary``, ``memory_snapshot``, ``reset_peak_memory_stats``, ...).
- ``neuron_dynamo_backend`` and ``get_dynamo_metrics`` (torch.compile backend reference, "the
  neuron_dynamo_backend helper API",
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html): whether
  ``neuron_dynamo_backend`` is a module of helpers or the backend callable is not readable, so it is both: a
  submodule (``torch_neuronx.neuron_dynamo_backend``, importable, holding ``get_dynamo_metrics``) that can be
  called as the ``neuron`` backend. ``get_dynamo_metrics()``'s real return value is not documented here; the
  simulator's is a dict of what it recorded (``graphs_compiled``, ``graphs_rejected``, ``signatures``).
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

from neuroncompat.simulator import compile_backend, device_module

STUB_VERSION = "2.13.3.1+simulated"  # the simulator follows Neuron 2.34.0 (followed_release.py)
NAME = "torch_neuronx"
BACKEND_MODULE = f"{NAME}.neuron_dynamo_backend"
MEMORY_NAMES = (
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_summary",
    "memory_snapshot",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "reset_accumulated_memory_stats",
    "empty_cache",
)


def get_dynamo_metrics() -> dict[str, Any]:
    """What the simulated ``neuron`` backend compiled in this process (the real format is not documented)."""
    graphs = compile_backend.compiles()
    return {
        "graphs_compiled": sum(1 for g in graphs if not g.rejected),
        "graphs_rejected": sum(1 for g in graphs if g.rejected),
        "signatures": [g.signature for g in graphs],
    }


class _BackendModule(types.ModuleType):
    """``torch_neuronx.neuron_dynamo_backend``: the helper module, callable as the ``neuron`` backend."""

    def __call__(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        return compile_backend.neuron_backend(gm, example_inputs, **kwargs)


def _module(
    name: str, doc: str, cls: type[types.ModuleType] = types.ModuleType, package: bool = False
) -> types.ModuleType:
    module = cls(name, doc)
    spec = importlib.machinery.ModuleSpec(name, loader=None, origin="neuroncompat-simulator", is_package=package)
    module.__spec__ = spec
    if package:  # its submodule (neuron_dynamo_backend) imports resolve from sys.modules
        module.__path__ = []
    module.__simulated__ = True  # type: ignore[attr-defined]
    return module


def install() -> None:
    if NAME in sys.modules and not getattr(sys.modules[NAME], "__simulated__", False):
        raise RuntimeError("a real torch_neuronx module is already imported; refusing to shadow it")
    module = _module(NAME, "Simulated torch-neuronx (neuroncompat.simulator).", package=True)
    module.__version__ = STUB_VERSION  # type: ignore[attr-defined]
    for name in MEMORY_NAMES:
        setattr(module, name, getattr(device_module, name))
    backend = _module(BACKEND_MODULE, "Simulated neuron_dynamo_backend helpers.", _BackendModule)
    backend.get_dynamo_metrics = get_dynamo_metrics  # type: ignore[attr-defined]
    module.neuron_dynamo_backend = backend  # type: ignore[attr-defined]
    module.get_dynamo_metrics = get_dynamo_metrics  # type: ignore[attr-defined]
    sys.modules[NAME] = module
    sys.modules[BACKEND_MODULE] = backend


def uninstall() -> None:
    for name in (BACKEND_MODULE, NAME):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__simulated__", False):
            del sys.modules[name]
