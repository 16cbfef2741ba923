"""Turns the patches on and off: Neuron detection, the disable switches, status and revert.

``import neuroncompat`` calls :func:`apply` once. Off Neuron it does nothing but log one DEBUG
line. On Neuron (TorchNeuron installed, or the simulator on) each patch not disabled by
``NEURONCOMPAT_DISABLE`` or ``apply(skip=...)`` runs its environment step at once and patches
each target module when that module is imported.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from types import ModuleType

from neuroncompat import hooks
from neuroncompat.detect import Detection, clear_availability_caches, detect_torch_neuronx
from neuroncompat.patch import Patch, revert_all
from neuroncompat.patches import PATCH_TYPES

logger = logging.getLogger("neuroncompat")

_lock = threading.RLock()
_patches: dict[str, Patch] = {}
_detection: Detection | None = None
_active = False


@dataclass(frozen=True)
class PatchStatus:
    """One patch as ``neuroncompat.status()`` and ``neuroncompat doctor`` report it."""

    id: str
    state: str  # waiting | applied | stood-down | disabled | inactive | failed
    reason: str
    detail: str


def patch_ids() -> list[str]:
    return [cls.id for cls in PATCH_TYPES]


def _disabled_from_env() -> set[str]:
    raw = os.environ.get("NEURONCOMPAT_DISABLE", "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def _on_neuron(found: Detection) -> bool:
    if found.kind == "simulated":
        return True
    if found.kind == "native":
        return True
    return False


def _maybe_start_simulator() -> None:
    if os.environ.get("NEURONCOMPAT_SIMULATE", "").lower() in ("1", "true", "yes", "on"):
        from neuroncompat import simulator

        if not simulator.is_enabled():
            simulator.enable()
        from neuroncompat.simulate import record

        record.start_from_env()


def apply(skip: set[str] | list[str] | tuple[str, ...] = ()) -> dict[str, PatchStatus]:
    """Apply every patch that is not disabled; idempotent. Returns :func:`status`."""
    global _detection, _active
    with _lock:
        unknown = (set(skip) | _disabled_from_env()) - set(patch_ids()) - {"all"}
        if unknown:
            raise ValueError(f"unknown neuroncompat patch id(s) {sorted(unknown)}; known: {', '.join(patch_ids())}")
        if _active:
            return status()
        _maybe_start_simulator()
        _detection = detect_torch_neuronx()
        from_env = _disabled_from_env()
        disabled = set(skip) | from_env
        _patches.clear()
        for cls in PATCH_TYPES:
            _patches[cls.id] = cls()
        if not _on_neuron(_detection):
            for patch in _patches.values():
                patch.state = "inactive"
                patch.detail = "not on Neuron"
            logger.debug("neuroncompat: no Neuron device (%s); nothing patched", _detection.reason)
            _cuda_redirect_from_env(on_neuron=False)
            return status()
        _active = True
        if _detection.kind == "native":
            hooks.when_imported("torch", _register_native_backend)
        for patch in _patches.values():
            if "all" in disabled or patch.id in disabled:
                patch.state = "disabled"
                by_env = "all" in from_env or patch.id in from_env
                patch.detail = "disabled by NEURONCOMPAT_DISABLE" if by_env else "disabled by apply(skip=...)"
                continue
            _start(patch)
        _cuda_redirect_from_env(on_neuron=True)
        return status()


def _cuda_redirect_from_env(on_neuron: bool) -> None:
    """``NEURONCOMPAT_CUDA=redirect`` (docs/cuda_redirect.md); nothing is imported when it is unset."""
    if os.environ.get("NEURONCOMPAT_CUDA"):
        from neuroncompat import cuda

        cuda.start_from_env(on_neuron)


def _start(patch: Patch) -> None:
    try:
        patch.activate()
    except Exception as exc:  # a broken patch must never break the user's script
        _fail(patch, exc)
        return
    if not patch.targets:
        if patch.state == "waiting":
            patch.state = "applied"
        return
    for name in patch.targets:
        hooks.when_imported(name, lambda module, p=patch, n=name: _patch_target(p, n, module))


def _patch_target(patch: Patch, name: str, module: ModuleType) -> None:
    if patch.state in ("failed", "disabled", "inactive") or not _active:
        return
    try:
        still_needed = patch.patch_module(name, module)
    except Exception as exc:
        _fail(patch, exc)
        return
    if still_needed:
        patch.state = "applied"
    elif patch.state == "waiting":
        patch.state = "stood-down"
        patch.detail = f"upstream fixed the gap ({name})"


def _fail(patch: Patch, exc: BaseException) -> None:
    patch.revert()
    patch.state = "failed"
    patch.detail = f"{type(exc).__name__}: {exc}"
    logger.warning("[%s] could not be applied and was left off: %s", patch.id, patch.detail)


def _register_native_backend(torch: ModuleType) -> None:
    """Load torch-neuronx now and make libraries re-check Neuron availability."""
    try:
        import torch_neuronx  # noqa: F401
    except ImportError as exc:
        logger.warning("torch_neuronx is installed but failed to import: %s", exc)
        return
    clear_availability_caches()


def revert() -> None:
    """Undo every patch and forget pending hooks; ``apply()`` may be called again."""
    global _active
    with _lock:
        hooks.cancel_all()
        redirect = sys.modules.get("neuroncompat.cuda")
        if redirect is not None:
            redirect.undo()
        revert_all(list(_patches.values()))
        _patches.clear()
        _active = False


def status() -> dict[str, PatchStatus]:
    """Each patch's state: waiting (target not imported yet), applied, stood-down, disabled, inactive, failed."""
    with _lock:
        return {
            pid: PatchStatus(pid, p.state, type(p).reason, p.detail) for pid, p in _patches.items()
        }


def detection() -> Detection:
    return _detection if _detection is not None else detect_torch_neuronx()


def is_active() -> bool:
    return _active
