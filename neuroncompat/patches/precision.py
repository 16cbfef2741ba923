"""``precision``: fp16 requests become bf16 on Neuron, and ``tf32=True`` is dropped.

Gap (docs/gaps.md#precision):
- ``TrainingArguments(fp16=True)`` passes transformers' validation (training_args.py:1776-1785
  checks only bf16), then ``Accelerator.__init__`` raises "fp16 mixed precision requires a device
  in ('xpu', 'cuda', ...) (not 'neuron')" (accelerate/accelerator.py:565-575). The same happens
  with ``Accelerator(mixed_precision="fp16")`` and ``accelerate launch --mixed_precision fp16``
  (``ACCELERATE_MIXED_PRECISION``, accelerate/state.py:926-930). TRL configs subclass
  ``TrainingArguments`` and set ``bf16 = not fp16`` first (trl/trainer/base_config.py:108).
- ``TrainingArguments(tf32=True)`` raises "--tf32 requires Ampere or a newer GPU arch" off CUDA
  (training_args.py:1677-1682; ``is_torch_tf32_available``, utils/import_utils.py:722-738).
- ``torch.autocast("neuron", dtype=torch.float16)`` (or no dtype: PyTorch's default for a
  PrivateUse1 device is float16) asks for fp16 where bf16 is Neuron's native mixed precision.

Fix, on Neuron with CUDA unavailable (``use_cpu=True`` / ``cpu=True`` are left alone):
- wrap ``TrainingArguments.__post_init__`` (so every TRL config too): ``fp16=True`` ->
  ``fp16=False, bf16=True``; ``tf32=True`` -> ``tf32=None`` (TF32 is a CUDA matmul mode), warned;
- wrap ``Accelerator.__init__``: ``mixed_precision="fp16"`` (argument or environment) -> "bf16";
- wrap ``torch.autocast.__init__``: on ``"neuron"``, float16 (explicit or PyTorch's default) ->
  bfloat16.
Feature-detected: the ``TrainingArguments``/``Accelerator`` parts stand down when accelerate
accepts fp16 on Neuron and ``is_torch_tf32_available`` knows Neuron; the autocast part stands down
when PyTorch's autocast dtype for the ``neuron`` device is already bfloat16 once torch is loaded
(torch-neuronx, autoloaded by ``import torch``, may set it with ``torch.set_autocast_dtype``); an
explicit ``dtype=torch.float16`` is then the user's choice and kept.

Example::

    args = SFTConfig(output_dir="out", fp16=True, tf32=True)
    # before: ValueError (tf32), then ValueError from Accelerator (fp16)
    # after:  args.bf16 is True, args.fp16 is False, args.tf32 is None, two warnings logged
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


def _on_neuron() -> bool:
    import torch

    from neuroncompat.device import neuron_available

    return neuron_available() and not torch.cuda.is_available()


def _accelerate_rejects_fp16_on_neuron() -> bool:
    from accelerate.accelerator import Accelerator

    source = inspect.getsource(Accelerator.__init__)
    supported = next((line for line in source.splitlines() if "supported_device =" in line), "")
    return "neuron" not in supported


def _tf32_raises_on_neuron() -> bool:
    from transformers.utils import import_utils

    return "neuron" not in inspect.getsource(import_utils.is_torch_tf32_available)


def _autocast_defaults_to_fp16(torch: ModuleType) -> bool:
    """PyTorch's autocast dtype for ``neuron`` is float16 (its PrivateUse1 default), or unknown yet."""
    try:
        return torch.get_autocast_dtype("neuron") != torch.bfloat16
    except RuntimeError:  # the neuron device is not registered yet: assume PyTorch's default
        return True


class Precision(Patch):
    id = "precision"
    reason = "fp16 and tf32 raise on Neuron (accelerate has no fp16 path for it): use bf16, drop tf32"
    # "torch", not "torch.amp.autocast_mode": the neuron device (and its autocast dtype) exists only
    # once torch has finished importing, which is when torch-neuronx's autoload runs.
    targets = ("transformers.training_args", "accelerate.accelerator", "torch")

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "transformers.training_args":
            fix_fp16, fix_tf32 = _accelerate_rejects_fp16_on_neuron(), _tf32_raises_on_neuron()
            if not (fix_fp16 or fix_tf32):
                return False
            cls = module.TrainingArguments
            self.replace(
                cls, "__post_init__", self._wrap_training_args(cls.__dict__["__post_init__"], fix_fp16, fix_tf32)
            )
            return True
        if name == "accelerate.accelerator":
            if not _accelerate_rejects_fp16_on_neuron():
                return False
            cls = module.Accelerator
            self.replace(cls, "__init__", self._wrap_accelerator(cls.__dict__["__init__"]))
            return True
        if not _autocast_defaults_to_fp16(module):
            return False
        cls = module.amp.autocast_mode.autocast
        self.replace(cls, "__init__", self._wrap_autocast(cls.__dict__["__init__"]))
        return True

    def _wrap_training_args(self, original: Callable[..., Any], fix_fp16: bool, fix_tf32: bool) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def __post_init__(args: Any) -> None:
            if not args.use_cpu and _on_neuron():
                name = type(args).__name__
                if fix_fp16 and args.fp16:
                    args.fp16, args.bf16 = False, True
                    patch.warn(
                        "%s(fp16=True) -> bf16=True (accelerate has no fp16 mixed precision on Neuron; bf16 is native)",
                        name,
                    )
                if fix_tf32 and args.tf32:
                    args.tf32 = None
                    patch.warn(
                        "%s(tf32=True) dropped (TF32 is a CUDA matmul mode; transformers raises without CUDA)", name
                    )
            original(args)

        return __post_init__

    def _wrap_accelerator(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def __init__(accelerator: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(accelerator, *args, **kwargs)
            requested = bound.arguments.get("mixed_precision")
            source = "mixed_precision" if requested is not None else "ACCELERATE_MIXED_PRECISION"
            value = str(
                requested if requested is not None else os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
            ).lower()
            if value == "fp16" and not bound.arguments.get("cpu", False) and _on_neuron():
                bound.arguments["mixed_precision"] = "bf16"
                patch.warn('Accelerator %s="fp16" -> "bf16" (accelerate has no fp16 mixed precision on Neuron)', source)
            original(*bound.args, **bound.kwargs)

        return __init__

    def _wrap_autocast(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self
        signature = inspect.signature(original)

        @functools.wraps(original)
        def __init__(autocast: Any, *args: Any, **kwargs: Any) -> None:
            bound = signature.bind(autocast, *args, **kwargs)
            if bound.arguments.get("device_type") == "neuron" and bound.arguments.get("enabled", True):
                import torch

                requested = bound.arguments.get("dtype")
                if (requested if requested is not None else torch.get_autocast_dtype("neuron")) == torch.float16:
                    bound.arguments["dtype"] = torch.bfloat16
                    patch.warn(
                        'torch.autocast("neuron", dtype=%s) -> torch.bfloat16 (bf16 is Neuron\'s mixed precision)',
                        "torch.float16" if requested is not None else "None (PyTorch's default float16)",
                    )
            original(*bound.args, **bound.kwargs)

        return __init__
