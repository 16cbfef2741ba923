"""CUDA distributed setup from user code: NCCL -> the Neuron process group, DDP's CUDA devices.

- ``init_process_group("nccl")`` (also ``"cuda:nccl"``, ``"cpu:gloo,cuda:nccl"``) -> the backend
  registered for the ``neuron`` device (NM401), from any caller: NCCL cannot exist here.
- ``torch.distributed.is_nccl_available()`` from user code -> True, since ``"nccl"`` now means
  the Neuron backend (``backend = "nccl" if dist.is_nccl_available() else "gloo"`` would otherwise
  pick gloo, which cannot reduce NeuronCore tensors).
- ``DistributedDataParallel(model, device_ids=[r], output_device=r)`` is kept as written, as
  ``neuron-migrate`` keeps it: DDP takes its device type from the module's parameters (on
  ``neuron:r`` after ``.cuda(r)``) and, given ``device_ids``, moves each CPU input batch to
  ``neuron:r`` before the forward (dropping the ids made the forward mix ``neuron:r`` and CPU
  tensors). Only ids that name CUDA (``torch.device("cuda", r)``, ``"cuda:r"``, ``"cuda"``) are
  translated, to the same NeuronCore in the same form (NM102, as the codemod rewrites them).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from neuroncompat.cuda import sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.cuda.devices import names_cuda, translate
from neuroncompat.patch import Patch
from neuroncompat.patches.dist_backend import _translate


def _wrap_init(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        requested = bound.arguments.get("backend")
        neuron_backend = dist.Backend.default_device_backend_map.get("neuron")
        if isinstance(requested, str) and "nccl" in requested.lower() and neuron_backend is not None:
            translated = _translate(requested, neuron_backend)
            sites.record(
                sys._getframe(1), f'init_process_group("{requested}")', f'init_process_group("{translated}")', "NM401"
            )
            bound.arguments["backend"] = translated
        return original(*bound.args, **bound.kwargs)

    return init_process_group


def _wrap_is_nccl_available(original: Callable[[], bool]) -> Callable[[], bool]:
    @functools.wraps(original)
    def is_nccl_available() -> bool:
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return original()
        sites.record(
            frame, "torch.distributed.is_nccl_available()", 'True ("nccl" runs on the neuron backend)', "NM401"
        )
        return True

    return is_nccl_available


def _neuron_ids(device_ids: Any, call: str) -> Any:
    """``device_ids`` with each CUDA-named entry translated (the list itself when none is)."""
    if not isinstance(device_ids, (list, tuple)) or not any(names_cuda(d) for d in device_ids):
        return device_ids
    return type(device_ids)(translate(d, call, "device_ids", depth=4) if names_cuda(d) else d for d in device_ids)


def _wrap_ddp_init(original: Callable[..., None]) -> Callable[..., None]:
    """``device_ids``/``output_device`` are DDP's 2nd and 3rd parameters, positional or keyword."""

    @functools.wraps(original)
    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        call = "DistributedDataParallel"
        if args:
            positional = list(args)
            positional[0] = _neuron_ids(positional[0], call)
            if len(positional) > 1 and names_cuda(positional[1]):
                positional[1] = translate(positional[1], call, "output_device")
            args = tuple(positional)
        if kwargs:
            if "device_ids" in kwargs:
                kwargs["device_ids"] = _neuron_ids(kwargs["device_ids"], call)
            if names_cuda(kwargs.get("output_device")):
                kwargs["output_device"] = translate(kwargs["output_device"], call, "output_device")
        original(self, module, *args, **kwargs)

    return __init__


def install(patch: Patch) -> None:
    if not dist.is_available():
        return
    c10d = dist.distributed_c10d
    init = _wrap_init(dist.init_process_group)
    patch.replace(c10d, "init_process_group", init)
    patch.replace(dist, "init_process_group", init)
    available = _wrap_is_nccl_available(dist.is_nccl_available)
    patch.replace(c10d, "is_nccl_available", available)
    patch.replace(dist, "is_nccl_available", available)
    ddp = torch.nn.parallel.DistributedDataParallel
    patch.replace(ddp, "__init__", _wrap_ddp_init(ddp.__init__))
