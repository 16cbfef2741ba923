"""``safetensors_load``: accelerate's multi-process ``load_state()`` loads safetensors weights via the CPU.

Gap (docs/gaps.md#safetensors_load): ``Accelerator.load_state`` picks ``map_location="on_device"`` whenever
several processes run on a multi-device distributed type (accelerate/accelerator.py:3905-3910, accelerate 1.15),
and ``load_accelerator_state`` then calls ``safetensors.torch.load_model(model, file, device=str(map_location))``
(accelerate/checkpointing.py:243) with ``neuron:<rank>``. The safetensors Rust core accepts only the device names
it knows (cpu, cuda, mps, npu, xpu, hpu, ...; custom devices are an open proposal, safetensors PR #779), so every
rank fails ``SafetensorError: device neuron:0 is invalid``. Found resuming accelerate's own
``examples/by_feature/checkpointing.py --resume_from_checkpoint`` under ``accelerate launch --num_processes 2``;
one process loads on the CPU and works.

Fix: wrap the ``load_model`` that ``accelerate.checkpointing`` calls. A ``neuron`` device is replaced by
``"cpu"``: ``load_model`` reads the tensors there and ``model.load_state_dict`` copies them into the model's
parameters, which stay on their NeuronCore, so the restored weights are the same. Other devices are passed
through. Stands down when ``load_accelerator_state`` no longer hands its map location to ``load_model``.

Example::

    accelerator.load_state("ckpt")  # 2 processes
    # before: SafetensorError: device neuron:1 is invalid      after: weights restored on neuron:1
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

_GAP = "load_model(model, input_model_file, device=str(map_location)"


class SafetensorsLoad(Patch):
    id = "safetensors_load"
    reason = "accelerate load_state() with several processes asks safetensors for neuron:N, which it rejects"
    targets = ("accelerate",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        checkpointing = importlib.import_module("accelerate.checkpointing")
        if _GAP not in inspect.getsource(checkpointing.load_accelerator_state):
            return False
        self.replace(checkpointing, "load_model", self._wrap(checkpointing.load_model))
        return True

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def load_model(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            device = str(bound.arguments.get("device", "cpu"))
            if device.split(":")[0] == "neuron":
                bound.arguments["device"] = "cpu"
                patch.changed(
                    "accelerate load_state: safetensors weights read on the CPU, copied into the model on %s "
                    "(safetensors rejects %s)",
                    device,
                    device,
                )
            return original(*bound.args, **bound.kwargs)

        return load_model
