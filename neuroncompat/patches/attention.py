"""``attention``: flash attention and flex attention requests become ``sdpa`` on Neuron.

Gap (docs/gaps.md#attention):
- ``attn_implementation="flash_attention_2"`` (or 3, 4) needs the flash-attn package, whose
  builds are CUDA-only; without it ``_check_and_adjust_attn_implementation``
  (transformers/modeling_utils.py:1710+) tries the kernels-hub fallback, whose builds are
  cuda/xpu/rocm/mps only (``FLASH_ATTN_KERNEL_DEVICES``, modeling_flash_attention_utils.py:87-94),
  and raises "FlashAttention2 has been toggled on, but it cannot be used".
- ``attn_implementation="flex_attention"`` loads, but the first forward compiles
  ``flex_attention`` with the default inductor backend (integrations/flex_attention.py:84-89),
  which cannot lower Neuron tensors (``InductorError`` on the simulator).
The value arrives from many places: ``from_pretrained``/``from_config`` keyword, a config with
``_attn_implementation`` set, ``set_attn_implementation``, TRL's ``model_init_kwargs`` (e.g.
``--attn_implementation flash_attention_2`` from ``ModelConfig``).

Fix: wrap ``PreTrainedModel._check_and_adjust_attn_implementation``, the one check all of those
reach (model ``__init__`` at modeling_utils.py:1258 and ``set_attn_implementation`` at :1990), so
this patch composes with ``device_map``'s ``from_pretrained`` wrapper without touching it. On
Neuron with CUDA unavailable, a flash implementation whose kernels have no Neuron build, and
``flex_attention`` while its integration compiles without a backend, become ``"sdpa"``, with a
warning. ``sdpa``, ``eager`` and custom kernels are kept. Stands down when every listed flash
kernel ships a Neuron build and flex attention names a backend.

Example::

    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="flash_attention_2")
    # before: ImportError (FlashAttention2 ... cannot be used)   after: config._attn_implementation == "sdpa"
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


def _flex_compiles_without_backend() -> bool:
    """``WrappedFlexAttention`` (where transformers compiles flex attention) names no backend."""
    from transformers.integrations import flex_attention

    return "backend" not in inspect.getsource(flex_attention.WrappedFlexAttention.__init__)


class Attention(Patch):
    id = "attention"
    reason = "flash_attention_2/3/4 have no Neuron build and flex_attention compiles with inductor: use sdpa"
    targets = ("transformers.modeling_utils",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        from transformers import modeling_flash_attention_utils as fa

        flash_gap = any("neuron" not in devices for devices in fa.FLASH_ATTN_KERNEL_DEVICES.values())
        self._fix_flex = _flex_compiles_without_backend()
        if not (flash_gap or self._fix_flex):
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
                    'attn_implementation="%s" -> "sdpa" for %s (%s)',
                    attn_implementation,
                    type(model).__name__,
                    "flex attention compiles with inductor, which cannot lower Neuron tensors"
                    if attn_implementation == "flex_attention"
                    else "flash attention kernels have no Neuron build",
                )
                attn_implementation = "sdpa"
            return original(model, attn_implementation, *args, **kwargs)

        return _check_and_adjust_attn_implementation

    def _cannot_run(self, implementation: str) -> bool:
        import torch

        from neuroncompat.device import neuron_available

        if not neuron_available() or torch.cuda.is_available():
            return False
        if implementation == "flex_attention":
            return self._fix_flex
        return _flash_without_neuron_build(implementation)
