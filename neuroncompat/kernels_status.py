"""Hub kernels' state in words, for ``neuroncompat doctor`` (docs/gaps.md#kernels).

What a user asking "why are my kernels (not) used on Neuron" needs: the installed kernels and
whether transformers accepts it (outside its range ``use_kernels=True`` fails after loading, unless
the ``kernels`` patch drops it), the Neuron layer mappings in effect (transformers' default mapping
and what is registered with kernels in this process), and whether legacy ``torch-universal`` builds
are refused. The mappings are read where Neuron is present (the doctor has then imported the
patches' targets); elsewhere only versions are reported, without importing torch.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from neuroncompat.patches.kernels import UNIVERSAL_ENV, installed_kernels, kernels_accepted, universal_opted_in


def _registered_neuron_mappings() -> list[str]:
    """``Layer -> repo`` for each mapping registered with kernels (``register_kernel_mapping``) for Neuron."""
    from kernels.layer.globals import _KERNEL_MAPPING

    found = []
    for layer, devices in _KERNEL_MAPPING.get().items():
        repos: Any = getattr(devices.get("neuron"), "repos", None)
        for repo in (repos or {}).values():
            found.append(f"{layer} -> {getattr(repo, '_repo_id', None) or getattr(repo, '_repo_path', repo)}")
    return found


def lines(neuron_present: bool) -> list[str]:
    """Doctor lines; ``neuron_present``: TorchNeuron or the simulator was detected."""
    version = installed_kernels()
    if version == "not installed":
        return ["Hub kernels: kernels not installed (use_kernels=True and get_kernel need it)"]
    out = [f"Hub kernels: kernels {version}"]
    if importlib.util.find_spec("transformers") is not None:
        accepted, wanted = kernels_accepted()
        verdict = (
            "yes"
            if accepted
            else "no: use_kernels=True raises after the weights load (on Neuron the kernels patch drops it)"
        )
        out.append(f"  transformers accepts it ({wanted}): {verdict}")
    if neuron_present and "kernels" in sys.modules:
        from transformers.integrations import hub_kernels

        from neuroncompat.patches.kernels import default_mapping_maps_neuron

        default = (
            'has a "neuron" entry'
            if default_mapping_maps_neuron(hub_kernels)
            else 'has no "neuron" entry (use_kernels=True alone keeps the original layers)'
        )
        out.append(f"  transformers' default kernel mapping: {default}")
        registered = _registered_neuron_mappings()
        out.append(f"  Neuron layer mappings registered in this process: {', '.join(registered) or 'none'}")
    universal = (
        f"accepted ({UNIVERSAL_ENV}=1)"
        if universal_opted_in()
        else f"refused on Neuron by the kernels patch ({UNIVERSAL_ENV}=1 accepts them)"
    )
    out.append(f"  legacy torch-universal builds: {universal}")
    out.append(f"  LOCAL_KERNELS: {os.environ.get('LOCAL_KERNELS', '(unset)')}")
    return out
