"""``diffusers_warmup``: diffusers' caching-allocator warm-up skips NeuronCores, as transformers' does.

Gap (docs/gaps.md#diffusers_warmup): with a ``device_map``, ``ModelMixin.from_pretrained``
(diffusers/models/modeling_utils.py:1904-1906) calls ``_caching_allocator_warmup``
(diffusers/models/model_loading_utils.py:783-818), which allocates one ``torch.empty`` of half the model's
elements on every non-CPU device of the map, to prime a CUDA-style caching allocator. Neuron has no reusable
pool (diffusers says so itself: "Backends without a caching allocator (cpu, neuron)",
diffusers/utils/torch_utils.py:254), so the block is pure extra memory at load time: transformers hit
``NRT allocation failed`` in the same warm-up and now skips Neuron (transformers/modeling_utils.py:5227-5229,
PR #47029). diffusers has no such skip.

Fix: wrap ``_caching_allocator_warmup`` (rebound in ``diffusers.models.modeling_utils``, which imports it by
name at :74) to drop the neuron entries of the device map it is given; other devices are warmed as before.
Logged once. Stands down when the warm-up's source mentions the neuron device.

Example::

    unet = UNet2DConditionModel.from_pretrained(path, subfolder="unet", device_map="neuron")
    # before: one extra torch.empty(numel // 2) on neuron:0 while loading   after: none
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


class DiffusersWarmup(Patch):
    id = "diffusers_warmup"
    reason = "diffusers' caching-allocator warm-up allocates a throwaway block on NeuronCores: skip them"
    targets = ("diffusers.models.modeling_utils",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        loading = sys.modules.get("diffusers.models.model_loading_utils")
        original = module._caching_allocator_warmup
        if "neuron" in inspect.getsource(original):
            return False
        wrapped = self._skip_neuron(original)
        self.replace(module, "_caching_allocator_warmup", wrapped)
        if loading is not None and loading.__dict__.get("_caching_allocator_warmup") is original:
            self.replace(loading, "_caching_allocator_warmup", wrapped)
        return True

    def _skip_neuron(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def _caching_allocator_warmup(model: Any, expanded_device_map: dict[str, Any], *args: Any) -> None:
            kept = {name: device for name, device in expanded_device_map.items() if not _is_neuron(device)}
            if len(kept) != len(expanded_device_map):
                patch.changed(
                    "%s: caching-allocator warm-up skipped on the NeuronCores (Neuron has no allocator pool to prime)",
                    type(model).__name__,
                )
            return original(model, kept, *args)

        return _caching_allocator_warmup


def _is_neuron(device: Any) -> bool:
    import torch

    if isinstance(device, int) and not isinstance(device, bool):
        from neuroncompat.device import neuron_available

        return neuron_available() and not torch.cuda.is_available()  # an index is a NeuronCore on Neuron
    try:
        return torch.device(device).type == "neuron"
    except (RuntimeError, TypeError):
        return False
