"""``device_map``: "auto" and friends resolve to the rank-local NeuronCore, not the CPU.

Gap: ``from_pretrained(device_map="auto")`` asks accelerate's ``get_max_memory``, which has no
Neuron branch: the only device it finds is ``cpu``, so the model loads to the CPU with no
message (docs/gaps.md#device_map). TRL's trainers pass ``device_map="auto"`` themselves on
Neuron (``create_model_from_path``), also under torchrun.

Fix: wrap ``PreTrainedModel.from_pretrained`` (every model class, ``pipeline(device_map=...)``
and TRL go through it) and diffusers' ``ModelMixin.from_pretrained`` (UNets, transformers, VAEs;
diffusers/models/model_loading_utils.py:62-112 asks the same ``get_max_memory``).
"auto"/"balanced"/"balanced_low_0"/"sequential" become ``{"": neuron:LOCAL_RANK}``. An explicit
dict, a device, or ``max_memory`` is left alone. A diffusers pipeline's only strategy,
``DiffusionPipeline.from_pretrained(device_map="balanced")``, assigns whole components to the devices
``get_max_memory`` reports (diffusers/pipelines/pipeline_loading_utils.py:684-781, bound by name at
:60), so that binding reports the rank-local NeuronCore and every component loads there.
With ``NEURONCOMPAT_DEVICE_MAP=balanced`` a single process may instead spread one model (or a
pipeline's components) over the visible cores: accelerate's ``get_max_memory`` then reports each
NeuronCore, in accelerate and in the modules that imported it by name. Stands down when
accelerate's ``get_max_memory`` learns about Neuron.

Example::

    model = AutoModelForCausalLM.from_pretrained(path, device_map="auto")
    # before: every parameter on cpu      after: every parameter on neuron:0 (rank 0)
    pipe = DiffusionPipeline.from_pretrained(path, device_map="balanced")
    # before: every component on cpu      after: unet, vae, text_encoder on neuron:0 (rank 0)
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat import environment
from neuroncompat.patch import Patch

AUTO_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
SPREAD_ENV = "NEURONCOMPAT_DEVICE_MAP"
# Headroom left on each core when spreading a model, as accelerate leaves on GPUs.
_SPREAD_FRACTION = 0.9


def _spread_requested() -> bool:
    return environment.choice(SPREAD_ENV) == "balanced"


# Modules that bind accelerate's get_max_memory by name: the opt-in spread must reach them too.
_MAX_MEMORY_ALIASES = (
    ("accelerate.utils", "get_max_memory"),
    ("transformers.integrations.accelerate", "accelerate_max_memory"),
    ("diffusers.models.model_loading_utils", "get_max_memory"),
    ("diffusers.pipelines.pipeline_loading_utils", "get_max_memory"),
)


def _with_cores(result: dict, cores: list[int]) -> dict:
    """accelerate's answer with these NeuronCores in front, each with its headroom."""
    import torch

    neuron: Any = torch.neuron  # type: ignore[attr-defined]  # registered at runtime, not in torch's stubs
    memory = {i: int(neuron.get_device_properties(i).total_memory * _SPREAD_FRACTION) for i in cores}
    return {**memory, **result}


class DeviceMap(Patch):
    id = "device_map"
    reason = 'device_map="auto" silently loads to CPU on Neuron: resolve it to the rank-local NeuronCore'
    targets = (
        "transformers.modeling_utils",
        "diffusers.models.modeling_utils",
        "diffusers.pipelines.pipeline_loading_utils",
    )

    def __init__(self) -> None:
        super().__init__()
        self._spread: Callable[..., dict] | None = None
        self._spread_original: Callable[..., dict] | None = None

    def patch_module(self, name: str, module: ModuleType) -> bool:
        import accelerate.utils.modeling as acc_modeling

        if "neuron" in inspect.getsource(acc_modeling.get_max_memory):
            return False
        if _spread_requested():
            self._patch_max_memory(acc_modeling)
        if name == "diffusers.pipelines.pipeline_loading_utils":
            self.replace(module, "get_max_memory", self._pipeline_max_memory(module.get_max_memory))
            return True
        cls = module.PreTrainedModel if name == "transformers.modeling_utils" else module.ModelMixin
        original = cls.__dict__["from_pretrained"].__func__
        self.replace(cls, "from_pretrained", classmethod(self._wrap_from_pretrained(original)))
        return True

    def _wrap_from_pretrained(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
            device_map = kwargs.get("device_map")
            if isinstance(device_map, str) and device_map in AUTO_STRATEGIES and kwargs.get("max_memory") is None:
                from neuroncompat.device import local_neuron_device, neuron_available

                if neuron_available() and not _spread_requested():
                    device = local_neuron_device()
                    kwargs["device_map"] = {"": device}
                    patch.changed(
                        'device_map="%s" -> {"": "%s"} (rank-local NeuronCore; accelerate would place it on CPU)',
                        device_map,
                        device,
                    )
            return original(cls, *args, **kwargs)

        from_pretrained.__neuroncompat__ = True  # type: ignore[attr-defined]
        return from_pretrained

    def _patch_max_memory(self, acc_modeling: ModuleType) -> None:
        """Opt-in: report every visible NeuronCore to accelerate so "auto" can split a model."""
        if self._spread is None:
            original = acc_modeling.get_max_memory
            patch = self

            @functools.wraps(original)
            def get_max_memory(max_memory: dict | None = None) -> dict:
                result = original(max_memory)
                if max_memory is None and not any(isinstance(k, int) for k in result):
                    import torch

                    cores = list(range(torch.neuron.device_count()))  # type: ignore[attr-defined]
                    result = _with_cores(result, cores)
                    patch.changed("%s=balanced: accelerate sees NeuronCores %s", SPREAD_ENV, cores)
                return result

            self._spread = get_max_memory
            self.replace(acc_modeling, "get_max_memory", get_max_memory)
            self._spread_original = original
        for alias_module, attr in _MAX_MEMORY_ALIASES:
            module = sys.modules.get(alias_module)
            if module is not None and module.__dict__.get(attr) is self._spread_original:
                self.replace(module, attr, self._spread)

    def _pipeline_max_memory(self, original: Callable[..., dict]) -> Callable[..., dict]:
        """diffusers' pipeline binding of ``get_max_memory``: the rank-local core where accelerate sees none."""
        patch = self

        @functools.wraps(original)
        def get_max_memory(max_memory: dict | None = None) -> dict:
            result = original(max_memory)
            if max_memory is None and not any(isinstance(k, int) for k in result):
                from neuroncompat.device import local_core_index, neuron_available

                if neuron_available():
                    core = local_core_index()
                    result = _with_cores(result, [core])
                    patch.changed(
                        'DiffusionPipeline device_map="balanced": every component -> neuron:%d (rank-local '
                        "NeuronCore; accelerate sees no Neuron memory and would keep them on the CPU)",
                        core,
                    )
            return result

        return get_max_memory
