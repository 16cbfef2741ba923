"""``static_cache``: a static KV cache on Neuron never fails on dtype, and holds bf16.

Gap (TRL #7664): ``StaticLayer.lazy_initialization`` allocates keys *and* values with the key
dtype. Under bf16 autocast with an fp32 model (TRL's default: fp32 weights, ``bf16=True``),
``k_proj``/``v_proj`` return bf16, RoPE promotes the keys back to fp32, and
``values.index_copy_`` fails: "index_copy_(): self and source expected to have the same dtype".
Chunked prefill (``prefill_chunk_size``) allocates both with the model dtype through
``early_initialization`` and fails the same way, still in transformers 5.24
(docs/gaps.md#static_cache).

Fix:
- ``StaticLayer.update`` (and every subclass that overrides it) on Neuron sizes the cache in the
  autocast dtype when the forward runs under autocast, else in the key dtype, casts keys and
  values to the cache's dtype before writing, and re-types a cache allocated ahead of time
  (chunked prefill) before its first write. Under bf16 autocast the cache is bf16: half the
  memory of fp32.
- TRL ``GRPOConfig``/``RLOOConfig`` with ``cache_implementation="static"`` and no dtype in
  ``model_init_kwargs`` load the model in bf16, as the TRL Trainium guide recommends, with one WARNING (it
  changes the losses) naming how to keep TRL's default float32. An explicit dtype is kept.
Both parts stand down when ``StaticLayer.lazy_initialization`` allocates the values in the value
dtype and ``Cache.early_initialization`` no longer takes one ``dtype`` for keys and values.

Example::

    args = GRPOConfig(..., cache_implementation="static")   # model_init_kwargs={"dtype": "bfloat16"}
    GRPOTrainer(model="Qwen/Qwen3-0.6B", args=args, ...).train()   # no index_copy_ error
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

_TRL_CONFIGS = {"trl.trainer.grpo_config": "GRPOConfig", "trl.trainer.rloo_config": "RLOOConfig"}


def _static_layers(cache_utils: ModuleType) -> list[type]:
    """``StaticLayer`` and its subclasses that define their own ``update``."""
    base = cache_utils.StaticLayer
    found = [base]
    for obj in vars(cache_utils).values():
        if isinstance(obj, type) and obj is not base and issubclass(obj, base) and "update" in obj.__dict__:
            found.append(obj)
    return found


def _dtype_gap(cache_utils: ModuleType) -> bool:
    """The static cache still allocates K and V in one dtype, lazily or ahead of time."""
    lazy_fixed = "value_states.dtype" in inspect.getsource(cache_utils.StaticLayer.lazy_initialization)
    # Ahead-of-time allocation (chunked prefill) takes one dtype for K and V, still in 5.24.
    early_single_dtype = "dtype" in inspect.signature(cache_utils.Cache.early_initialization).parameters
    return not lazy_fixed or early_single_dtype


class StaticCache(Patch):
    id = "static_cache"
    reason = "static KV cache under bf16 autocast gets K and V in different dtypes (TRL #7664): keep one dtype, bf16"
    targets = ("transformers.cache_utils", *_TRL_CONFIGS)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "transformers.cache_utils":
            return self._patch_cache(module)
        return self._patch_trl_config(getattr(module, _TRL_CONFIGS[name]))

    # -- the cache ----------------------------------------------------------------------------
    def _patch_cache(self, cache_utils: ModuleType) -> bool:
        if not _dtype_gap(cache_utils):
            return False
        for cls in _static_layers(cache_utils):
            self.replace(cls, "update", self._wrap_update(cls.__dict__["update"]))
        return True

    def _wrap_update(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def update(layer: Any, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
            if key_states.device.type == "neuron":
                key_states, value_states = patch._consistent(layer, key_states, value_states)
            return original(layer, key_states, value_states, *args, **kwargs)

        return update

    def _consistent(self, layer: Any, keys: Any, values: Any) -> tuple[Any, Any]:
        import torch

        target = torch.get_autocast_dtype("neuron") if torch.is_autocast_enabled("neuron") else keys.dtype
        if not layer.is_initialized:
            if keys.dtype != values.dtype or keys.dtype != target:
                self.changed(
                    "static KV cache allocated in %s (keys came as %s, values as %s)", target, keys.dtype, values.dtype
                )
            layer.lazy_initialization(keys.to(target), values.to(target))
        elif not getattr(layer, "_neuroncompat_written", False) and (
            layer.keys.dtype != target or layer.values.dtype != target
        ):
            # Allocated ahead of time in the model dtype (chunked prefill): re-type while empty.
            self.changed(
                "static KV cache allocated ahead of time re-typed %s -> %s before its first write",
                layer.keys.dtype,
                target,
            )
            layer.keys, layer.values = layer.keys.to(target), layer.values.to(target)
            layer.dtype = target
            if not torch.compiler.is_compiling():
                torch._dynamo.mark_static_address(layer.keys)
                torch._dynamo.mark_static_address(layer.values)
        layer._neuroncompat_written = True
        return keys.to(layer.keys.dtype), values.to(layer.values.dtype)

    # -- TRL configs ----------------------------------------------------------------------
    def _patch_trl_config(self, config_cls: type) -> bool:
        from transformers import cache_utils

        if not _dtype_gap(cache_utils):  # the bf16 model only works around the cache's dtype gap
            return False
        original = config_cls.__dict__["__post_init__"]
        patch = self

        @functools.wraps(original)
        def __post_init__(config: Any) -> None:
            original(config)
            if (
                config.cache_implementation != "static"
                or getattr(config, "device", None) is None
                or config.device.type != "neuron"
            ):
                return
            kwargs = config.model_init_kwargs if isinstance(config.model_init_kwargs, dict) else {}
            if "dtype" in kwargs or "torch_dtype" in kwargs:
                return
            config.model_init_kwargs = {**kwargs, "dtype": "bfloat16"}
            patch.warn(  # a default that changes the numbers: said where users see it
                '%s(cache_implementation="static"): model_init_kwargs["dtype"] = "bfloat16" '
                "(a static cache needs a bf16 model on Neuron, per the TRL guide): the model trains in bf16, not in "
                "TRL's default float32, so the losses differ. To keep float32: "
                'model_init_kwargs={"dtype": "float32"} in the config (the cache then holds what the model computes)',
                type(config).__name__,
            )

        self.replace(config_cls, "__post_init__", __post_init__)
        return True
