"""Hub kernels on the simulated device: a Neuron layer mapping replaces the layer, its own forward runs.

kernels' ``kernelize`` replaces the ``forward`` of each layer registered with
``use_kernel_forward_from_hub`` by the forward of a kernel layer from the repo its mapping names for
the model's device (``kernels/layer/layer.py:496-575``, ``_replace_forward`` at :660). On the
simulator the device is ``neuron``, so a ``"neuron"`` entry (``LayerRepository``, a local repo, or
transformers' ``KernelConfig``) loads the repo's ``build/torch-neuron/`` layer, as on a trn2. That
layer calls NKI kernels, which need a NeuronCore (:mod:`neuroncompat.simulator.nki_stub`), so after
each replacement on the neuron device this module swaps in a forward that *looks* like the kernel's
(``module.forward.__qualname__`` is the kernel layer's, ``__wrapped__`` its forward) and runs the
layer's own class forward. The result equals the unkernelized model's, and the replacement is
reported: logged once per layer and kernel on ``neuroncompat.simulator``, listed by
:func:`replacements`, and passed to listeners (``neuroncompat simulate`` shows them per rank).

Layers left alone by ``kernelize`` (no mapping for the device, fallbacks) are not touched, nor are
replacements for other devices (``kernelize(model, device="cpu")`` on the simulator runs the CPU
kernel). Installed by ``simulator.enable()`` (now, or when ``kernels.layer.kernelize`` is first
imported) and removed by ``disable()``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import MethodType, ModuleType
from typing import Any

from neuroncompat import hooks

logger = logging.getLogger("neuroncompat.simulator")

_TARGET = "kernels.layer.kernelize"
_lock = threading.Lock()
_replacements: dict[tuple[str, str, str, str], int] = {}
_listeners: list[Callable[[KernelReplacement], None]] = []
_installed: list[tuple[ModuleType, Callable[..., Any]]] = []  # (kernels.layer.kernelize, its kernelize_layer)
_wanted = threading.Event()  # enable() asked for it; a later import of kernels installs it


@dataclass(frozen=True)
class KernelReplacement:
    """One layer class kernelize replaced on the neuron device, and with what."""

    layer: str  # the name it is registered under: use_kernel_forward_from_hub("RMSNorm")
    module: str  # the model's layer class
    kernel: str  # the kernel layer class that replaced its forward
    repo: str  # where that kernel came from: a Hub repo id, or the local path

    def to_dict(self) -> dict[str, str]:
        return {"layer": self.layer, "module": self.module, "kernel": self.kernel, "repo": self.repo}


def replacements() -> list[tuple[KernelReplacement, int]]:
    """Each distinct replacement since the last :func:`reset`, with how many layers it replaced."""
    with _lock:
        return [(KernelReplacement(*key), count) for key, count in _replacements.items()]


def reset() -> None:
    with _lock:
        _replacements.clear()


def on_replace(listener: Callable[[KernelReplacement], None]) -> Callable[[], None]:
    """Call ``listener`` with each replacement as kernelize makes it; returns its remover."""
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def _kernel_origin(kernel_forward: Callable[..., Any]) -> str:
    """The repo kernelize loaded the kernel layer with this forward from: kernels caches each loaded
    layer by its repository (``_CACHED_LAYER``, kernels/layer/layer.py:314, :690-699)."""
    from kernels.layer import layer

    for repo, loaded in list(layer._CACHED_LAYER.items()):
        if getattr(loaded, "forward", None) is kernel_forward:
            return str(getattr(repo, "_repo_id", None) or getattr(repo, "_repo_path", None) or repo)
    return kernel_forward.__module__.split(".")[0]


def _simulate(module: Any, layer_name: str) -> None:
    """kernelize put a kernel layer's forward on ``module``: run the layer's own forward under its name."""
    kernel_forward = module.forward.__func__
    own_forward = type(module).forward

    @functools.wraps(kernel_forward)
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        return own_forward(self, *args, **kwargs)

    forward.__neuroncompat_simulated__ = True  # type: ignore[attr-defined]
    module.forward = MethodType(forward, module)
    kernel = kernel_forward.__qualname__.rpartition(".forward")[0] or kernel_forward.__qualname__
    found = KernelReplacement(layer_name, type(module).__qualname__, kernel, _kernel_origin(kernel_forward))
    key = (found.layer, found.module, found.kernel, found.repo)
    with _lock:
        first = key not in _replacements
        _replacements[key] = _replacements.get(key, 0) + 1
        listeners = list(_listeners)
    if first:
        logger.info(
            "kernelize: %s (%s) -> %s from %s on the simulated neuron device; the layer's own forward runs "
            "(NKI kernels need a NeuronCore)",
            found.layer,
            found.module,
            found.kernel,
            found.repo,
        )
    for listener in listeners:
        listener(found)


def _replaced_by_kernel(module: Any) -> bool:
    forward = getattr(module, "forward", None)
    func = getattr(forward, "__func__", None)
    return (
        isinstance(forward, MethodType)
        and func is not getattr(type(module), "forward", None)
        and not getattr(func, "__neuroncompat_simulated__", False)
    )


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def kernelize_layer(module: Any, *, device_type: Any, **kwargs: Any) -> None:
        original(module, device_type=device_type, **kwargs)
        if getattr(device_type, "type", None) == "neuron" and _replaced_by_kernel(module):
            name = getattr(type(module), "kernel_layer_name", None) or type(module).__name__
            _simulate(module, str(name))

    return kernelize_layer


def _patch(kernelize_module: ModuleType) -> None:
    with _lock:
        if not _wanted.is_set() or _installed:
            return
        original = kernelize_module.kernelize_layer
        _installed.append((kernelize_module, original))
    kernelize_module.kernelize_layer = _wrap(original)  # type: ignore[attr-defined]


def install() -> None:
    """Simulate Neuron layer mappings from now on (at once if kernels is imported, else when it is)."""
    _wanted.set()
    hooks.when_imported(_TARGET, _patch)


def uninstall() -> None:
    _wanted.clear()
    with _lock:
        installed = list(_installed)
        _installed.clear()
    for module, original in installed:
        module.kernelize_layer = original  # type: ignore[attr-defined]
