"""Opt-in run-time CUDA redirect: unmodified CUDA scripts run on the NeuronCore.

Turn it on with ``NEURONCOMPAT_CUDA=redirect`` (read by ``import neuroncompat``, so also by
``python -m neuroncompat``, ``torchrun ... -m neuroncompat``, ``accelerate launch ... -m
neuroncompat`` and ``neuroncompat simulate --cuda-redirect``), or call :func:`redirect`. Off
by default: nothing here runs unless asked. Full description: docs/cuda_redirect.md.

What changes, for **user code** only (:mod:`neuroncompat.cuda.callers` decides by the calling
file): ``torch.cuda.*`` answers for the NeuronCore (:mod:`.api`), CUDA autocast and GradScaler
become bf16 autocast and a pass-through scaler (:mod:`.amp`), NCCL and DDP ``device_ids``
follow (:mod:`.distributed`); ``tensor.is_cuda`` (:mod:`.is_cuda`), legacy
``torch.cuda.FloatTensor``-style types (:mod:`.legacy_types`) and ``torch.backends`` flags (logged,
:mod:`.backends`). CUDA device arguments (``.to("cuda")``, ``.cuda()``,
``device="cuda"``, ``map_location``, ``device_map``) go to the NeuronCore wherever they arrive
(:mod:`.placement`); ``torch.Generator(device="cuda")`` is a CPU generator (:mod:`.generator`). torch, transformers, accelerate, TRL and PEFT keep seeing the truth (no
CUDA), so they take their Neuron paths. Each redirected call site is logged once, with the
``neuron-migrate`` rule that makes the change permanent (:mod:`.sites`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import ModuleType

from neuroncompat import environment, hooks
from neuroncompat.cuda import sites
from neuroncompat.patch import Patch

ENV = "NEURONCOMPAT_CUDA"
MODE = "redirect"

logger = logging.getLogger("neuroncompat")

_lock = threading.Lock()
_patch: Patch | None = None
_standing_down = False
_held: list[Callable[[], None]] | None = None


class RedirectUnavailable(RuntimeError):
    """``redirect`` was asked for where there is no Neuron device to redirect to."""


class _Redirect(Patch):
    id = "cuda_redirect"
    reason = "NEURONCOMPAT_CUDA=redirect: user code's CUDA calls run on the NeuronCore"


def requested() -> bool:
    """Whether the environment asks for the redirect (``NEURONCOMPAT_CUDA=redirect``)."""
    return environment.choice(ENV) == MODE


def is_redirected() -> bool:
    return _patch is not None


def _unavailable_message() -> str:
    return (
        f"{ENV}=redirect needs a Neuron device to redirect CUDA calls to, and this machine has none: "
        "no TorchNeuron (torch-neuronx) is loaded and the neuroncompat simulator is off. On a Trainium "
        "host install torch-neuronx from the AWS Neuron repository; elsewhere dry-run the script on the "
        "simulator with `neuroncompat simulate --cuda-redirect -- python train.py` (or NEURONCOMPAT_SIMULATE=1). "
        f"To run the script on CUDA or CPU as written, unset {ENV}."
    )


def redirect() -> None:
    """Turn the redirect on in this process (idempotent); :class:`RedirectUnavailable` without Neuron."""
    global _patch
    with _lock:
        if _patch is not None:
            return
        import torch

        from neuroncompat.device import neuron_available

        if torch.cuda.is_available():
            raise RedirectUnavailable(
                f"{ENV}=redirect is for Neuron hosts, and this machine has CUDA GPUs: the script's CUDA calls already "
                f"run there. Unset {ENV} (dry-run for Neuron on a machine without CUDA, or on a Trainium host)."
            )
        if not neuron_available():
            raise RedirectUnavailable(_unavailable_message())
        from neuroncompat.cuda import amp, api, backends, distributed, generator, is_cuda, legacy_types, placement

        patch = _Redirect()
        placement.install(patch)
        api.install(patch)
        amp.install(patch)
        distributed.install(patch)
        is_cuda.install(patch)
        generator.install(patch)
        legacy_types.install(patch)
        backends.install(patch)
        hooks.when_imported("transformers.modeling_utils", lambda module: _patch_transformers(patch, module))
        sites.write_at_exit()
        _patch = patch
    logger.warning(
        "[cuda_redirect] CUDA calls from user code run on the NeuronCore (torch.cuda.*, 'cuda' devices, .cuda(), "
        "CUDA autocast/GradScaler, nccl); libraries see the real device. "
        "Redirected call sites are logged to %s at exit.",
        sites.log_directory(),
    )


def _patch_transformers(patch: Patch, module: ModuleType) -> None:
    from neuroncompat.cuda.placement import wrap_from_pretrained

    if _patch is not patch and _patch is not None:
        return
    cls = module.PreTrainedModel
    patch.replace(cls, "from_pretrained", wrap_from_pretrained(cls.__dict__["from_pretrained"]))


def undo() -> None:
    """Turn the redirect off again (tests; the log collected so far is kept)."""
    global _patch
    with _lock:
        if _patch is not None:
            _patch.revert()
            _patch = None


def start_from_env(on_neuron: bool) -> None:
    """Called by ``import neuroncompat``: honour ``NEURONCOMPAT_CUDA=redirect``.

    With Neuron present the redirect starts when torch is imported (at once if it already is).
    Without it, importing torch raises :class:`RedirectUnavailable`: running a CUDA script on
    the CPU when the user asked for Neuron would be a silent wrong answer.
    """
    if not requested():
        return
    hooks.when_imported("torch", _start if on_neuron else _refuse)


def _start(torch: ModuleType) -> None:
    _act(redirect)


def _refuse(torch: ModuleType) -> None:
    _act(_raise_unavailable)


def _raise_unavailable() -> None:
    raise RedirectUnavailable(_unavailable_message())


def _act(action: Callable[[], None]) -> None:
    if _standing_down:
        return
    if _held is not None:
        _held.append(action)
        return
    action()


def hold_in_launcher() -> None:
    """The ``neuroncompat`` CLI imports torch before it knows its subcommand: keep a pending redirect
    (or refusal) until the subcommand stands it down (:func:`stand_down_in_launcher`) or runs a
    script in this process (:func:`resume_in_launcher`)."""
    global _held
    if _held is None:
        _held = []


def resume_in_launcher() -> None:
    """``neuroncompat run``: the script runs in this process, so a held redirect starts now."""
    global _held
    pending, _held = _held or [], None
    for action in pending:
        action()


def stand_down_in_launcher() -> None:
    """The ``neuroncompat`` CLI's own process runs no user code (``simulate``, ``doctor``):
    a pending redirect neither refuses nor patches it; the scripts it starts still redirect."""
    global _standing_down, _held
    _standing_down = True
    _held = None
