"""``safetensors_device``: ``safetensors.torch.load_file``/``load_model`` onto a NeuronCore.

Gap (docs/gaps.md#safetensors_device): safetensors' Rust core accepts only the device strings it
knows, and ``neuron``/``neuron:N`` is not one of them: ``safe_open(..., device="neuron:0")`` raises
``SafetensorError: device neuron:0 is invalid`` before torch is consulted, so it fails the same on
a trn2. accelerate's ``load_state()`` with more than one process loads ``on_device``
(accelerate/accelerator.py:3907-3908): ``load_model(model, file, device="neuron:N")``
(accelerate/checkpointing.py:232, :243), which reaches ``load_file`` (safetensors/torch.py:228)
and ``safe_open`` (:359). So every multi-process ``accelerator.load_state(dir)`` (and
``--resume_from_checkpoint`` in accelerate's examples) stops there on Neuron.

Fix: wrap ``safetensors.torch.load_file`` (``load_model`` calls it through the module, so both are
covered). When ``device`` is a ``neuron`` device and Neuron is available, the file is read on the
CPU, as safetensors itself does before copying to an accelerator, and each tensor is then moved to
that device (an index-less ``neuron`` is the current core); the caller gets what it asked for.
Every other device is passed through unchanged, and so is a ``neuron`` device where Neuron is not
available (the original error stays). ``safe_open(..., device="neuron")`` used directly is not
covered: it is the Rust object itself. Stands down when safetensors accepts ``neuron:0`` (the
device check in ``safe_open`` runs before the file is opened, so a probe costs no I/O).

Example::

    accelerator.load_state("ckpt")       # 2 processes under accelerate launch, on a trn2
    # before: SafetensorError: device neuron:1 is invalid
    # after:  the weights are restored on neuron:1
"""

from __future__ import annotations

import functools
import inspect
import os
import tempfile
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


def _neuron_device(device: Any) -> Any:
    """``device`` as a ``torch.device`` when it names a ``neuron`` device, else None (ints: safetensors' own)."""
    import torch

    if isinstance(device, (str, torch.device)):
        try:
            parsed = torch.device(device)
        except RuntimeError:
            return None
        return parsed if parsed.type == "neuron" else None
    return None


def _rejects_neuron(safe_open: Any) -> bool:
    """Whether safetensors' core refuses a ``neuron`` device (checked before any file is opened)."""
    missing = os.path.join(tempfile.gettempdir(), "neuroncompat-probe-does-not-exist.safetensors")
    try:
        safe_open(missing, framework="pt", device="neuron:0")
    except OSError:  # the device was accepted; only the (absent) file failed
        return False
    except Exception as error:  # noqa: BLE001 (SafetensorError is not importable under one name in every release)
        return "invalid" in str(error)
    return False


class SafetensorsDevice(Patch):
    id = "safetensors_device"
    reason = "safetensors rejects 'neuron:N' (accelerate's multi-process load_state): load on CPU, then move"
    targets = ("safetensors.torch",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if not _rejects_neuron(module.safe_open):
            return False
        self.replace(module, "load_file", self._wrap_load_file(module.load_file))
        return True

    def _wrap_load_file(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def load_file(*args: Any, **kwargs: Any) -> Any:
            from neuroncompat.device import neuron_available

            bound = signature.bind(*args, **kwargs)
            target = _neuron_device(bound.arguments.get("device"))
            if target is None or not neuron_available():
                return original(*args, **kwargs)
            bound.arguments["device"] = "cpu"
            tensors = original(*bound.args, **bound.kwargs)
            patch.changed(
                "load_file(device=%r): read on cpu, then moved to the device (safetensors rejects neuron devices)",
                str(target),
            )
            return {key: tensor.to(target) for key, tensor in tensors.items()}

        return load_file
