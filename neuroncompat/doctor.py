"""``neuroncompat doctor``: what this machine has, what the shim does about it, the CUDA redirect's state and Hub kernels'."""

from __future__ import annotations

import importlib.metadata
import os

from neuroncompat import followed_release, kernels_status, shim
from neuroncompat.cuda import status as redirect_status

_LIBRARIES = ("torch", "torch-neuronx", "torch-xla", "transformers", "trl", "accelerate", "peft", "kernels", "libcst")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _import_patch_targets() -> None:
    """Import what the patches target, so each reports applied or stood-down, not waiting."""
    import importlib

    from neuroncompat.patches import PATCH_TYPES

    for cls in PATCH_TYPES:
        for name in cls.targets:
            try:
                importlib.import_module(name)
            except ImportError:
                pass


def report() -> list[str]:
    """The doctor's report as lines of text."""
    found = shim.detection()
    lines = [
        f"Neuron: {'yes' if found.kind in ('native', 'simulated') else 'no'} ({found.reason})",
        f"torch-neuronx kind: {found.kind}" + (f" {found.version}" if found.version else ""),
        f"follows: {followed_release.FOLLOWED}; patches checked against {', '.join(followed_release.CHECKED)}",
        f"NEURON_RT_VISIBLE_CORES: {os.environ.get('NEURON_RT_VISIBLE_CORES', '(unset: all cores)')}",
        f"NEURON_LOGICAL_NC_CONFIG: {os.environ.get('NEURON_LOGICAL_NC_CONFIG', '(unset: LNC=2)')}",
    ]
    note = followed_release.installed_note(found.version if found.kind == "native" else None)
    if note:
        lines.append(f"NOTE: {note}")
    if found.kind in ("native", "simulated"):
        import torch

        lines.append(f"visible NeuronCores: {torch.neuron.device_count()}")  # type: ignore[attr-defined]
        if found.kind == "simulated":
            lines.append(f"simulator baseline: {followed_release.SIMULATOR_BASELINE}")
        _import_patch_targets()
    lines.extend(redirect_status.lines(found.kind in ("native", "simulated")))
    lines.extend(kernels_status.lines(found.kind in ("native", "simulated")))
    lines.append("libraries:")
    lines.extend(f"  {dist:<14} {_version(dist)}" for dist in _LIBRARIES)
    lines.append("patches (NEURONCOMPAT_DISABLE=id,... turns one off):")
    lines.extend(followed_release.patch_line(*status) for status in shim.status().values())
    return lines
