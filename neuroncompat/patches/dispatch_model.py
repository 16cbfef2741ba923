"""``dispatch_model``: accelerate's single-device ``dispatch_model(model, {"": 0})`` moves the model.

Gap (docs/gaps.md#dispatch_model): in ``accelerate.big_modeling.dispatch_model``
(accelerate/big_modeling.py:500-514, accelerate 1.15), the single-device branch remaps an integer
device for npu/mlu/sdaa/musa/neuron, and ``model.to(device)`` sits in the ``else`` of that chain
(since accelerate PR #4083). So with an integer device on Neuron the model is never moved, yet
``hf_device_map = {"": 0}`` is set (:516): it stays on the CPU, the Trainer then skips its own
``.to`` because ``hf_device_map`` exists, and pipelines feed it from the CPU. transformers never
takes this branch (it dispatches only for several devices or disk); direct
``dispatch_model(model, {"": 0})`` and ``load_checkpoint_and_dispatch(..., device_map={"": 0})``
users do.

Fix: wrap ``dispatch_model`` (rebound in ``accelerate`` and ``accelerate.big_modeling``, where
``load_checkpoint_and_dispatch`` looks it up, and in the diffusers modules that import it by name:
``diffusers.models.modeling_utils`` (:138, called at :1519) and
``diffusers.pipelines.pipeline_loading_utils`` (:58, called at :937-946 for each component of a
``device_map`` pipeline)). After the original returns, when the map names one
integer core and the model is not there, move it with the class's own ``to`` (bypassing any
instance-level wrapper accelerate installs). String and ``torch.device`` maps, ``"cpu"`` and
multi-device maps are upstream's. Stands down when ``model.to`` is no longer inside the ``else``
of the remap chain.

Example::

    model = accelerate.dispatch_model(model, device_map={"": 0})
    # before: parameters on cpu, hf_device_map == {"": 0}      after: parameters on neuron:0
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# The regression: ``model.to(device)`` only in the else branch after the neuron remap.
_GAP = re.compile(r'device = f"neuron:\{device\}"\s*\n\s*else:\s*\n\s*model\.to\(device\)')


class DispatchModel(Patch):
    id = "dispatch_model"
    reason = 'accelerate dispatch_model(model, {"": 0}) never moves the model on Neuron: move it to the core'
    targets = ("accelerate", "diffusers.models.modeling_utils", "diffusers.pipelines.pipeline_loading_utils")

    def __init__(self) -> None:
        super().__init__()
        self._original: Callable[..., Any] | None = None
        self._wrapped: Callable[..., Any] | None = None

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name != "accelerate":
            # diffusers imports accelerate first, so the wrapper exists unless accelerate was fixed.
            if self._wrapped is None:
                return False
            binding = module.__dict__.get("dispatch_model")
            if binding is self._original:
                self.replace(module, "dispatch_model", self._wrapped)
            elif binding is self._wrapped:  # imported after accelerate was patched: it bound the wrapper itself
                self.undo_with(functools.partial(_unbind, module, self._wrapped, self._original))
            return True
        big_modeling = module.big_modeling
        original = big_modeling.dispatch_model
        if not _GAP.search(inspect.getsource(original)):
            return False
        self._original, self._wrapped = original, self._wrap_dispatch(original)
        self.replace(big_modeling, "dispatch_model", self._wrapped)
        self.replace(module, "dispatch_model", self._wrapped)
        return True

    def _wrap_dispatch(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def dispatch_model(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            model = original(*args, **kwargs)
            patch._move_to_single_core(model, bound.arguments.get("device_map") or {})
            return model

        return dispatch_model

    def _move_to_single_core(self, model: Any, device_map: dict[str, Any]) -> None:
        import torch

        from neuroncompat.device import neuron_available

        devices = set(device_map.values())
        if len(devices) != 1 or not neuron_available():
            return
        index = next(iter(devices))
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            return
        target = torch.device("neuron", index)
        tensors = [*model.parameters(), *model.buffers()]
        stranded = sorted({str(t.device) for t in tensors if t.device != target})
        if not stranded:
            return
        type(model).to(model, target)
        self.changed(
            'dispatch_model(device_map={"": %d}) -> model moved to %s (accelerate left it on %s)',
            index,
            target,
            ", ".join(stranded),
        )


def _unbind(module: ModuleType, wrapped: Callable[..., Any] | None, original: Callable[..., Any] | None) -> None:
    """On revert, give a module that imported the wrapper by name accelerate's function back."""
    if module.__dict__.get("dispatch_model") is wrapped:
        module.dispatch_model = original  # type: ignore[attr-defined]
