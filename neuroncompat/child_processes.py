"""Processes the script spawns get the shim too, as ``python -m neuroncompat`` promises.

``python -m neuroncompat train.py`` applies the shim (and ``NEURONCOMPAT_CUDA=redirect``,
``NEURONCOMPAT_SIMULATE``) without an edit to the script. A script that starts its workers with
``torch.multiprocessing.spawn`` (the pytorch/examples DDP tutorial's ``mp.spawn(main,
nprocs=torch.cuda.device_count())``) or any ``spawn``/``forkserver`` multiprocessing context
starts fresh interpreters that import the script as ``__mp_main__`` and never import
neuroncompat: under the redirect their ``torch.cuda.set_device(rank)`` then fails with
``module 'torch._C' has no attribute '_cuda_setDevice'``. (A script with ``import neuroncompat``
at the top needs nothing: the child imports it with the script.)

multiprocessing sends each child a dict of "preparation data" before the script is imported;
:func:`install` adds one entry, a reference to :func:`_imported_in_child`, whose unpickling in
the child imports this module, hence the ``neuroncompat`` package, which starts the shim from
the inherited environment. The child's ``prepare()`` ignores keys it does not know. Forked
children inherit the parent's memory and need nothing.
"""

from __future__ import annotations

import multiprocessing.spawn
from collections.abc import Callable
from typing import Any

_KEY = "neuroncompat_shim"


def _imported_in_child() -> None:
    """Never called: unpickling a reference to it in a spawned child imports neuroncompat."""


def _with_shim(original: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        data[_KEY] = _imported_in_child
        return data

    get_preparation_data.__wrapped__ = original  # type: ignore[attr-defined]
    return get_preparation_data


def install() -> None:
    """Make spawned and forkserver children of this process import neuroncompat (idempotent)."""
    current = multiprocessing.spawn.get_preparation_data
    if getattr(current, "__wrapped__", None) is None:
        # the stubs type the module attribute as the original def; the wrapper has its signature
        multiprocessing.spawn.get_preparation_data = _with_shim(current)  # type: ignore[assignment]
