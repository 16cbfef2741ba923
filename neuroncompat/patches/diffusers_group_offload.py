"""``diffusers_group_offload``: group offloading with ``use_stream=True`` runs without streams where the neuron
backend has none.

Gap (docs/gaps.md#diffusers_group_offload): ``enable_group_offload(..., use_stream=True)`` on a pipeline
(diffusers/pipelines/pipeline_utils.py:1361) or a model (diffusers/models/modeling_utils.py:532), and
``apply_group_offloading`` itself (diffusers/hooks/group_offloading.py:567), overlap the weight transfers on a
side stream of the onload device's backend, and raise ``ValueError`` ("requires an onload device whose backend
implements streams ... Pass `use_stream=False`", :670-676) when that backend has no ``Stream``. CUDA recipes
turn streams on (diffusers' docs do); whether TorchNeuron's ``torch.neuron`` has ``Stream`` is not documented,
so such a recipe may stop there on Neuron.

Fix: wrap ``apply_group_offloading`` (rebound in ``diffusers.hooks``, where ``enable_group_offload`` imports it
from, and in ``diffusers`` where its lazy module cached it). On Neuron, with a neuron onload device whose
backend has no ``Stream``, ``use_stream=True`` becomes ``False`` (and ``record_stream``, which needs it, too),
warned: the offloading itself works, without the overlap. Where ``torch.neuron.Stream`` exists (the simulator
has one) the request is kept. Stands down when ``apply_group_offloading`` no longer raises for a backend without
streams.

Example::

    pipe.enable_group_offload(onload_device=torch.device("neuron"), offload_type="leaf_level", use_stream=True)
    # without torch.neuron.Stream: before ValueError; after offloaded without streams, one warning
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# What apply_group_offloading raises for an onload backend without streams.
_GAP = "Pass `use_stream=False`"


class DiffusersGroupOffload(Patch):
    id = "diffusers_group_offload"
    reason = "group offloading with use_stream=True raises where the neuron backend has no Stream: run without"
    targets = ("diffusers.hooks",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        group_offloading = module.group_offloading
        original = group_offloading.apply_group_offloading
        if _GAP not in inspect.getsource(original):
            return False
        wrapped = self._without_missing_streams(original)
        self.replace(group_offloading, "apply_group_offloading", wrapped)
        for owner in (module, sys.modules.get("diffusers")):
            if owner is not None and owner.__dict__.get("apply_group_offloading") is original:
                self.replace(owner, "apply_group_offloading", wrapped)
        return True

    def _without_missing_streams(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def apply_group_offloading(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            if bound.arguments.get("use_stream") and _no_streams(bound.arguments.get("onload_device")):
                bound.arguments["use_stream"] = False
                bound.arguments["record_stream"] = False
                patch.warn(
                    "group offloading use_stream=True -> False (torch.neuron has no Stream to overlap the transfers "
                    "on; the offloading itself is unchanged)"
                )
            return original(*bound.args, **bound.kwargs)

        return apply_group_offloading


def _no_streams(onload_device: Any) -> bool:
    """The onload device is a neuron device whose torch backend has no ``Stream``."""
    import torch

    from neuroncompat.device import neuron_available

    device = torch.device(onload_device) if isinstance(onload_device, (str, int)) else onload_device
    if not isinstance(device, torch.device) or device.type != "neuron" or not neuron_available():
        return False
    return not hasattr(torch.neuron, "Stream")  # type: ignore[attr-defined]
