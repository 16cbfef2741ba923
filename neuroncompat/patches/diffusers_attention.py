"""``diffusers_attention``: diffusers attention backends that cannot run on Neuron become ``"native"`` (SDPA).

Checked against TorchNeuron (torch-neuronx) 2.13.3.0 / 2.14.3.0 (Neuron 2.33.0) and 2.13.3.1 / 2.14.3.1 (Neuron
2.34.0), with diffusers 0.42.1.

Gap (docs/gaps.md#diffusers_attention): diffusers 0.42.1 picks its attention kernel by name, with no notion of
the device. Every backend but PyTorch's SDPA and ``flex`` needs a CUDA package or a CUDA kernel:

- ``model.set_attention_backend("flash"|"sage"|"xformers"|...)`` (models/modeling_utils.py:608-668) and the
  ``attention_backend(...)`` context manager (models/attention_dispatch.py:379-397) run
  ``_check_attention_backend_requirements`` (:536-608), which raises "... is not usable because of missing
  package" without flash-attn/sageattention/xformers; the hub backends (``flash_hub``, ``sage_hub``,
  ``flash_4_hub``, ``aiter_fa2_hub``, ...; repo ids at :327-373, download :731+) fetch a CUDA build with ``kernels`` and fail
  (no ``torch-neuron`` variant; offline: "not available in the local cache"). ``_native_cudnn``,
  ``_native_efficient`` and ``_native_flash`` force one CUDA SDPA kernel; ``_native_npu``/``_native_xla`` need
  torch_npu/torch_xla. ``flex`` (``_native_flex_attention``: PyTorch's ``flex_attention`` called eagerly, its
  mask from ``create_block_mask`` uncompiled) runs on Neuron since 2.34 ("FlexAttention runs faster with more
  masks") and is kept; until 2026-12 it became ``native`` too.
- ``DIFFUSERS_ATTN_BACKEND=flash`` is read once at import (utils/constants.py:56) into the registry's active
  backend (models/attention_dispatch.py:267) and reaches every attention call with no check at all.
- ``enable_xformers_memory_efficient_attention()`` on a pipeline (pipelines/pipeline_utils.py:1993) or a model
  (models/modeling_utils.py:409) raises ``ModuleNotFoundError`` without xformers.

Fix, on Neuron with CUDA unavailable: ``set_attention_backend`` (on a model and on one attention module,
models/attention.py:161) and ``attention_backend`` get ``"native"`` for any backend other than ``native`` or
``_native_math`` (both PyTorch SDPA) or ``flex`` (PyTorch FlexAttention), kept as given; an active backend read from ``DIFFUSERS_ATTN_BACKEND``
becomes ``native``; ``enable_xformers_memory_efficient_attention()`` does nothing. Each is warned once: the
user asked for a kernel Neuron does not have. ``attention_backend`` is rebound where diffusers' lazy modules
cached it. Stands down when ``_check_attention_backend_requirements`` knows the neuron device.

Example::

    pipe.transformer.set_attention_backend("flash")
    # before: RuntimeError (flash-attn missing)   after: the native SDPA backend, one warning
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

# PyTorch's scaled_dot_product_attention with the kernel left to the backend (native) or its math reference,
# and PyTorch's FlexAttention (runs on Neuron since 2.34).
_RUNS_ON_NEURON = ("native", "_native_math", "flex")
_ENV = "DIFFUSERS_ATTN_BACKEND"


def _on_neuron() -> bool:
    import torch

    from neuroncompat.device import neuron_available

    return neuron_available() and not torch.cuda.is_available()


def _name(backend: Any) -> str | None:
    """The backend's name, lower case (diffusers lowers strings too), or None for a non-backend value."""
    value = getattr(backend, "value", backend)
    return value.lower() if isinstance(value, str) else None


class DiffusersAttention(Patch):
    id = "diffusers_attention"
    reason = (
        "diffusers' flash/sage/xformers/hub attention backends need CUDA: use the native SDPA backend (flex is kept)"
    )
    targets = (
        "diffusers.models.attention_dispatch",
        "diffusers.models.attention",
        "diffusers.models.modeling_utils",
        "diffusers.pipelines.pipeline_utils",
    )

    def patch_module(self, name: str, module: ModuleType) -> bool:
        import diffusers.models.attention_dispatch as dispatch

        if "neuron" in inspect.getsource(dispatch._check_attention_backend_requirements):
            return False
        if name == "diffusers.models.attention_dispatch":
            self._patch_dispatch(module)
        elif name == "diffusers.models.attention":
            self._wrap_setter(module.AttentionModuleMixin)
        elif name == "diffusers.models.modeling_utils":
            self._wrap_setter(module.ModelMixin)
            self._skip_xformers(module.ModelMixin)
        else:
            self._skip_xformers(module.DiffusionPipeline)
        return True

    def native_for(self, backend: Any, where: str) -> Any:
        """``backend``, or ``"native"`` where it cannot run on Neuron (warned once per name and call)."""
        name = _name(backend)
        if name is None or name in _RUNS_ON_NEURON or not _on_neuron():
            return backend
        self.warn(
            '%s("%s") -> "native" (that backend needs CUDA or a CUDA package; Neuron runs PyTorch SDPA)', where, name
        )
        return "native"

    def _patch_dispatch(self, dispatch: ModuleType) -> None:
        registry = dispatch._AttentionBackendRegistry
        active = _name(registry._active_backend)
        if active not in _RUNS_ON_NEURON and _on_neuron():
            self.replace(registry, "_active_backend", dispatch.AttentionBackendName.NATIVE)
            self.warn('%s="%s" -> "native" (that backend needs CUDA or a CUDA package)', _ENV, active)
        original = dispatch.attention_backend
        wrapped = self._wrap_context(original)
        self.replace(dispatch, "attention_backend", wrapped)
        for alias in ("diffusers.models", "diffusers"):
            lazy = sys.modules.get(alias)
            if lazy is not None and lazy.__dict__.get("attention_backend") is original:
                self.replace(lazy, "attention_backend", wrapped)

    def _wrap_context(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        @contextlib.contextmanager
        def attention_backend(backend: Any = "native") -> Iterator[None]:
            with original(patch.native_for(backend, "attention_backend")):
                yield

        return attention_backend

    def _wrap_setter(self, cls: type) -> None:
        original = cls.__dict__["set_attention_backend"]
        patch = self

        @functools.wraps(original)
        def set_attention_backend(module: Any, backend: Any, *args: Any, **kwargs: Any) -> Any:
            where = f"{type(module).__name__}.set_attention_backend"
            return original(module, patch.native_for(backend, where), *args, **kwargs)

        self.replace(cls, "set_attention_backend", set_attention_backend)

    def _skip_xformers(self, cls: type) -> None:
        original = cls.__dict__["enable_xformers_memory_efficient_attention"]
        patch = self

        @functools.wraps(original)
        def enable_xformers_memory_efficient_attention(owner: Any, *args: Any, **kwargs: Any) -> Any:
            if not _on_neuron():
                return original(owner, *args, **kwargs)
            patch.warn(
                "%s.enable_xformers_memory_efficient_attention() skipped (xformers is CUDA-only; "
                "attention stays on the native SDPA backend)",
                type(owner).__name__,
            )
            return None

        self.replace(cls, "enable_xformers_memory_efficient_attention", enable_xformers_memory_efficient_attention)
