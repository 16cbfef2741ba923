"""The op observer: the simulated device tells one watcher (``neuroncompat simulate``) what it saw.

The C++ backend checks, per op overload and once, whether the op is watched; an op nobody watches
costs nothing more. A watched op calls the observer before it runs, on the caller's Python stack
(so the watcher can find the user's line); while an observer is installed, every op that leaves a
complex or float64 tensor on the device calls it too. Events are bit flags:

- :data:`WATCHED`: a watched op ran; :data:`MASK`: it indexed with a boolean/uint8 mask
  (``x[mask]``, ``x[mask] = v``);
- :data:`COMPLEX` / :data:`FLOAT64`: it made a complex / float64 tensor on the device.

Ops with kernels of their own in the backend (allocation, copies, views) are not watched; they
report complex and float64 tensors they create (``torch.zeros(..., dtype=torch.float64,
device="neuron")``, ``x.to("neuron")``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Protocol

from neuroncompat.simulator import state

WATCHED = 1
MASK = 2
COMPLEX = 4
FLOAT64 = 8

_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int)


class OpObserver(Protocol):
    """What :func:`set_op_observer` takes."""

    def watched_ops(self) -> Iterable[str]:
        """Op names to watch, ``aten::nonzero`` (every overload) or ``aten::index.Tensor``."""
        ...

    def saw(self, name: str, events: int) -> None: ...


_installed: list[object] = []  # the ctypes callback must outlive its registration


def set_op_observer(observer: OpObserver | None) -> None:
    """Install (or with None remove) the one observer."""
    library = state._lib()
    _installed.clear()
    if observer is None:
        library.neuroncompat_set_observer(None, None)
        return

    def call(name: bytes, events: int) -> None:
        observer.saw(name.decode(), events)

    callback = _CALLBACK(call)
    _installed.append(callback)
    library.neuroncompat_set_observer(ctypes.cast(callback, ctypes.c_void_p), ",".join(observer.watched_ops()).encode())
