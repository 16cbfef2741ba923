"""``attention``: flash attention requests become ``sdpa`` on Neuron; flex attention is kept and compiled for Neuron.

Checked against TorchNeuron (torch-neuronx) 2.13.3.0 / 2.14.3.0 (Neuron 2.33.0) and 2.13.3.1 / 2.14.3.1
(Neuron 2.34.0, 2026-11-30), with transformers 5.23.

Gap (docs/gaps.md#attention):
- ``attn_implementation="flash_attention_2"`` (or 3, 4) needs the flash-attn package, whose
  builds are CUDA-only; without it ``_check_and_adjust_attn_implementation``
  (transformers/modeling_utils.py:1710+) tries the kernels-hub fallback, whose builds are
  cuda/xpu/rocm/mps only (``FLASH_ATTN_KERNEL_DEVICES``, modeling_flash_attention_utils.py:87-94),
  and raises "FlashAttention2 has been toggled on, but it cannot be used". No TorchNeuron release
  changes that: flash-attn has no Neuron build.
- ``attn_implementation="flex_attention"`` runs on Neuron (Neuron 2.34.0 release notes: "FlexAttention
  runs faster with more masks"), so it is the user's choice and is kept. transformers compiles
  ``flex_attention`` with no backend (``WrappedFlexAttention.__init__``, integrations/flex_attention.py:84-89):
  inductor, which has no Neuron code generator, unless TorchNeuron's auto-selection of the ``neuron``
  backend ("auto-selected when running on a Neuron device", torch.compile reference) reaches that call,
  which no release documents for a compile made before any tensor is seen.
  Until 2026-12 this patch turned ``flex_attention`` into ``sdpa``; that overrode a choice that works on a trn2.
The value arrives from many places: ``from_pretrained``/``from_config`` keyword, a config with
``_attn_implementation`` set, ``set_attn_implementation``, TRL's ``model_init_kwargs`` (e.g.
``--attn_implementation flash_attention_2`` from ``ModelConfig``).

Fix:
- flash: wrap ``PreTrainedModel._check_and_adjust_attn_implementation``, the one check all of those
  reach (model ``__init__`` at modeling_utils.py:1258 and ``set_attn_implementation`` at :1990), so
  this patch composes with ``device_map``'s ``from_pretrained`` wrapper without touching it. On
  Neuron with CUDA unavailable, a flash implementation whose kernels have no Neuron build becomes
  ``"sdpa"``, with a warning. ``sdpa``, ``eager``, ``flex_attention`` and custom kernels are kept.
  Stands down when every listed flash kernel ships a Neuron build.
- flex: wrap ``WrappedFlexAttention.__init__`` so that the compiled ``flex_attention`` it keeps runs
  ``neuron`` tensors through ``torch.compile(flex_attention, backend="neuron")`` (any other device keeps
  transformers' own compile), which is right whether or not TorchNeuron's auto-selection reaches that
  call. Stands down when transformers names a backend there. The block mask transformers builds with
  ``create_block_mask(..., _compile=True)`` is compiled inside PyTorch, with no backend: the ``compile``
  patch (or the auto-selection) sends it to ``neuron``.

Example::

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="flash_attention_2")
    # before: ImportError (FlashAttention2 ... cannot be used)   after: config._attn_implementation == "sdpa"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="flex_attention")
    # kept: config._attn_implementation == "flex_attention", flex_attention compiled with backend="neuron"
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch


def _flash_without_neuron_build(implementation: str) -> bool:
    """A flash implementation (by name or hub kernel) that has no Neuron build."""
    from transformers import modeling_flash_attention_utils as fa
    from transformers.utils.generic import is_flash_attention_requested

    if not is_flash_attention_requested(requested_attention_implementation=implementation):
        return False
    kernel = fa.FLASH_ATTN_KERNEL_FALLBACK.get(implementation, implementation)
    devices = fa.FLASH_ATTN_KERNEL_DEVICES.get(kernel)
    if devices is None:
        # A flash-attn package name with no hub fallback listed, or a custom kernel repo.
        return implementation.startswith("flash_attention_")
    return "neuron" not in devices


def _flex_compiles_without_backend(module: ModuleType) -> bool:
    """``WrappedFlexAttention`` (where transformers compiles flex attention) names no backend."""
    return "backend" not in inspect.getsource(module.WrappedFlexAttention.__init__)


class Attention(Patch):
    id = "attention"
    reason = (
        "flash_attention_2/3/4 have no Neuron build: use sdpa; flex_attention (kept) is compiled "
        "with no backend: compile it with backend='neuron'"
    )
    targets = ("transformers.modeling_utils", "transformers.integrations.flex_attention")

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "transformers.integrations.flex_attention":
            if not hasattr(module, "WrappedFlexAttention") or not _flex_compiles_without_backend(module):
                return False
            cls = module.WrappedFlexAttention
            self.replace(cls, "__init__", self._wrap_flex_init(cls.__dict__["__init__"]))
            # A fresh singleton, so its compile goes through the wrapper; revert brings back the one before.
            self.replace(cls, "_instance", None)
            return True
        from transformers import modeling_flash_attention_utils as fa

        if all("neuron" in devices for devices in fa.FLASH_ATTN_KERNEL_DEVICES.values()):
            return False
        cls = module.PreTrainedModel
        original = cls.__dict__["_check_and_adjust_attn_implementation"]
        self.replace(cls, "_check_and_adjust_attn_implementation", self._wrap_check(original))
        return True

    def _wrap_check(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def _check_and_adjust_attn_implementation(
            model: Any, attn_implementation: str | None, *args: Any, **kwargs: Any
        ) -> str:
            if isinstance(attn_implementation, str) and patch._cannot_run(attn_implementation):
                patch.warn(
                    'attn_implementation="%s" -> "sdpa" for %s (flash attention kernels have no Neuron build)',
                    attn_implementation,
                    type(model).__name__,
                )
                attn_implementation = "sdpa"
            return original(model, attn_implementation, *args, **kwargs)

        return _check_and_adjust_attn_implementation

    def _cannot_run(self, implementation: str) -> bool:
        import torch

        from neuroncompat.device import neuron_available

        if not neuron_available() or torch.cuda.is_available():
            return False
        return _flash_without_neuron_build(implementation)

    def _wrap_flex_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        patch = self

        @functools.wraps(original)
        def __init__(wrapper: Any, training: bool) -> None:
            before = wrapper._compiled_flex_attention
            original(wrapper, training)
            compiled = wrapper._compiled_flex_attention
            if compiled is not before and compiled is not None:
                wrapper._compiled_flex_attention = patch._per_device(compiled)

        # As transformers marks its own: the compile is made outside any traced region.
        return torch.compiler.disable(__init__, recursive=False)

    def _per_device(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """transformers' compiled flex attention for other devices, ``backend="neuron"`` for ``neuron`` tensors."""
        import torch
        from torch.nn.attention.flex_attention import flex_attention

        patch = self
        for_neuron = torch.compile(flex_attention, backend="neuron")

        def flex_attention_for_the_device(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            if query.device.type == "neuron":
                patch.changed("flex_attention compiled with backend='neuron' (transformers names no backend)")
                return for_neuron(query, key, value, *args, **kwargs)
            return compiled(query, key, value, *args, **kwargs)

        return flex_attention_for_the_device
