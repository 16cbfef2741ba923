"""``vllm``: ``use_vllm=True`` fails at once on Neuron, or falls back to transformers generation.

Gap (docs/gaps.md#vllm): TRL's online trainers generate with vLLM when
``use_vllm=True`` (``GRPOConfig.use_vllm``, grpo_config.py:587; RLOO and distillation likewise).
Colocate mode needs vLLM in-process (``VLLMGeneration._init_vllm`` raises ``ImportError`` without
it, trl/generation/vllm_generation.py:294-298), and vLLM's Neuron build brings its own runtime
(libtorch-neuronx-lite), so it cannot share the trainer's process; server mode's weight sync
raises ``NotImplementedError`` ("... needs a CUDA device, got 'neuron'",
trl/generation/vllm_client.py:755-760) only once training has started. Either way the error
comes late (after the model is loaded) or says nothing about Neuron.

Fix: wrap ``GRPOTrainer.__init__``, ``RLOOTrainer.__init__`` and ``DistillationTrainer.__init__``
(the trainers that read ``args.use_vllm``). On Neuron with ``use_vllm=True``, raise a
``ValueError`` that says why and what to do, before the original ``__init__`` loads the model. With
``NEURONCOMPAT_VLLM_FALLBACK=1``: ``use_vllm=False`` and, where the config has no cache set,
``cache_implementation="static"`` (Neuron compiles a static cache once; the ``static_cache``
patch keeps its dtypes consistent), with a WARNING. The trainers are wrapped rather than the
configs because ``static_cache`` and ``trl_config`` already wrap those configs' ``__post_init__``.
Stands down when TRL's ``VLLMGeneration._init_vllm``, where every trainer starts vLLM, has a
Neuron path (its source names ``neuron``).

Example::

    GRPOTrainer(model=path, args=GRPOConfig(..., use_vllm=True), ...)
    # before: ImportError (vllm) after loading the model   after: ValueError naming the fix at once
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat import environment
from neuroncompat.patch import Patch

FALLBACK_ENV = "NEURONCOMPAT_VLLM_FALLBACK"
_TRAINERS = {
    "trl.trainer.grpo_trainer": "GRPOTrainer",
    "trl.trainer.rloo_trainer": "RLOOTrainer",
    "trl.trainer.distillation_trainer": "DistillationTrainer",
}


def _fallback_requested() -> bool:
    return environment.flag(FALLBACK_ENV)


class Vllm(Patch):
    id = "vllm"
    reason = "vLLM cannot share a Neuron training process: fail early, or fall back to transformers generation"
    targets = tuple(_TRAINERS)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        from trl.generation.vllm_generation import VLLMGeneration

        if "neuron" in inspect.getsource(VLLMGeneration._init_vllm):
            return False
        cls = getattr(module, _TRAINERS[name])
        self.replace(cls, "__init__", self._wrap_init(cls.__dict__["__init__"]))
        return True

    def _wrap_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def __init__(trainer: Any, *args: Any, **kwargs: Any) -> None:
            config = kwargs.get("args")
            if config is None:
                config = next((a for a in args if hasattr(a, "use_vllm")), None)
            if getattr(config, "use_vllm", False) and patch._on_neuron():
                patch._handle(type(trainer).__name__, config)
            original(trainer, *args, **kwargs)

        return __init__

    def _handle(self, trainer_name: str, config: Any) -> None:
        if not _fallback_requested():
            raise ValueError(
                f"{trainer_name}: use_vllm=True cannot run on Neuron: vLLM's Neuron build brings its own runtime and cannot "
                "share this training process (colocate), and server mode's weight sync needs CUDA/NCCL. Set use_vllm=False "
                '(transformers generation; cache_implementation="static" recommended), or set '
                f"{FALLBACK_ENV}=1 to have neuroncompat do that."
            )
        config.use_vllm = False
        added_cache = getattr(config, "cache_implementation", "absent") is None
        if added_cache:
            config.cache_implementation = "static"
        self.warn(
            "%s: use_vllm=True -> False (%s=1): generating with transformers%s; expect slower generation than vLLM",
            trainer_name,
            FALLBACK_ENV,
            ', cache_implementation="static"' if added_cache else "",
        )

    @staticmethod
    def _on_neuron() -> bool:
        import torch

        from neuroncompat.device import neuron_available

        return neuron_available() and not torch.cuda.is_available()
