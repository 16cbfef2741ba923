"""The base of every runtime patch: an id, a reason, targets, and undo bookkeeping.

One patch fixes one gap. It names the modules it patches (``targets``); the shim calls
``patch_module`` for each right after it is imported (or at once if it already was), and the
patch answers whether the upstream gap still exists there (feature detection, never version
strings). Every change goes through :meth:`Patch.replace` or :meth:`Patch.set_env` (or, for a
hook handle or an ``atexit`` function, registers its undo with :meth:`Patch.undo_with`), so
:meth:`Patch.revert` restores exactly what was there, and through :meth:`Patch.changed`, so
each distinct change is logged once on the ``neuroncompat`` logger.

Failing fast is part of the contract. A patch that finds a setting which cannot work on Neuron
and must not be silently changed (an unaligned ``NEURON_RT_VISIBLE_CORES``) calls
:meth:`Patch.fail`, which raises :class:`PatchError`: the shim lets it through, so the script
stops with the patch's message (at ``import neuroncompat`` it exits with status 1 and only that
message). Any *other* exception a patch raises is a bug in the patch: the shim contains it, undoes
that patch, and logs a warning naming the patch and how to turn it off, so one broken patch never
breaks a run.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, NoReturn

logger = logging.getLogger("neuroncompat")

_MISSING = object()
_sequence = itertools.count()


class PatchError(Exception):
    """Raised on purpose by a patch (through :meth:`Patch.fail`) to stop the script.

    The only exception the shim does not contain: it means "this run cannot work, and here is
    why", not "this patch is broken". ``patch_id`` names the patch; the message names the setting,
    the cause and the fix.
    """

    def __init__(self, patch_id: str, message: str) -> None:
        super().__init__(f"neuroncompat [{patch_id}]: {message}")
        self.patch_id = patch_id


class Patch:
    """Subclasses set ``id``, ``reason`` and ``targets`` and implement ``patch_module``.

    The contract every patch keeps (CONTRIBUTING.md has the checklist):

    * its module docstring says Gap (with the upstream ``file:line`` from docs/gaps.md), Fix and
      Example;
    * ``patch_module`` checks that the upstream gap still exists (feature detection, never a
      version string) and returns False where it does not: the shim reports it ``stood-down``;
    * every change goes through :meth:`replace`/:meth:`set_env`/:meth:`undo_with` (undoable) and is logged once
      with :meth:`changed` or :meth:`warn`; an explicit user value is kept, or changed loudly;
    * it can be turned off by ``id`` (``NEURONCOMPAT_DISABLE``, ``apply(skip=...)``);
    * to stop a run that cannot work it calls :meth:`fail`; any other exception it raises is
      treated as its own bug and contained by the shim.
    """

    id: ClassVar[str]
    reason: ClassVar[str]
    targets: ClassVar[tuple[str, ...]] = ()
    # What :meth:`fail` raises: :class:`PatchError` or a subclass a caller may want to catch by name.
    error: ClassVar[type[PatchError]] = PatchError
    # True for a patch whose ``activate`` only checks the environment for a setting the device runtime would
    # refuse: under ``NEURONCOMPAT_SIMULATE`` the shim runs it before the simulated device starts, as on a trn2
    # ``import neuroncompat`` runs it before ``import torch`` starts the runtime.
    before_device: ClassVar[bool] = False

    def __init__(self) -> None:
        # (global order, owner, attribute, original): the order lets the shim undo wrappers that
        # several patches stacked on one attribute newest-first.
        self._undo: list[tuple[int, Any, str, Any]] = []
        self._env_undo: list[tuple[str, str | None]] = []
        self._undo_calls: list[Callable[[], None]] = []
        self._logged: set[str] = set()
        self.state = "waiting"
        self.detail = ""
        # Set by :meth:`stand_down`: the gap is fixed upstream, so no later target is patched either.
        self.stood_down = False

    # -- what subclasses implement --------------------------------------------------------
    def activate(self) -> None:
        """Environment-level work done as soon as the shim applies (before any import)."""

    def patch_module(self, name: str, module: ModuleType) -> bool:
        """Patch target ``name``; return False when upstream already fixed the gap there."""
        return True

    # -- helpers ------------------------------------------------------------------------------
    def replace(self, owner: Any, attr: str, value: Any, own: bool = False) -> Any:
        """Set ``owner.attr = value``, remembering the original (from ``__dict__`` for classes, and for
        any owner with ``own=True``: an instance attribute shadowing a method is deleted on revert)."""
        if own or isinstance(owner, type):
            original = owner.__dict__.get(attr, _MISSING)
        else:
            original = getattr(owner, attr, _MISSING)
        self._undo.append((next(_sequence), owner, attr, original))
        setattr(owner, attr, value)
        return original

    def set_env(self, key: str, value: str) -> None:
        self._env_undo.append((key, os.environ.get(key)))
        os.environ[key] = value

    def undo_with(self, undo: Callable[[], None]) -> None:
        """Have :meth:`revert` call ``undo``: for a change that is no attribute or variable (a hook
        handle to remove, an ``atexit`` function to unregister)."""
        self._undo_calls.append(undo)

    def changed(self, message: str, *args: Any) -> None:
        """Log one INFO line per distinct change."""
        text = message % args if args else message
        if text not in self._logged:
            self._logged.add(text)
            logger.info("[%s] %s", self.id, text)

    def warn(self, message: str, *args: Any) -> None:
        """Log one WARNING per distinct problem (an explicit user value that cannot work)."""
        text = message % args if args else message
        if text not in self._logged:
            self._logged.add(text)
            logger.warning("[%s] %s", self.id, text)

    def fail(self, message: str) -> NoReturn:
        """Stop the script: raise :class:`PatchError` (the subclass in ``error``) with ``message``.

        For a user setting that cannot work and must not be rewritten behind the user's back. Use it
        from ``activate`` or ``patch_module``; never for a patch's own bugs (let those raise, the
        shim contains them).
        """
        raise self.error(self.id, message)

    def stand_down(self, detail: str) -> None:
        """Upstream fixed the gap, seen only at a later target: undo every change already made.

        ``patch_module`` returning False stands down one target; a patch whose gap can only be
        checked once a later module is imported (``compile`` needs Dynamo loaded to ask inductor
        about Neuron) calls this, and the shim skips its remaining targets.
        """
        self.revert()
        self.stood_down = True
        self.state = "stood-down"
        self.detail = f"upstream fixed the gap ({detail})"

    def revert(self) -> None:
        revert_all([self])

    def _revert_env(self) -> None:
        for key, previous in reversed(self._env_undo):
            if previous is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = previous
        self._undo.clear()
        self._env_undo.clear()
        self._logged.clear()


def revert_all(patches: list[Patch]) -> None:
    """Undo the patches' attribute changes newest-first across all of them, then their env."""
    entries = sorted((e for p in patches for e in p._undo), key=lambda e: e[0], reverse=True)
    for _, owner, attr, original in entries:
        if original is _MISSING:
            try:
                delattr(owner, attr)
            except AttributeError:
                pass
        else:
            setattr(owner, attr, original)
    for patch in reversed(patches):
        while patch._undo_calls:
            patch._undo_calls.pop()()
    for patch in reversed(patches):
        patch._revert_env()
