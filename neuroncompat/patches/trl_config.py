"""``trl_config``: CUDA-only choices in TRL configs (often from CLI flags or YAML) are normalised.

Gap: TRL's scripts (``trl sft ...``) and YAML recipes carry CUDA choices as plain values that
no codemod sees, and on Neuron each fails or defeats static shapes (docs/gaps.md#trl_config;
all reproduced on the simulator by the tests):
- ``optim="paged_adamw_8bit"`` and every bitsandbytes / paged / 8-bit optimizer: "You need to
  install `bitsandbytes`" (bitsandbytes has no Neuron build).
- ``use_liger_kernel=True``: liger's kernels are Triton (CUDA/ROCm) kernels.
- ``packing=True`` with the default ``packing_strategy="bfd"`` turns on padding-free batches
  (trl/trainer/sft_trainer.py:916): one flattened row whose length changes every step (a new
  Neuron graph each time), built for FlashAttention's varlen kernels, which Neuron lacks.
  ``padding_free=True`` does the same without packing.
- ``dataloader_drop_last=False`` (the default): the last short batch is one more graph to compile.
- ``torch_compile_mode="reduce-overhead"``/``"max-autotune..."``: CUDA graphs / inductor autotuning;
  the Neuron backend supports only the default mode ("other modes log a warning and fall back to
  default", TorchNeuron's torch.compile reference), so the mode only misleads.
- ``ddp_backend="nccl"``: accelerate overrides it on Neuron (accelerate/state.py:796-798), so it
  only misleads; cleared.

Fix: wrap the ``__post_init__`` of TRL's ``_BaseConfig`` (trl/trainer/base_config.py:107), the base
of every TRL trainer config, so the values are fixed before ``TrainingArguments`` validates them.
On Neuron (``use_cpu`` not set): those optimizers -> ``adamw_torch``; ``use_liger_kernel`` ->
False; ``padding_free`` -> False; packing with a padding-free strategy (``bfd``, ``bfd_split``) ->
``packing_strategy="wrapped"`` (fixed-length blocks); ``dataloader_drop_last`` -> True;
``torch_compile_mode`` -> None (with ``torch_compile=True`` kept, since a mode implies it);
``ddp_backend="nccl"`` -> None. Every change is logged; values that can work are kept. The two that change
the numbers of a run whose settings could have stayed (the packing strategy: other batches; the last short
batch dropped: other steps) are WARNINGs, once, saying how to keep the original (``NEURONCOMPAT_DISABLE``)
or silence them (setting the new value in the config): users do not see INFO. This
wraps TRL's base rather than ``TrainingArguments.__post_init__``, which the ``precision`` patch
wraps, so each patch's revert restores exactly its own wrapper. Stands down when
``_BaseConfig.__post_init__`` handles Neuron itself (its source names ``neuron``).

Example::

    trl sft --optim paged_adamw_8bit --packing --use_liger_kernel ...   # with import neuroncompat
    # before: ImportError (bitsandbytes)   after: optim=adamw_torch, packing_strategy=wrapped, liger off
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

_PADDING_FREE_STRATEGIES = ("bfd", "bfd_split", "bfd-requeue")


def _cuda_only_optimizer(name: str) -> bool:
    """bitsandbytes (incl. paged) and 8-bit optimizers: no Neuron build."""
    return "bnb" in name or "paged" in name or "8bit" in name or name == "lion_32bit"


class TrlConfig(Patch):
    id = "trl_config"
    reason = "TRL configs carry CUDA-only choices (8-bit/paged optimizers, liger, padding-free packing, compile modes): normalise them"
    targets = ("trl.trainer.base_config",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        cls = module._BaseConfig
        original = cls.__dict__["__post_init__"]
        if "neuron" in inspect.getsource(original):
            return False
        self.replace(cls, "__post_init__", self._wrap_post_init(original))
        return True

    def _wrap_post_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def __post_init__(config: Any) -> None:
            import torch

            from neuroncompat.device import neuron_available

            if not config.use_cpu and neuron_available() and not torch.cuda.is_available():
                patch._normalise(config)
            original(config)

        return __post_init__

    def _normalise(self, config: Any) -> None:
        name = type(config).__name__
        optim = str(getattr(config.optim, "value", config.optim))
        if _cuda_only_optimizer(optim):
            config.optim = "adamw_torch"
            self.warn(
                '%s(optim="%s") -> "adamw_torch" (bitsandbytes/8-bit optimizers have no Neuron build)', name, optim
            )
        if config.use_liger_kernel:
            config.use_liger_kernel = False
            self.warn("%s(use_liger_kernel=True) -> False (liger's Triton kernels do not run on Neuron)", name)
        if getattr(config, "padding_free", False):
            config.padding_free = False
            self.warn(
                "%s(padding_free=True) -> False (one row of changing length per step; built for FlashAttention)", name
            )
        strategy = getattr(config, "packing_strategy", None)
        if getattr(config, "packing", False) and strategy in _PADDING_FREE_STRATEGIES:
            config.packing_strategy = "wrapped"
            self.warn(
                '%s(packing=True, packing_strategy="%s") -> "wrapped" (fixed-length blocks; "%s" means padding-free '
                "batches): the batches and the losses differ from a %s run. To keep it: NEURONCOMPAT_DISABLE=%s "
                '(each batch length is then a new Neuron graph); packing_strategy="wrapped" in the config silences this',
                name,
                strategy,
                strategy,
                strategy,
                self.id,
            )
        if not config.dataloader_drop_last:
            config.dataloader_drop_last = True
            self.warn(
                "%s(dataloader_drop_last=False) -> True (a last short batch is one more Neuron graph): a short last "
                "batch of each epoch is left out, so the steps and the losses differ from a run that keeps it. To keep "
                "it: NEURONCOMPAT_DISABLE=%s; dataloader_drop_last=True in the config silences this",
                name,
                self.id,
            )
        if config.torch_compile_mode not in (None, "default"):
            mode, config.torch_compile_mode, config.torch_compile = config.torch_compile_mode, None, True
            self.warn(
                '%s(torch_compile_mode="%s") -> None (a CUDA mode; the Neuron backend takes none), torch_compile=True kept',
                name,
                mode,
            )
        if config.ddp_backend == "nccl":
            config.ddp_backend = None
            self.changed('%s(ddp_backend="nccl") -> None (accelerate uses the neuron backend on Neuron)', name)
