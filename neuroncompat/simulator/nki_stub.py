"""An ``nki`` module for the simulator, so Hub kernels built for Neuron import as on hardware.

torch-neuronx imports the ``nki`` package when it loads ("The ``nki`` package is required.
``torch-neuronx`` imports it when it loads", TorchNeuron's NKI quickstart), so on a Trainium host
``import nki`` always works, and kernels checks for it before it loads a ``torch-neuron`` build
(the ``nki`` dependency in kernels/python_depends.json, checked with ``importlib.util.find_spec``).
A Neuron kernel repo (``build/torch-neuron/``: pure Python with ``@nki.jit`` kernels) therefore
imports on the simulator only with an ``nki`` of its own.

The stub imports and decorates, nothing more: ``nki.jit`` (with or without options, and
``kernel[lnc]``) returns a kernel whose call raises :class:`NkiNotSimulated`, because an NKI kernel
is compiled for a NeuronCore and cannot run on the CPU; ``nki.language``, ``nki.isa`` and any other
name resolve to inert placeholders so module-level uses (``nl.float32`` in a signature) work.
:mod:`neuroncompat.simulator.hub_kernels` runs a kernelized layer's own forward instead, so no NKI
kernel is called by a Neuron layer mapping. Installed only when no real ``nki`` is importable.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

_SUBMODULES = ("language", "isa", "typing")


class NkiNotSimulated(RuntimeError):
    """An NKI kernel was called on the simulated device, which has no NeuronCore to run it."""


class _Placeholder:
    """Any NKI name the stub does not model: attribute access, calls and indexing give more placeholders."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> _Placeholder:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> _Placeholder:
        return _Placeholder(f"{self._name}(...)")

    def __getitem__(self, key: Any) -> _Placeholder:
        return _Placeholder(f"{self._name}[...]")

    def __repr__(self) -> str:
        return f"<simulated nki {self._name}>"


class SimulatedKernel:
    """What ``@nki.jit`` returns on the simulator: the function, and an error when it is called."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn

    def __getitem__(self, lnc: Any) -> SimulatedKernel:
        return self  # kernel[lnc](...) picks the logical-core degree on hardware

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NkiNotSimulated(
            f"NKI kernel {self._fn.__qualname__} cannot run on the simulated Neuron device (it needs a NeuronCore). "
            "Layers that Hub kernels replace run their own forward on the simulator; call the PyTorch "
            "reference of this kernel in code meant to run there."
        )


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """``@nki.jit`` and ``@nki.jit(mode=..., ...)``."""
    if fn is None:
        return lambda inner: SimulatedKernel(inner)
    return SimulatedKernel(fn)


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name, "Simulated NKI (neuroncompat.simulator).")
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, origin="neuroncompat-simulator")
    module.__simulated__ = True  # type: ignore[attr-defined]
    module.__getattr__ = lambda attr: _missing(name, attr)  # type: ignore[method-assign]
    return module


def _missing(module: str, attr: str) -> _Placeholder:
    if attr.startswith("__"):
        raise AttributeError(attr)
    return _Placeholder(f"{module}.{attr}")


def install() -> bool:
    """Put the stub in ``sys.modules`` unless a real ``nki`` is importable; True when installed."""
    present = sys.modules.get("nki")
    if present is not None:
        return bool(getattr(present, "__simulated__", False))
    if importlib.util.find_spec("nki") is not None:
        return False
    root = _module("nki")
    root.jit = jit  # type: ignore[attr-defined]
    root.NkiNotSimulated = NkiNotSimulated  # type: ignore[attr-defined]
    sys.modules["nki"] = root
    for sub in _SUBMODULES:
        module = sys.modules[f"nki.{sub}"] = _module(f"nki.{sub}")
        setattr(root, sub, module)
    return True


def uninstall() -> None:
    for name in [n for n in sys.modules if n == "nki" or n.startswith("nki.")]:
        if getattr(sys.modules[name], "__simulated__", False):
            del sys.modules[name]
