"""``generate_inputs``: ``generate()`` keeps its growing token bookkeeping on the CPU on Neuron.

Gap (docs/gaps.md#generate_inputs): callers move prompts onto the model's device before
``generate`` (user code's ``.to(model.device)``, pipelines' ``_ensure_tensor_on_device``,
pipelines/base.py:1205-1211, TRL's ``_prepare_inputs``, grpo_trainer.py:1859, rloo_trainer.py:1371).
The decoding loop then grows ``input_ids`` and ``attention_mask`` by one column per token with
``torch.cat`` on Neuron: every step is a new shape, so a new on-device op graph. Since
transformers 5.15 (#46590) ``prepare_inputs_for_generation`` moves only what the forward
consumes onto the model device (generation/utils.py:780-785), ``generate`` accepts CPU inputs
without a warning (:2973-2983) and copies logits to the inputs' device each step (:3247).

Fix: wrap ``GenerationMixin.generate``. For a model on Neuron, ``inputs``/``input_ids``,
``attention_mask``, ``token_type_ids``, ``mm_token_type_ids`` and ``position_ids`` that sit on
Neuron are moved to the CPU, the original runs, and the generated ``sequences`` (a tensor or
``ModelOutput.sequences``) return to the caller's device, because callers such as TRL keep
computing on them there (``torch.isin(..., device=device)``, grpo_trainer.py:1881). Other output
fields (scores, logits) stay where transformers put them (the inputs' device: the CPU). CPU inputs
are untouched. A model whose own ``prepare_inputs_for_generation`` does not delegate to
transformers' is left alone, since it may not move the inputs back. With a transformers that lacks
step 6 nothing is moved and the patch reports itself inactive. Stands down when
``GenerationMixin.generate`` itself decides about Neuron inputs (its source names ``neuron``).
Trade-off (transformers' own
design): the fp32 logits of one step, ``[batch, vocab]``, cross to the host every step.

Example::

    inputs = tokenizer(prompts, return_tensors="pt").to(model.device)     # on neuron:0
    out = model.generate(**inputs, max_new_tokens=64)
    # before: 64 growing torch.cat on neuron   after: on the CPU; out is still on neuron:0
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from neuroncompat.patch import Patch

_STEP_6 = "move_to_device(model_inputs, self.device)"
_GROWING = ("inputs", "input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids", "position_ids")


class GenerateInputs(Patch):
    id = "generate_inputs"
    reason = "generate() inputs moved to Neuron grow a new on-device shape every token: keep them on the CPU"
    targets = ("transformers.generation.utils",)

    def patch_module(self, name: str, module: ModuleType) -> bool:
        mixin = module.GenerationMixin
        self._base_prepare = mixin.__dict__["prepare_inputs_for_generation"]
        self._delegating: dict[type, bool] = {}
        if _STEP_6 not in inspect.getsource(self._base_prepare):
            self.state, self.detail = "inactive", "this transformers cannot generate from CPU inputs (needs >= 5.15)"
            self.warn("generate inputs stay where callers put them: %s", self.detail)
            return False
        generate = mixin.__dict__["generate"]
        if "neuron" in inspect.getsource(generate):
            return False
        self.replace(mixin, "generate", self._wrap_generate(generate))
        return True

    def _wrap_generate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def generate(model: Any, *args: Any, **kwargs: Any) -> Any:
            if model.device.type != "neuron" or not patch._delegates(type(model)):
                return original(model, *args, **kwargs)
            import torch

            caller_device = None
            if args and isinstance(args[0], torch.Tensor) and args[0].device.type == "neuron":
                caller_device, args = args[0].device, (args[0].cpu(), *args[1:])
            for key in _GROWING:
                value = kwargs.get(key)
                if isinstance(value, torch.Tensor) and value.device.type == "neuron":
                    caller_device, kwargs[key] = value.device, value.cpu()
            if caller_device is None:
                return original(model, *args, **kwargs)
            patch.changed(
                "generate inputs on %s are kept on the CPU while generating; sequences return to %s",
                caller_device,
                caller_device,
            )
            output = original(model, *args, **kwargs)
            if isinstance(output, torch.Tensor):
                return output.to(caller_device)
            output.sequences = output.sequences.to(caller_device)
            return output

        return generate

    def _delegates(self, model_cls: type) -> bool:
        """The model prepares its inputs with transformers' step 6 (its own or via super())."""
        if model_cls not in self._delegating:
            prepare = inspect.getattr_static(model_cls, "prepare_inputs_for_generation", None)
            try:
                self._delegating[model_cls] = (
                    prepare is self._base_prepare
                    or "super().prepare_inputs_for_generation" in inspect.getsource(prepare)
                )
            except (OSError, TypeError):
                self._delegating[model_cls] = False
        return self._delegating[model_cls]
