"""The base of every runtime patch: an id, a reason, targets, and undo bookkeeping.

One patch fixes one gap. It names the modules it patches (``targets``); the shim calls
``patch_module`` for each right after it is imported (or at once if it already was), and the
patch answers whether the upstream gap still exists there (feature detection, never version
strings). Every change goes through :meth:`Patch.replace` or :meth:`Patch.set_env`, so
:meth:`Patch.revert` restores exactly what was there, and through :meth:`Patch.changed`, so
each distinct change is logged once on the ``neuroncompat`` logger.
"""

from __future__ import annotations

import itertools
import logging
import os
from types import ModuleType
from typing import Any, ClassVar

logger = logging.getLogger("neuroncompat")

_MISSING = object()
_sequence = itertools.count()


class Patch:
    """Subclasses set ``id``, ``reason`` and ``targets`` and implement ``patch_module``."""

    id: ClassVar[str]
    reason: ClassVar[str]
    targets: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        # (global order, owner, attribute, original): the order lets the shim undo wrappers that
        # several patches stacked on one attribute newest-first.
        self._undo: list[tuple[int, Any, str, Any]] = []
        self._env_undo: list[tuple[str, str | None]] = []
        self._logged: set[str] = set()
        self.state = "waiting"
        self.detail = ""

    # -- what subclasses implement --------------------------------------------------------
    def activate(self) -> None:
        """Environment-level work done as soon as the shim applies (before any import)."""

    def patch_module(self, name: str, module: ModuleType) -> bool:
        """Patch target ``name``; return False when upstream already fixed the gap there."""
        return True

    # -- helpers ------------------------------------------------------------------------------
    def replace(self, owner: Any, attr: str, value: Any) -> Any:
        """Set ``owner.attr = value``, remembering the original (from ``__dict__`` for classes)."""
        original = owner.__dict__.get(attr, _MISSING) if isinstance(owner, type) else getattr(owner, attr, _MISSING)
        self._undo.append((next(_sequence), owner, attr, original))
        setattr(owner, attr, value)
        return original

    def set_env(self, key: str, value: str) -> None:
        self._env_undo.append((key, os.environ.get(key)))
        os.environ[key] = value

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


def revert_all(patches: list["Patch"]) -> None:
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
        patch._revert_env()
