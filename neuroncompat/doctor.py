"""``neuroncompat doctor``: a block to paste into a bug report, and what the shim does on this machine.

The first lines say what the machine is (``neuroncompat.host``: Python, OS, C++ compiler, cache
directory, torch build); then Neuron detection, the release the patches follow, the CUDA redirect's
state and Hub kernels', the library versions, and the patches. Off Neuron every patch is inactive, so
the list is one line (``verbose`` lists them) and the report fits on one screen, ending with how to try
the simulated device. ``data()`` is the same report for tools (``--json``, ``docs/doctor.schema.json``).
"""

from __future__ import annotations

import os
from typing import Any

import neuroncompat
from neuroncompat import followed_release, host, kernels_status, shim
from neuroncompat.cuda import status as redirect_status

SCHEMA = "neuroncompat.doctor/1"  # fields are only added within a schema version
TRY_SIMULATOR = (
    "try the simulated device (a CPU-backed neuron device): NEURONCOMPAT_SIMULATE=1 neuroncompat doctor; "
    "dry-run a script on it: neuroncompat simulate -- python train.py"
)
# A problem first: the order the patch list is grouped in.
_STATE_ORDER = ("failed", "disabled", "stood-down", "waiting", "applied", "inactive")
_ENVIRONMENT = (
    ("NEURON_RT_VISIBLE_CORES", "(unset: all cores)"),
    ("NEURON_LOGICAL_NC_CONFIG", "(unset: LNC=2)"),
)


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


def _on_neuron() -> bool:
    return shim.detection().kind in ("native", "simulated")


def _host_lines() -> list[str]:
    compiler = host.compiler_version()
    torch = host.version("torch")
    return [
        f"neuroncompat {neuroncompat.__version__} (paste this whole block into a bug report; --json for tools)",
        f"Python: {host.python()}",
        f"OS: {host.operating_system()}",
        f"C++ compiler: {compiler or f'none ({host.compiler()!r} not found; the simulated device needs one)'}",
        f"cache directory: {host.cache_dir()}",
        f"torch build: {f'{torch} ({host.torch_build()})' if torch else 'torch not installed'}",
    ]


def _patch_lines(statuses: list[shim.PatchStatus], verbose: bool) -> list[str]:
    """One line where no patch can apply (off Neuron), else every patch, problems first."""
    if not verbose and statuses and all(status.state == "inactive" for status in statuses):
        return [f"{len(statuses)} patches, none applies: not on Neuron (neuroncompat doctor --verbose lists them)"]
    counts = {state: sum(status.state == state for status in statuses) for state in _STATE_ORDER}
    summary = ", ".join(f"{count} {state}" for state, count in counts.items() if count)
    ordered = sorted(statuses, key=lambda status: _STATE_ORDER.index(status.state))
    return [
        f"patches (NEURONCOMPAT_DISABLE=id,... turns one off): {summary}",
        *(followed_release.patch_line(*status) for status in ordered),
    ]


def report(verbose: bool = False) -> list[str]:
    """The doctor's report as lines of text."""
    found = shim.detection()
    on_neuron = _on_neuron()
    lines = _host_lines()
    lines += [
        f"Neuron: {'yes' if on_neuron else 'no'} ({found.reason})",
        f"torch-neuronx kind: {found.kind}" + (f" {found.version}" if found.version else ""),
        f"follows: {followed_release.FOLLOWED}; patches checked against {', '.join(followed_release.CHECKED)}",
        *(f"{name}: {os.environ.get(name, unset)}" for name, unset in _ENVIRONMENT),
    ]
    note = followed_release.installed_note(found.version if found.kind == "native" else None)
    if note:
        lines.append(f"NOTE: {note}")
    if on_neuron:
        import torch

        lines.append(f"visible NeuronCores: {torch.neuron.device_count()}")  # type: ignore[attr-defined]
        if found.kind == "simulated":
            lines.append(f"simulator baseline: {followed_release.SIMULATOR_BASELINE}")
        _import_patch_targets()
    lines.extend(redirect_status.lines(on_neuron))
    lines.extend(kernels_status.lines(on_neuron))
    lines.append("libraries:")
    lines.extend(f"  {dist:<14} {host.version(dist) or 'not installed'}" for dist in host.LIBRARIES)
    lines.extend(_patch_lines(list(shim.status().values()), verbose))
    if found.kind != "native":
        lines.append(TRY_SIMULATOR if found.kind != "simulated" else "simulated device: on (NEURONCOMPAT_SIMULATE=1)")
    return lines


def data() -> dict[str, Any]:
    """The report for tools: ``neuroncompat doctor --json``, valid against ``docs/doctor.schema.json``."""
    found = shim.detection()
    on_neuron = _on_neuron()
    cores = None
    if on_neuron:
        import torch

        cores = torch.neuron.device_count()  # type: ignore[attr-defined]
        _import_patch_targets()
    compiler = host.compiler_version()
    return {
        "schema": SCHEMA,
        "neuroncompat": neuroncompat.__version__,
        "python": host.python(),
        "os": host.operating_system(),
        "cxx": {"command": host.compiler(), "version": compiler},
        "cache_directory": str(host.cache_dir()),
        "torch_build": host.torch_build(),
        "libraries": {dist: host.version(dist) for dist in host.LIBRARIES},
        "neuron": {
            "detected": on_neuron,
            "kind": found.kind,
            "version": found.version,
            "reason": found.reason,
            "visible_cores": cores,
            "follows": followed_release.FOLLOWED,
            "note": followed_release.installed_note(found.version if found.kind == "native" else None),
        },
        "environment": {name: os.environ.get(name) for name, _ in _ENVIRONMENT},
        "cuda_redirect": redirect_status.lines(on_neuron),
        "hub_kernels": kernels_status.lines(on_neuron),
        "patches": [
            {"id": status.id, "state": status.state, "reason": status.reason, "detail": status.detail}
            for status in shim.status().values()
        ],
    }
