"""CUDA mixed precision from user code: bf16 autocast on the NeuronCore, a pass-through GradScaler.

- ``torch.autocast("cuda", ...)``/``torch.amp.autocast(device_type="cuda")`` and
  ``torch.cuda.amp.autocast(...)`` -> ``torch.autocast("neuron", dtype=torch.bfloat16)`` (NM204).
  fp16 (CUDA's default) becomes bf16: bf16 has fp32's range, needs no loss scaling and is what
  Neuron computes fastest; an explicit bf16 or fp32 dtype is kept. ``enabled`` and
  ``cache_enabled`` are kept.
- ``torch.cuda.amp.GradScaler(...)``/``torch.amp.GradScaler("cuda")`` ->
  ``torch.amp.GradScaler("neuron", enabled=False)`` (NM205): a disabled scaler passes through
  (``scale`` returns the loss, ``step`` calls ``optimizer.step()``, ``update`` does nothing), so
  the loop runs as written.

Autocast on any other device (``torch.autocast(x.device.type)`` in transformers) goes straight
to the original without looking at the caller: the caller check runs only when ``"cuda"`` is
named, so ``torch.compile`` traces library autocasts as before. Library code that names
``"cuda"`` keeps its behaviour on a machine without CUDA (autocast disabled, with torch's warning).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from neuroncompat.cuda import sites
from neuroncompat.cuda.callers import is_user_frame
from neuroncompat.patch import Patch


def _neuron_dtype(dtype: torch.dtype | None) -> torch.dtype:
    return torch.bfloat16 if dtype is None or dtype == torch.float16 else dtype


def _autocast_function(original: type, call: str) -> Callable[..., Any]:
    def autocast(
        device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, cache_enabled: bool | None = None
    ) -> Any:
        if device_type == "cuda":
            frame = sys._getframe(1)
            if is_user_frame(frame):
                target = _neuron_dtype(dtype)
                shown = "" if dtype is None else f", dtype={dtype}"
                sites.record(frame, f'{call}("cuda"{shown})', f'torch.autocast("neuron", dtype={target})', "NM204")
                return original("neuron", dtype=target, enabled=enabled, cache_enabled=cache_enabled)
        return original(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    autocast.__doc__ = original.__doc__
    return autocast


def _cuda_amp_autocast(original_autocast: type, cuda_autocast: type) -> Callable[..., Any]:
    def autocast(enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> Any:
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return cuda_autocast(enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
        target = _neuron_dtype(dtype)
        sites.record(frame, "torch.cuda.amp.autocast()", f'torch.autocast("neuron", dtype={target})', "NM204")
        return original_autocast("neuron", dtype=target, enabled=enabled, cache_enabled=cache_enabled)

    autocast.__doc__ = cuda_autocast.__doc__
    return autocast


def _grad_scaler(real: type) -> type:
    """``torch.amp.GradScaler`` whose CUDA form, from user code, is a disabled Neuron scaler."""

    class GradScaler(real):
        __doc__ = real.__doc__

        def __init__(self, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            frame = sys._getframe(1)
            if device == "cuda" and is_user_frame(frame):
                sites.record(
                    frame, 'torch.amp.GradScaler("cuda")', 'torch.amp.GradScaler("neuron", enabled=False)', "NM205"
                )
                super().__init__("neuron", enabled=False)
                return
            super().__init__(device, *args, **kwargs)

    GradScaler.__module__ = real.__module__
    return GradScaler


def _cuda_grad_scaler(scaler: type, cuda_scaler: type) -> Callable[..., Any]:
    def GradScaler(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 (torch.cuda.amp.GradScaler's name)
        frame = sys._getframe(1)
        if not is_user_frame(frame):
            return cuda_scaler(*args, **kwargs)
        sites.record(frame, "torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("neuron", enabled=False)', "NM205")
        return scaler("neuron", enabled=False)

    GradScaler.__doc__ = cuda_scaler.__doc__
    return GradScaler


def install(patch: Patch) -> None:
    real_autocast = torch.amp.autocast_mode.autocast
    patch.replace(torch, "autocast", _autocast_function(real_autocast, "torch.autocast"))
    patch.replace(torch.amp, "autocast", _autocast_function(real_autocast, "torch.amp.autocast"))
    patch.replace(torch.cuda.amp, "autocast", _cuda_amp_autocast(real_autocast, torch.cuda.amp.autocast))
    real_scaler = torch.amp.GradScaler
    scaler = _grad_scaler(real_scaler)
    patch.replace(torch.amp, "GradScaler", scaler)
    if hasattr(torch, "GradScaler"):
        patch.replace(torch, "GradScaler", scaler)
    patch.replace(torch.cuda.amp, "GradScaler", _cuda_grad_scaler(real_scaler, torch.cuda.amp.GradScaler))
