"""``pipeline_device``: ``pipeline()`` with no device, an int device or ``"cuda"`` runs on Neuron.

Gap: ``Pipeline.__init__`` (transformers/pipelines/base.py:801) turns ``device=None`` into ``0``
when the model has no ``hf_device_map`` (:834-838), then maps an integer through a chain of
accelerators (mlu/musa/cuda/npu/hpu/xpu/mps) that has no Neuron branch and falls back to
``torch.device("cpu")`` (:857-874); the model is then moved to the CPU (:880-888). So
``pipeline("text-generation", model=...)`` and ``pipeline(..., device=0)`` run on the CPU with no
message, although the docstring promises the first accelerator (pipelines/__init__.py:885-889).
``device="cuda"`` fails with "Torch not compiled with CUDA enabled" (docs/gaps.md#pipeline_device).

Fix: wrap ``Pipeline.__init__`` (every task pipeline calls it). On Neuron, for a model without
``hf_device_map``: ``device=None`` -> the NeuronCore the model already sits on, else the
rank-local one (upstream would move it to the CPU), an int ``n >= 0`` -> ``neuron:n``,
``"cuda"``/``"cuda:n"``/``torch.device("cuda", n)`` -> ``neuron:n`` when CUDA is unavailable. A model
split by accelerate keeps its map; the pipeline's device (where inputs go) becomes the map's first
integer device as a NeuronCore rather than the CPU (:836 then :874). ``-1``,
``"cpu"`` and every other explicit device are kept. Stands down when ``Pipeline.__init__`` learns
about Neuron.

Example::

    pipe = pipeline("text-generation", model="Qwen/Qwen3-0.6B")
    # before: pipe.device == cpu      after: pipe.device == neuron:0 (rank 0)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


class PipelineDevice(Patch):
    id = "pipeline_device"
    reason = "pipeline() with no device or an int device runs on CPU on Neuron: place it on the NeuronCore"
    targets = ("transformers.pipelines.base",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        cls = module.Pipeline
        original = cls.__dict__["__init__"]
        if "neuron" in inspect.getsource(original):
            return False
        self.replace(cls, "__init__", self._wrap_init(original))
        return True

    def _wrap_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def __init__(pipeline: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(pipeline, *args, **kwargs)
            model = bound.arguments.get("model")
            requested = bound.arguments.get("device")
            device_map = getattr(model, "hf_device_map", None)
            if device_map is None:
                device = patch._neuron_device(requested, model)
                if device is not None:
                    bound.arguments["device"] = device
                    patch.changed(
                        "pipeline(device=%r) -> %s (transformers would run it on %s)",
                        requested,
                        device,
                        "cpu" if requested is None or isinstance(requested, int) else "cuda, which is unavailable",
                    )
            original(*bound.args, **bound.kwargs)
            if device_map is not None and requested is None:
                patch._fix_mapped_device(pipeline, device_map)

        return __init__

    def _fix_mapped_device(self, pipeline: Any, device_map: dict[str, Any]) -> None:
        """A model split by accelerate: its map's first integer device is a NeuronCore, not the CPU."""
        import torch

        from neuroncompat.device import neuron_available

        first = next(iter(device_map.values()))
        if neuron_available() and isinstance(first, int) and first >= 0 and pipeline.device.type == "cpu":
            pipeline.device = torch.device("neuron", first)
            self.changed(
                "pipeline over hf_device_map (first device %d) -> %s (transformers would feed it from cpu)",
                first,
                pipeline.device,
            )

    @staticmethod
    def _neuron_device(requested: Any, model: Any) -> Any:
        """The NeuronCore ``requested`` should mean on this host, or None to keep it."""
        import torch

        from neuroncompat.device import local_neuron_device, neuron_available

        if not neuron_available():
            return None
        if requested is None:
            placed = getattr(model, "device", None)
            return placed if isinstance(placed, torch.device) and placed.type == "neuron" else local_neuron_device()
        if isinstance(requested, int) and not isinstance(requested, bool):
            return torch.device("neuron", requested) if requested >= 0 else None
        if isinstance(requested, (str, torch.device)) and not torch.cuda.is_available():
            try:
                device = torch.device(requested)
            except RuntimeError:
                return None
            if device.type == "cuda":
                return torch.device("neuron", device.index) if device.index is not None else local_neuron_device()
        return None
