"""``dist_backend``: ``init_process_group("nccl")`` uses the Neuron process-group backend.

Gap (docs/gaps.md#dist_backend): accelerate ignores the requested backend on Neuron and
uses ``"neuron"`` (accelerate/state.py:796-798), so ``TrainingArguments(ddp_backend="nccl")`` is
harmless, but a script's own ``torch.distributed.init_process_group("nccl")`` (or
``"cuda:nccl"``, ``"cpu:gloo,cuda:nccl"``) fails on a Neuron host under torchrun: "Distributed
package doesn't have NCCL built in".

Fix: wrap ``torch.distributed.init_process_group`` (rebound in ``torch.distributed`` and
``torch.distributed.distributed_c10d``). On Neuron with CUDA unavailable, NCCL becomes the
backend registered for the ``neuron`` device (``Backend.default_device_backend_map["neuron"]``,
which torch-neuronx registers as ``"neuron"``): ``"nccl"`` -> ``"neuron"``, ``"cuda:nccl"`` ->
``"neuron:neuron"``, ``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,neuron:neuron"``, warned. Other
backends (``"gloo"``, ``"neuron"``, None) are kept, and so is NCCL where CUDA is available. When
no backend is registered for the device (torch-neuronx's distributed support not loaded) the
call is left alone with a warning: mapping to a name torch does not know would only trade one
error for another. Stands down when torch's NCCL backend serves the ``neuron`` device
(``Backend.backend_capability["nccl"]`` lists it, as a platform mapping NCCL onto its own
collectives would register it): then ``"nccl"`` already works there.

The simulator registers its ``neuron`` backend as torch-neuronx does
(``Backend.register_backend("neuron", ..., devices=["neuron"])``, collectives over gloo), so
the tests check the real process group that ``init_process_group("nccl")`` creates.

Example::

    torch.distributed.init_process_group("nccl")   # under torchrun on a trn2
    # before: RuntimeError: Distributed package doesn't have NCCL built in
    # after:  torch.distributed.get_backend() == "neuron"
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


def _translate(backend: str, neuron_backend: str) -> str:
    """NCCL (alone or per device) replaced by the Neuron backend; the rest as given."""
    if backend.lower() == "nccl":
        return neuron_backend
    if ":" not in backend:
        return backend
    pairs = []
    for pair in backend.split(","):
        device, _, name = pair.partition(":")
        if name.lower() == "nccl":
            device, name = "neuron", neuron_backend
        pairs.append(f"{device}:{name}")
    return ",".join(pairs)


class DistBackend(Patch):
    id = "dist_backend"
    reason = 'init_process_group("nccl") fails on Neuron: use the Neuron process-group backend'
    targets = ("torch.distributed",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        c10d = module.distributed_c10d
        if "neuron" in c10d.Backend.backend_capability.get("nccl", ()):
            return False
        original = c10d.init_process_group
        wrapped = self._wrap_init(original)
        self.replace(c10d, "init_process_group", wrapped)
        self.replace(module, "init_process_group", wrapped)
        return True

    def _wrap_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            requested = bound.arguments.get("backend")
            if isinstance(requested, str) and "nccl" in requested.lower():
                translated = patch._translate_on_neuron(requested)
                if translated is not None:
                    bound.arguments["backend"] = translated
            return original(*bound.args, **bound.kwargs)

        return init_process_group

    def _translate_on_neuron(self, requested: str) -> str | None:
        import torch
        import torch.distributed as dist

        from neuroncompat.device import neuron_available

        if not neuron_available() or torch.cuda.is_available():
            return None
        neuron_backend = dist.Backend.default_device_backend_map.get("neuron")
        if neuron_backend is None:
            self.warn(
                'init_process_group("%s") kept: no process-group backend is registered for the neuron device '
                "(is torch_neuronx's distributed support loaded?)",
                requested,
            )
            return None
        translated = _translate(requested, neuron_backend)
        self.warn('init_process_group("%s") -> "%s" (NCCL needs CUDA)', requested, translated)
        return translated
