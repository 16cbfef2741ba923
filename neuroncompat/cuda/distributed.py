"""CUDA distributed setup from user code: NCCL -> the Neuron process group, DDP ids dropped.

- ``init_process_group("nccl")`` (also ``"cuda:nccl"``, ``"cpu:gloo,cuda:nccl"``) -> the backend
  registered for the ``neuron`` device (NM401), from any caller: NCCL cannot exist here.
- ``torch.distributed.is_nccl_available()`` from user code -> True, since ``"nccl"`` now means
  the Neuron backend (``backend = "nccl" if dist.is_nccl_available() else "gloo"`` would otherwise
  pick gloo, which cannot reduce NeuronCore tensors).
- ``DistributedDataParallel(model, device_ids=[r], output_device=r)`` from user code ->
  ``DistributedDataParallel(model)`` (NM402): the model already sits on its rank's NeuronCore,
  which DDP uses when no ids are given.
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


def _wrap_ddp_init(original: Callable[..., None]) -> Callable[..., None]:
    """``device_ids``/``output_device`` are DDP's 2nd and 3rd parameters, positional or keyword."""

    @functools.wraps(original)
    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        frame = sys._getframe(1)
        positional = list(args)
        given: dict[str, Any] = {}
        for position, key in enumerate(("device_ids", "output_device")):
            if kwargs.get(key) is not None:
                given[key] = kwargs[key]
            elif len(positional) > position and positional[position] is not None:
                given[key] = positional[position]
        if given and is_user_frame(frame):
            shown = ", ".join(f"{k}={v!r}" for k, v in given.items())
            sites.record(frame, f"DistributedDataParallel(model, {shown})", "DistributedDataParallel(model)", "NM402")
            for position, key in enumerate(("device_ids", "output_device")):
                kwargs.pop(key, None)
                if len(positional) > position:
                    positional[position] = None
        original(self, module, *positional, **kwargs)

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
