"""Post-import hooks: run a callback right after a module finishes importing.

The shim must not import torch or transformers itself (``import neuroncompat`` stays cheap and
order-independent), yet it must patch them. A callback registered for a module runs at once if
the module is already imported, otherwise right after its first import completes, through a
finder placed at the front of ``sys.meta_path``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

Callback = Callable[[ModuleType], None]

_callbacks: dict[str, list[Callback]] = {}
_kept: set[int] = set()  # ids of callbacks that cancel_all() leaves in place (the simulator's, not the shim's)
_resolving: set[str] = set()
_lock = threading.RLock()


class _PostImportFinder:
    """Finds watched modules with the other finders, then wraps their ``exec_module``.

    A meta path finder only needs ``find_spec``; it does not subclass ``importlib.abc.MetaPathFinder``
    because importing ``importlib.abc`` pulls in ``importlib.resources``, ``pathlib`` and
    ``tempfile`` (tens of milliseconds in every script that imports neuroncompat)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _callbacks or fullname in _resolving:
            return None
        _resolving.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            _resolving.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_fire(module: ModuleType) -> None:
            exec_module(module)
            _fire(fullname, module)

        spec.loader.exec_module = exec_then_fire  # type: ignore[method-assign]
        return spec


_finder = _PostImportFinder()


def _fire(name: str, module: ModuleType) -> None:
    with _lock:
        callbacks = _callbacks.pop(name, [])
    for callback in callbacks:
        _kept.discard(id(callback))
        callback(module)
    _uninstall_if_idle()


def _uninstall_if_idle() -> None:
    with _lock:
        if not _callbacks and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)


def when_imported(name: str, callback: Callback, *, keep: bool = False) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else right after it is.

    ``keep``: :func:`cancel_all` (``neuroncompat.revert()``) leaves it pending. The simulated device's own
    registrations use it: reverting the shim's patches must not take the ``neuron`` compile backend away.
    """
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__spec__", None) is not None and not _initializing(module):
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if keep:
            _kept.add(id(callback))
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def _initializing(module: ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def cancel_all() -> None:
    """Forget every pending callback but the kept ones (used by ``neuroncompat.revert``)."""
    with _lock:
        for name in list(_callbacks):
            _callbacks[name] = [callback for callback in _callbacks[name] if id(callback) in _kept]
            if not _callbacks[name]:
                del _callbacks[name]
    _uninstall_if_idle()
