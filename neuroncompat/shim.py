"""Turns the patches on and off: Neuron detection, the disable switches, status and revert.

``import neuroncompat`` calls :func:`start` once (:func:`apply` without building the status).
Off Neuron it does nothing but log one DEBUG line and wrap ``sys.excepthook`` so that a migrated
script dying of the missing ``torch.neuron`` (or ``neuron`` device) ends with a hint about the
simulator (:mod:`neuroncompat.error_hints`). On Neuron
(TorchNeuron installed, or the simulator on) each patch not disabled by ``NEURONCOMPAT_DISABLE``
or ``apply(skip=...)`` runs its environment step at once and patches each target module when
that module is imported; the exception hook there points a CUDA script's ``Torch not compiled
with CUDA enabled`` at the CUDA redirect and ``neuron-migrate``.

Failures: a :class:`~neuroncompat.patch.PatchError` (raised on purpose through ``Patch.fail``)
passes through, so the script stops with the patch's message; the patch is undone first. Any other
exception from a patch is a bug in that patch: it is contained (the patch is undone and reported
``failed``) and logged once as a WARNING naming the patch and the switch that turns it off, so one
broken patch never breaks a user's run.

``import neuroncompat`` goes first in every migrated script, so off Neuron this module imports
only what detection needs: the patches, the post-import hooks, ``logging`` and ``dataclasses``
(which pulls in ``inspect``, ``ast`` and ``dis``) are imported when they are used: on Neuron,
by :func:`status`, or when patch ids are given to check. The DEBUG line is logged only where
``logging`` is already imported: before that no handler can exist that would show it.
"""

from __future__ import annotations

import functools
import sys
from _thread import RLock
from collections import namedtuple
from collections.abc import Sequence
from types import ModuleType

from neuroncompat import environment, error_hints
from neuroncompat.detect import Detection, clear_availability_caches, detect_torch_neuronx

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import logging

    from neuroncompat.patch import Patch, PatchError

_lock = RLock()
_patches: dict[str, Patch] = {}
_detection: Detection | None = None
_active = False
_inactive = False  # apply() ran off Neuron: every patch reports "inactive"
_skip: tuple[str, ...] = ()  # what the last start() was asked to skip, for device_appeared()


def _logger() -> logging.Logger:
    import logging

    return logging.getLogger("neuroncompat")


def _patch_types() -> Sequence[type[Patch]]:
    from neuroncompat.patches import PATCH_TYPES

    return PATCH_TYPES


class PatchStatus(namedtuple("PatchStatus", ["id", "state", "reason", "detail"])):
    """One patch as ``neuroncompat.status()`` and ``neuroncompat doctor`` report it: ``id``,
    ``state`` (waiting | applied | stood-down | disabled | inactive | failed), ``reason`` (the gap)
    and ``detail``. Immutable."""

    __slots__ = ()


def patch_ids() -> list[str]:
    return [cls.id for cls in _patch_types()]


def _disabled_from_env() -> set[str]:
    return set(environment.names("NEURONCOMPAT_DISABLE"))


def _on_neuron(found: Detection) -> bool:
    if found.kind == "simulated":
        return True
    if found.kind == "native":
        return True
    return False


def _simulating() -> bool:
    return environment.flag("NEURONCOMPAT_SIMULATE")


def _maybe_start_simulator() -> None:
    if _simulating():
        from neuroncompat import simulator

        if not simulator.is_enabled():
            simulator.enable()
        # The recorder imports Dynamo (about 1.5 s of CPU); only a run under `neuroncompat simulate` records.
        from neuroncompat.simulate import RECORD_ENV

        if environment.path(RECORD_ENV):
            from neuroncompat.simulate import record

            record.start_from_env()


def _check_before_device(disabled: set[str]) -> None:
    """Under the simulator, the patches that check the environment for what the runtime refuses run before the
    simulated device starts (which refuses it too, with a traceback), as on hardware they run before ``import
    torch``: a bad ``NEURON_RT_VISIBLE_CORES`` stops the script with the patch's message alone."""
    if not _simulating() or "all" in disabled:
        return
    for cls in _patch_types():
        if cls.before_device and cls.id not in disabled:
            patch = _patches[cls.id] = cls()
            _start(patch)


def _check_patch_ids(skip: set[str], from_env: set[str]) -> None:
    """Ids in ``apply(skip=...)`` (ValueError) and ``NEURONCOMPAT_DISABLE`` (SettingError) must name patches."""
    for given, error in ((skip, ValueError), (from_env, environment.SettingError)):
        unknown = given - {"all"} - set(patch_ids()) if given - {"all"} else set()
        if unknown:
            where = "NEURONCOMPAT_DISABLE" if error is environment.SettingError else "apply(skip=...)"
            raise error(
                f"{where}: unknown neuroncompat patch id(s) {sorted(unknown)}; accepted: all, {', '.join(patch_ids())}"
            )


def apply(skip: set[str] | list[str] | tuple[str, ...] = ()) -> dict[str, PatchStatus]:
    """Apply every patch that is not disabled; idempotent. Returns :func:`status`."""
    start(skip)
    return status()


def start(skip: set[str] | list[str] | tuple[str, ...] = ()) -> None:
    """:func:`apply` without building the status (what ``import neuroncompat`` calls: off Neuron
    the status would import every patch module for nothing)."""
    global _detection, _active, _inactive, _skip
    with _lock:
        environment.check()  # a mistyped NEURONCOMPAT_* value stops here, before anything acts on it
        _check_patch_ids(set(skip), _disabled_from_env())
        if _active:
            return
        from_env = _disabled_from_env()
        disabled = set(skip) | from_env
        _skip = tuple(skip)
        _patches.clear()
        _check_before_device(disabled)
        _maybe_start_simulator()
        _detection = detect_torch_neuronx()
        if not _on_neuron(_detection):
            _patches.clear()
            _inactive = True
            if "logging" in sys.modules:
                _logger().debug("neuroncompat: no Neuron device (%s); nothing patched", _detection.reason)
            error_hints.install(on_neuron=False)
            _cuda_redirect_from_env(on_neuron=False)
            return
        from neuroncompat import hooks

        _inactive = False
        started = dict(_patches)  # by _check_before_device
        for cls in _patch_types():
            _patches[cls.id] = started.get(cls.id) or cls()
        _active = True
        if _detection.kind == "native":
            hooks.when_imported("torch", _register_native_backend)
        for patch in _patches.values():
            if "all" in disabled or patch.id in disabled:
                patch.state = "disabled"
                by_env = "all" in from_env or patch.id in from_env
                patch.detail = "disabled by NEURONCOMPAT_DISABLE" if by_env else "disabled by apply(skip=...)"
                continue
            if patch.id not in started:
                _start(patch)
        error_hints.install(on_neuron=True)
        _cuda_redirect_from_env(on_neuron=True)


def device_appeared() -> None:
    """Start again if :func:`start` ran before there was a Neuron device, now that there is one.

    ``import neuroncompat`` and then ``simulator.enable()`` (the order a notebook, a test or the README's
    snippet writes) found no device at import, and every patch stayed inactive until the user called
    ``apply()`` again, which nothing told them to do. The simulator calls this once its device is
    registered; the patches start with what the first start was asked to skip. A shim that never started,
    or is already active, is left as it is.
    """
    global _inactive
    with _lock:
        if not _inactive:
            return
        _inactive = False
        skip = _skip
    start(skip)


def _cuda_redirect_from_env(on_neuron: bool) -> None:
    """``NEURONCOMPAT_CUDA=redirect`` (docs/cuda_redirect.md); nothing is imported when it is unset."""
    if environment.choice("NEURONCOMPAT_CUDA"):
        from neuroncompat import cuda

        cuda.start_from_env(on_neuron)


def _start(patch: Patch) -> None:
    from neuroncompat.patch import PatchError

    try:
        patch.activate()
    except PatchError as exc:
        _stop(patch, exc)
        raise
    except Exception as exc:  # a broken patch must never break the user's script
        _fail(patch, exc)
        return
    if not patch.targets:
        if patch.state == "waiting":
            patch.state = "applied"
        return
    for name in patch.targets:
        from neuroncompat import hooks

        hooks.when_imported(name, functools.partial(_patch_target, patch, name))


def _patch_target(patch: Patch, name: str, module: ModuleType) -> None:
    from neuroncompat.patch import PatchError

    if patch.state in ("failed", "disabled", "inactive") or patch.stood_down or not _active:
        return
    try:
        still_needed = patch.patch_module(name, module)
    except PatchError as exc:
        _stop(patch, exc)
        raise
    except Exception as exc:
        _fail(patch, exc)
        return
    if patch.stood_down:  # Patch.stand_down: the whole patch was undone
        return
    if still_needed:
        patch.state = "applied"
    elif patch.state == "waiting":
        patch.state = "stood-down"
        patch.detail = f"upstream fixed the gap ({name})"


def _stop(patch: Patch, exc: PatchError) -> None:
    """A deliberate fail-fast: undo the patch and record why; the caller re-raises."""
    patch.revert()
    patch.state = "failed"
    patch.detail = str(exc)


def _fail(patch: Patch, exc: Exception) -> None:
    """An unexpected exception is the patch's bug: undo it, report it, and let the script go on."""
    patch.revert()
    patch.state = "failed"
    patch.detail = f"{type(exc).__name__}: {exc}"
    logger = _logger()
    logger.warning(
        "[%s] could not be applied and was left off (a bug in this patch; please report it): %s. "
        "NEURONCOMPAT_DISABLE=%s turns it off and silences this warning.",
        patch.id,
        patch.detail,
        patch.id,
    )
    logger.debug("[%s] traceback", patch.id, exc_info=exc)


def _register_native_backend(torch: ModuleType) -> None:
    """Load torch-neuronx now and make libraries re-check Neuron availability."""
    try:
        import torch_neuronx  # noqa: F401
    except ImportError as exc:
        _logger().warning("torch_neuronx is installed but failed to import: %s", exc)
        return
    clear_availability_caches()


def revert() -> None:
    """Undo every patch and forget pending hooks; ``apply()`` may be called again."""
    global _active, _inactive
    with _lock:
        if "neuroncompat.hooks" in sys.modules:  # imported by the first patch that waited for a module
            sys.modules["neuroncompat.hooks"].cancel_all()
        redirect = sys.modules.get("neuroncompat.cuda")
        if redirect is not None:
            redirect.undo()
        if _patches:
            from neuroncompat.patch import revert_all

            revert_all(list(_patches.values()))
        _patches.clear()
        _active = _inactive = False


def log_changes_again() -> None:
    """Have every patch log its changes again, as in a fresh process.

    Each patch logs a distinct change once per process; ``neuroncompat check`` reports the patches that logged
    during each stage, so a process that checks several models in turn calls this between them (each model's
    report then names the patches that acted for it, as a process of its own would).
    """
    with _lock:
        for patch in _patches.values():
            patch._logged.clear()


def status() -> dict[str, PatchStatus]:
    """Each patch's state: waiting (target not imported yet), applied, stood-down, disabled, inactive, failed."""
    with _lock:
        if not _active:  # off Neuron, or not started: each patch is listed still (doctor reports every one)
            detail = "not on Neuron" if _inactive else "the shim is not started (apply() has not run, or revert() ran)"
            return {cls.id: PatchStatus(cls.id, "inactive", cls.reason, detail) for cls in _patch_types()}
        return {pid: PatchStatus(pid, p.state, type(p).reason, p.detail) for pid, p in _patches.items()}


def detection() -> Detection:
    return _detection if _detection is not None else detect_torch_neuronx()


def is_active() -> bool:
    return _active
